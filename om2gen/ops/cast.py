"""Cast and CastLike between every dtype om2gen has (ir/dtypes.py).

Rules: to bool, nonzero (NaN included) is 1; float to integer truncates toward zero, going
through int32/int64 first so that out-of-range values wrap the same way in scalar and vector code
(C leaves them undefined); float16 converts exactly to float and from float/double rounds to
nearest even. `saturate` (opset 19) and `round_mode` (opset 24) only concern float8/float8e8m0,
which om2gen does not have: such a `to` is rejected as an unsupported dtype.
"""
from __future__ import annotations

from ..codegen import float16
from ..ir import dtypes
from ..ir.dtypes import DType
from ..ir.program import Alias
from . import common
from .elementwise import elementwise_call
from .math import FLOATS
from .registry import REQUIRED, Op, register

# How a float value reaches each integer type: the C conversion to a type wide enough, then
# truncation to the target's bits (x86's cvtt* give INT_MIN for NaN and out-of-range values).
_VIA = {"int8": "int32_t", "uint8": "int32_t", "int16": "int32_t", "uint16": "int32_t", "int32": "int32_t",
        "uint32": "int64_t", "int64": "int64_t"}


def _float_to_int(f: str, to: DType) -> str:
    if to.name == "uint64":
        return f"(({f}) >= 0x1p63 ? (uint64_t)({f}) : (uint64_t)(int64_t)({f}))"
    return f"(({to.c_type})({_VIA[to.name]})({f}))"


def cast_expr(src: DType, to: DType, x: str = "x0") -> str:
    """C expression converting `x` (a parameter name) of dtype src to dtype to."""
    s, t = src.name, to.name
    if t == "bool":
        return f"((uint8_t){float16.nonzero(x)})" if s == "float16" else f"((uint8_t)({x} != 0))"
    if s == "bool":
        return float16.from_bool(x) if t == "float16" else f"(({to.c_type})({x} != 0))"
    if t == "float16":
        if s == "float64":
            return float16.from_f64(x)
        return float16.from_f32(x if s == "float32" else f"(float){x}")   # integers up to 2^24 are exact in float
    value = float16.to_f32(x) if s == "float16" else x
    if t in FLOATS or s not in FLOATS:
        return f"(({to.c_type})({value}))"
    return _float_to_int(value, to)


def _target(node, code) -> DType:
    return dtypes.from_onnx(int(code), f"node {node.name!r} ({node.op_type}) target type")


class CastBase(Op):
    dynamic_shapes = True

    def target(self, node, ins) -> DType:
        raise NotImplementedError

    def infer(self, node, ins):
        return [common.out(self.target(node, ins), ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        src, to = ins[0].dtype, outs[0].dtype
        if src == to:
            return Alias(ins[0].name)
        return elementwise_call(node, f"Cast_{src.name}_to_{to.name}", ins[:1], outs[0], cast_expr(src, to))


@register("Cast", since=6)
class Cast(CastBase):
    attrs = {"to": REQUIRED}

    def target(self, node, ins):
        return _target(node, self.attr(node, "to"))


@register("Cast", since=19)
class CastSaturate(Cast):
    attrs = {"to": REQUIRED, "saturate": 1}


@register("Cast", since=24)
class CastRoundMode(Cast):
    attrs = {"to": REQUIRED, "saturate": 1, "round_mode": "up"}


@register("CastLike", since=15)
class CastLike(CastBase):
    """Cast to the dtype of the second input (only its dtype is read, never its data)."""

    def target(self, node, ins):
        return ins[1].dtype


@register("CastLike", since=19)
class CastLikeSaturate(CastLike):
    attrs = {"saturate": 1}


@register("CastLike", since=24)
class CastLikeRoundMode(CastLike):
    attrs = {"saturate": 1, "round_mode": "up"}
