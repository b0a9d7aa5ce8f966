"""Custom operators: nodes whose op type a custom-op library registers (om2gen/so_in_om/custom_libraries.py).

infer() runs the operator's own InferShape, Compile and Serialize once per node (through the
runtime's factory) and keeps the serialized instance; lower() turns the node into a
CUSTOM_KERNEL task whose .bin the model library deserializes at load.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..errors import CompileError, UnsupportedOpError
from ..formats.om2 import layout
from ..ir import dtypes
from ..ir.dtypes import OMITTED
from ..ir.graph import Value
from ..ir.program import CustomCall
from ..so_in_om import custom_libraries
from .registry import Op, register_custom

CUSTOM = "_custom"      # node.attrs key: {"op_type", "blob", "library"}
_KINDS = {int: 0, float: 1, str: 2}



class CustomOp(Op):
    """Not registered by type: registry.lookup returns it for op types of the active libraries."""

    def __init__(self, op_type: str):
        self.op_type = op_type

    def infer(self, node, ins):
        from ..native import ffi, lib
        library = custom_libraries.require(node)
        if any(v is None for v in ins):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): custom operators take no absent inputs")
        n_out = len(node.outputs)
        in_descs = ffi.new("Om2CustomTensorDesc[]", max(len(ins), 1))
        for i, v in enumerate(ins):
            _fill_desc(node, in_descs[i], v)
        out_descs = ffi.new("Om2CustomTensorDesc[]", max(n_out, 1))
        for i, name in enumerate(node.outputs):
            if not name:    # omitted: InferShape and Compile see a null desc at this position
                out_descs[i].data_type = OMITTED.acl
        keep, attrs = [], ffi.new("Om2CustomAttr[]", max(len(node.attrs), 1))
        names = [k for k in sorted(node.attrs) if not k.startswith("_")]
        for i, name in enumerate(names):
            _fill_attr(node, attrs[i], name, node.attrs[name], keep)
        blob, size = ffi.new("uint8_t **"), ffi.new("size_t *")
        err = ffi.new("char[]", 1024)
        rc = lib.om2x_custom_prepare(node.op_type.encode(), node.name.encode(), in_descs, len(ins), out_descs, n_out,
                                     attrs, len(names), blob, size, err, 1024)
        if rc != 0:
            raise CompileError(f"node {node.name!r}: custom operator {node.op_type} (from {library.name}): "
                               f"{ffi.string(err).decode('utf-8', 'replace')}")
        try:
            data = bytes(ffi.buffer(blob[0], size[0]))
        finally:
            lib.om2x_free(blob[0])
        node.attrs[CUSTOM] = {"op_type": node.op_type, "blob": data, "library": library}
        outs = []
        for i in range(n_out):
            d = out_descs[i]
            if not node.outputs[i]:
                outs.append(Value("", dtypes.FLOAT32, ()))   # a placeholder nobody reads
                continue
            if d.data_type not in dtypes.BY_ACL or d.dim_num > 8:
                raise CompileError(f"node {node.name!r}: custom operator {node.op_type} InferShape left output {i} "
                                   f"without a valid dtype/shape")
            outs.append(Value("", dtypes.BY_ACL[d.data_type], tuple(int(d.dims[j]) for j in range(d.dim_num))))
        return outs

    def lower(self, node, ins, outs, ctx):
        info = node.attrs[CUSTOM]
        digest = hashlib.sha256(info["blob"]).hexdigest()[:16]
        return CustomCall(op_type=node.op_type, bin_name=layout.custom_op_bin_name(node.op_type, digest),
                          blob=info["blob"], library=info["library"].sha256, inputs=[v.name for v in ins],
                          outputs=list(node.outputs))   # "" at an omitted position (OMITTED)


def _fill_desc(node, desc, v: Value) -> None:
    if len(v.shape) > 8:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): custom operators take tensors of rank <= 8")
    desc.data_type = v.dtype.acl
    desc.dim_num = len(v.shape)
    for j, d in enumerate(v.shape):
        desc.dims[j] = d


def _fill_attr(node, attr, name: str, value, keep: list) -> None:
    from ..native import ffi
    cname = ffi.new("char[]", name.encode())
    keep.append(cname)
    attr.name = cname
    if isinstance(value, (bool, int, np.integer)):
        ints = ffi.new("int64_t[]", [int(value)])
        keep.append(ints)
        attr.kind, attr.count, attr.ints = 0, 1, ints
    elif isinstance(value, (float, np.floating)):
        floats = ffi.new("float[]", [float(value)])
        keep.append(floats)
        attr.kind, attr.count, attr.floats = 1, 1, floats
    elif isinstance(value, str):
        s = ffi.new("char[]", value.encode())
        keep.append(s)
        attr.kind, attr.count, attr.str = 2, 1, s
    elif isinstance(value, (list, tuple)) and all(isinstance(x, (int, np.integer)) for x in value):
        ints = ffi.new("int64_t[]", [int(x) for x in value] or [0])
        keep.append(ints)
        attr.kind, attr.count, attr.ints = 3, len(value), ints
    elif isinstance(value, (list, tuple)) and all(isinstance(x, (int, float, np.number)) for x in value):
        floats = ffi.new("float[]", [float(x) for x in value] or [0.0])
        keep.append(floats)
        attr.kind, attr.count, attr.floats = 4, len(value), floats
    else:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): attribute {name!r} of type "
                                 f"{type(value).__name__} cannot be passed to a custom operator")


register_custom(CustomOp)
