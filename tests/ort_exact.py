"""ONNX Runtime's exact answer for an int8 model on a CPU without VNNI.

There ORT's u8 x s8 (and s8 x s8) integer products run MLAS's AVX2 kernel, which adds pairs of
products into 16 bits with saturation (vpmaddubsw): a pair over 32767 is clipped, and
MatMulInteger, QLinearConv, QGemm and the QDQ models folded into them come out wrong (on a
Zen 3, MatMulInteger of full-range values: 72% of the outputs, by up to 40000). Its u8 x u8
kernel widens to 16 bits first and is exact. So the reference is ORT running the same model
with every int8 tensor stored as uint8 plus 128 and every int8 zero point plus 128: each
(value - zero point) is unchanged, so the model computes the same function, on ORT's exact
kernel. Where the CPU has VNNI ORT is exact as it is, and is run unchanged.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from om2gen.toolchain import targets

ORT_INT8_EXACT = bool({"avx512_vnni", "avx_vnni"} & targets.host_features())

# ops whose int8 operands may be shifted to uint8 with their zero points, computing the same
PRODUCTS = {  # op: (operand index, its zero point's index) pairs whose zero point may be absent
    "MatMulInteger": ((0, 2), (1, 3)), "ConvInteger": ((0, 2), (1, 3)),
    "MatMulIntegerToFloat": ((0, 4), (1, 5)), "DynamicQuantizeMatMul": ((1, 3),),
}
SHIFTABLE = set(PRODUCTS) | {
    "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "QGemm", "DynamicQuantizeLSTM",
    "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat", "QLinearAveragePool",
    "QLinearGlobalAveragePool", "QLinearSoftmax", "DynamicQuantizeLinear",
    # data movement and order-keeping ops, on integers the same after the shift
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split", "Slice", "Gather", "Identity",
    "MaxPool", "Expand", "Tile",
}
_PRODUCT_OPS = set(PRODUCTS) | {"QLinearConv", "QLinearMatMul", "QGemm", "DynamicQuantizeLSTM"}
_FOLDED_INTO_PRODUCTS = {"Conv", "MatMul", "Gemm"}   # after a DequantizeLinear: ORT's QDQ folding


def _has_products(g) -> bool:
    dequantized = {o for n in g.node if n.op_type == "DequantizeLinear" for o in n.output}
    return any(n.op_type in _PRODUCT_OPS or n.op_type in _FOLDED_INTO_PRODUCTS and set(n.input) & dequantized
               for n in g.node)


def _flip(a: np.ndarray) -> np.ndarray:
    return (a.view(np.uint8) ^ np.uint8(0x80)).astype(np.uint8)


def _casts_to_int8(node) -> bool:
    return node.op_type == "Cast" and any(a.name == "to" and a.i == TensorProto.INT8 for a in node.attribute)


def _shifted(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with its int8 tensors as uint8 + 128, or None when it has none or an op this
    rewrite does not know takes one (then it is run unchanged)."""
    g = model.graph
    int8 = {t.name for t in g.initializer if t.data_type == TensorProto.INT8}
    int8 |= {v.name for v in [*g.input, *g.output, *g.value_info] if v.type.tensor_type.elem_type == TensorProto.INT8}
    if not int8 or not _has_products(g):
        return None
    if any(n.op_type not in SHIFTABLE for n in g.node if set(n.input) & int8) or any(_casts_to_int8(n) for n in g.node):
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.INT8:
            g.initializer[i].CopyFrom(numpy_helper.from_array(_flip(numpy_helper.to_array(t)), t.name))
    for v in [*g.input, *g.output, *g.value_info]:
        if v.type.tensor_type.elem_type == TensorProto.INT8:
            v.type.tensor_type.elem_type = TensorProto.UINT8
    for n in g.node:
        for a in n.attribute:
            if a.name == "output_dtype" and a.i == TensorProto.INT8:   # QuantizeLinear-21
                a.i = TensorProto.UINT8
        for operand, zp in PRODUCTS.get(n.op_type, ()):
            if operand < len(n.input) and n.input[operand] in int8 and (zp >= len(n.input) or not n.input[zp]):
                name = f"{n.input[operand]}_zero_point_128"
                if name not in {t.name for t in g.initializer}:
                    g.initializer.append(numpy_helper.from_array(np.array(128, np.uint8), name))
                while len(n.input) <= zp:
                    n.input.append("")
                n.input[zp] = name
    return m


def run_exact(model: onnx.ModelProto, feeds: dict, run) -> list[np.ndarray]:
    """run(model, feeds) (ORT), on the uint8 form of an int8 model where ORT's int8 kernels are
    inexact; int8 inputs are fed and int8 outputs returned as the model has them."""
    shifted = None if ORT_INT8_EXACT else _shifted(model)
    if shifted is None:
        return run(model, feeds)
    int8_out = [o.type.tensor_type.elem_type == TensorProto.INT8 for o in model.graph.output]
    outs = run(shifted, {k: _flip(v) if v.dtype == np.int8 else v for k, v in feeds.items()})
    return [_flip(o).view(np.int8) if flip else o for o, flip in zip(outs, int8_out)]
