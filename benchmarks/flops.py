"""Floating-point operations of a model's Conv, ConvTranspose, Gemm and MatMul nodes (a
multiply-add counts 2), from ONNX shape inference with the benchmark's input shapes pinned.
Everything else (element-wise ops, pooling, normalisation) is left out: it is a small share of
the work in the models we report GFLOP/s for, and it is not FMA work."""
from __future__ import annotations

import math

import onnx
from onnx import shape_inference


def _pin_inputs(model: onnx.ModelProto, shapes: dict) -> onnx.ModelProto:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in model.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for d in shapes[vi.name]:
                dims.add().dim_value = int(d)
    return model


def _shapes(model: onnx.ModelProto) -> dict:
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            out[vi.name] = [d.dim_value for d in dims]
    for init in inferred.graph.initializer:
        out[init.name] = list(init.dims)
    return out


def count(model: onnx.ModelProto, input_shapes: dict | None = None) -> dict:
    """{"flops": total, "by_op": {op: flops}, "unknown": [node names whose shapes did not infer]}."""
    shapes = _shapes(_pin_inputs(model, input_shapes or {}))
    by_op: dict[str, int] = {}
    unknown = []
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        try:
            flops = _node_flops(node, shapes)
        except KeyError:
            unknown.append(node.name or node.output[0])
            continue
        by_op[node.op_type] = by_op.get(node.op_type, 0) + flops
    return {"flops": sum(by_op.values()), "by_op": by_op, "unknown": unknown}


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _node_flops(node, shapes) -> int:
    if node.op_type == "Conv":
        w, y = shapes[node.input[1]], shapes[node.output[0]]
        # every output element: (C_in / group) * prod(kernel) multiply-adds
        return 2 * math.prod(y) * math.prod(w[1:])
    if node.op_type == "ConvTranspose":
        x, w = shapes[node.input[0]], shapes[node.input[1]]
        # every input element scatters into (C_out / group) * prod(kernel) outputs; w is [C_in, C_out / group, k...]
        return 2 * math.prod(x) * math.prod(w[1:])
    if node.op_type == "Gemm":
        a, y = shapes[node.input[0]], shapes[node.output[0]]
        k = a[0] if _attr(node, "transA", 0) else a[1]
        return 2 * math.prod(y) * k
    a, y = shapes[node.input[0]], shapes[node.output[0]]   # MatMul: every output element, K multiply-adds
    return 2 * math.prod(y) * a[-1]
