"""Values that depend on shapes only: Shape, Size (compile-time constants, as every shape is
static), and generated tensors: ConstantOfShape, Range, EyeLike.

ConstantOfShape and Range take their shape/bounds from constant inputs, so the frontend usually
folds them; they reach lowering only when their output is too big to fold into the archive, and
then a kernel fills it (templates/kernels/generate.c.j2: out[i] = an expression of i).
"""
from __future__ import annotations

import math

import numpy as np

from ..codegen.literals import c_int
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import Value
from ..ir.program import KernelCall
from . import common, range_runtime
from .movement import c_value
from .registry import Op, register


def _generate(node, dst: Value, expr: str, detail: str) -> KernelCall:
    params = {"summary": f"{node.op_type} {detail}-> {dst.describe()}", "ctype": dst.dtype.c_type, "expr": expr,
              "count": dst.size if dst.is_static else symbolic.text(dst.size)}   # (a comment: the tiling counts)
    return KernelCall("kernels/generate.c.j2", node.op_type, params, [], [dst.name],
                      block_dim=common.block_dim_for(dst.size), tiling={"count": dst.size})


MAX_DIMS_VALUES = 48   # the elements a dims value's kernel takes as tiling words (OM2_OP_HOST_MAX_TILING: 64)


def dims_call(node, v: Value) -> KernelCall:
    """The kernel that writes value `v`, computed from a dynamic model's input shapes (its `dims`,
    frontend/shape_dims.py), into its tensor for a kernel that reads it as data (a Loop's trip
    count from Shape(x)[0], say): each element a tiling word, which the run computes from its
    symbols (templates/kernels/dims_values.c.j2)."""
    elements = list(v.dims.reshape(-1))
    if len(elements) > MAX_DIMS_VALUES:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}) reads {v.name!r} as data, a tensor of "
                                 f"{len(elements)} elements computed from the input shapes; om2gen writes at most "
                                 f"{MAX_DIMS_VALUES} such elements at run time: pin the shapes it is computed from")
    fields = {f"v{i}": d if isinstance(d, symbolic.Expr) else int(d) for i, d in enumerate(elements)}
    params = {"summary": f"{v.name!r} from the input shapes -> {v.describe()}", "ctype": v.dtype.c_type,
              "fields": list(fields), "elements": ", ".join(symbolic.text(d) for d in elements)}
    return KernelCall("kernels/dims_values.c.j2", "DimsValues", params, [], [v.name], tiling=fields)


@register("Shape", since=1)
class Shape(Op):
    """The output is a constant: the frontend drops the node and keeps the value."""

    def dims(self, node, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape

    def infer(self, node, ins):
        arr = np.array(self.dims(node, ins[0].shape), dtype=np.int64)
        return [Value("", dtypes.INT64, tuple(arr.shape), arr)]


@register("Shape", since=15)
class Shape15(Shape):
    """Shape-15+: dims [start, end), negatives counting from the end, clamped to [0, rank]."""
    attrs = {"start": 0, "end": None}

    def dims(self, node, shape):
        end = self.attr(node, "end")
        return shape[int(self.attr(node, "start")):None if end is None else int(end)]


@register("Size", since=1)
class Size(Op):
    """The output is a constant: the frontend drops the node and keeps the value."""

    def infer(self, node, ins):
        return [Value("", dtypes.INT64, (), np.array(ins[0].size, dtype=np.int64))]


@register("ConstantOfShape", since=9)
class ConstantOfShape(Op):
    dynamic_shapes = True
    attrs = {"value": None}

    def value(self, node) -> np.ndarray:
        v = self.attr(node, "value")
        v = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
        if v.size != 1:
            raise ShapeError(f"node {node.name!r} (ConstantOfShape): value must hold one element, got {v.size}")
        return v

    def infer(self, node, ins):
        shape = common.const_ints(node, ins[0], "the output shape")
        if any(d < 0 for d in shape):
            raise ShapeError(f"node {node.name!r} (ConstantOfShape): negative dim in shape {shape}")
        return [common.out(dtypes.from_numpy(self.value(node).dtype), shape)]

    def lower(self, node, ins, outs, ctx):
        v = self.value(node)[0]
        return _generate(node, outs[0], c_value(outs[0].dtype, v), f"value={v} ")


_RANGE_TYPES = ("float32", "float64", "int16", "int32", "int64")


@register("Range", since=11)
class Range(Op):
    dynamic_shapes = True

    def bounds(self, node, ins) -> tuple:
        names = ("start", "limit", "delta")
        for v, what in zip(ins, names):
            if v.dtype != ins[0].dtype:
                raise ShapeError(f"node {node.name!r} (Range): start, limit and delta must share one dtype")
            if v.size != 1:
                raise ShapeError(f"node {node.name!r} (Range): {what} must be a scalar, got {list(v.shape)}")
        if ins[0].dtype.name.startswith("float"):
            return tuple(common.const_ints_or_floats(node, v, what) for v, what in zip(ins, names))
        return tuple(common.const_ints(node, v, what)[0] for v, what in zip(ins, names))

    def infer(self, node, ins):
        if range_runtime.is_data_dependent(ins):   # a length the run decides
            return range_runtime.infer(node, ins)
        start, limit, delta = self.bounds(node, ins)
        if any(isinstance(v, symbolic.Expr) for v in (start, limit, delta)):   # a length from the input shapes
            if not isinstance(delta, int) or delta == 0:
                raise symbolic.Undecidable(f"a Range whose step ({delta}) is not a non-zero constant")
            count = symbolic.smax(symbolic.ceildiv(limit - start, delta) if delta > 0
                                  else symbolic.ceildiv(start - limit, -delta), 0)
            return [common.out(ins[0].dtype, (count,))]
        if not (math.isfinite(start) and math.isfinite(limit)) or math.isnan(delta):
            raise ShapeError(f"node {node.name!r} (Range): start {start} and limit {limit} must be finite and delta "
                             f"{delta} a number (the output's length is ceil((limit - start) / delta))")
        if delta == 0:
            raise ShapeError(f"node {node.name!r} (Range): delta is 0")
        count = max(int(np.ceil((limit - start) / delta)), 0)
        return [common.out(ins[0].dtype, (count,))]

    def lower(self, node, ins, outs, ctx):
        if range_runtime.is_data_dependent(ins):
            return range_runtime.lower(node, ins, outs)
        start, limit, delta = self.bounds(node, ins)
        dst = outs[0]
        if dst.dtype.name not in _RANGE_TYPES:   # (a folded Range takes any dtype)
            raise UnsupportedOpError(f"node {node.name!r} (Range): a {dst.dtype.name} range too big to fold is not "
                                     f"supported ({', '.join(_RANGE_TYPES)})")
        if dst.dtype.name.startswith("float"):
            # start + i * delta in double: one rounding per element, no drift along the range.
            expr = f"({dst.dtype.c_type})({float(start).hex()} + (double)i * {float(delta).hex()})"
        else:
            expr = f"({dst.dtype.c_type})({c_int(start)} + i * {c_int(delta)})"
        return _generate(node, dst, expr, f"start={start} limit={symbolic.text(limit)} delta={delta} ")


@register("EyeLike", since=9)
class EyeLike(Op):
    dynamic_shapes = True
    attrs = {"dtype": None, "k": 0}

    def infer(self, node, ins):
        x = ins[0]
        if len(x.shape) != 2:
            raise ShapeError(f"node {node.name!r} (EyeLike): input must be 2-D, got {list(x.shape)}")
        dt = self.attr(node, "dtype")
        dtype = x.dtype if dt is None else dtypes.from_onnx(int(dt), f"node {node.name!r} (EyeLike) dtype")
        return [common.out(dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        dst = outs[0]
        cols = dst.shape[1]
        k = int(self.attr(node, "k"))
        one, zero = c_value(dst.dtype, 1), c_value(dst.dtype, 0)
        # Element i is at row i / cols, column i % cols: on the k-th diagonal when column - row = k.
        expr = f"i % {c_int(cols)} - i / {c_int(cols)} == {c_int(k)} ? {one} : {zero}"
        return _generate(node, dst, expr, f"k={k} ")
