"""QuantizeLinear and DequantizeLinear (opsets 10, 13, 19, 21): per tensor or per axis, an
optional zero point, float32 x and scales.

The arithmetic is ONNX Runtime's (MLAS quantize.cpp and dequantize.cpp), so results equal its
bit for bit: QuantizeLinear divides x by the scale, clamps to the output type's range less the
zero point (a NaN takes the lower bound, as MAXPS gives its second operand for a NaN), rounds half
to even and adds the zero point; DequantizeLinear subtracts the zero point in int32, converts
to float and multiplies by the scale. A node whose inputs are constant (a weight's
DequantizeLinear) is folded at compile time by evaluate(), the same arithmetic in numpy (onnx's
reference has no opset 10 or 13 of either, and rounds otherwise), so the floats are ORT's too.
Blocked quantization (opset 21's block_size) and the float8/int4 types are refused.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Node, Value
from . import common
from .elementwise import elementwise_call
from .registry import Op, register

# The integer types each op's integer side may have, with their ranges.
RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
          "int32": (-2147483648, 2147483647)}
QUANTIZED = ("int8", "uint8", "int16", "uint16")     # QuantizeLinear's outputs
DEQUANTIZABLE = (*QUANTIZED, "int32")               # DequantizeLinear's inputs


def quantize_expr(dt: str, x: str, scale: str, zp: str) -> str:
    """C expression: x (float) quantized with scale and zero point (C expressions) to dtype dt,
    as MLAS's MlasQuantizeLinear computes it."""
    lo, hi = RANGES[dt]
    z = f"(int32_t)({zp})"
    clamped = clamp(f"({x}) / ({scale})", f"(float)({lo} - {z})", f"(float)({hi} - {z})")
    return f"(({dtypes.BY_NAME[dt].c_type})((int32_t)rintf({clamped}) + {z}))"


def clamp(v: str, lo: str, hi: str) -> str:
    """C: v clamped to [lo, hi] as MAXPS then MINPS do (a NaN v gives lo), written as conditionals,
    which the compiler vectorizes (fminf/fmaxf have other NaN rules and stay library calls)."""
    return f"(({v}) > ({lo}) ? (({v}) < ({hi}) ? ({v}) : ({hi})) : ({lo}))"


def dequantize_expr(x: str, scale: str, zp: str) -> str:
    """C expression: x (an integer) dequantized to float, as MLAS's MlasDequantizeLinear does."""
    return f"((float)((int32_t)({x}) - (int32_t)({zp})) * ({scale}))"


class QuantizeBase(Op):
    """What both ops share: the scale and zero point seen broadcast against x (per tensor: a
    scalar; per axis: a 1-D tensor along `axis`)."""
    dynamic_shapes = True
    attrs: dict = {}
    per_axis = False

    def params(self, node: Node, ins: list[Value | None]) -> tuple[Value, Value, Value | None]:
        x, scale = ins[0], ins[1]
        zp = ins[2] if len(ins) > 2 else None
        if scale.dtype.name != "float32":
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): scale {scale.name!r} is {scale.dtype.name}; "
                                     "om2gen quantizes with float32 scales only")
        if self.attrs.get("block_size") is not None and self.attr(node, "block_size"):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): blocked quantization (block_size "
                                     f"{self.attr(node, 'block_size')}) is not supported; quantize per tensor or per "
                                     "axis (onnxruntime.quantization does by default)")
        if zp is not None and zp.shape != scale.shape and not common.prod(zp.shape) == common.prod(scale.shape) == 1:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): zero point shape {list(zp.shape)} differs from the "
                             f"scale's {list(scale.shape)}; ONNX wants the same shape")
        if common.prod(scale.shape) == 1 and len(scale.shape) <= 1:
            view = ()
        elif len(scale.shape) == 1 and self.per_axis:
            a = common.axis(node, self.attr(node, "axis"), len(x.shape))
            if not isinstance(x.shape[a], int) or x.shape[a] != scale.shape[0]:
                raise ShapeError(f"node {node.name!r} ({node.op_type}): scale has {scale.shape[0]} elements but axis "
                                 f"{a} of x {list(x.shape)} has {x.shape[a]}; per-axis scales need one per element")
            view = (1,) * a + (scale.shape[0],) + (1,) * (len(x.shape) - a - 1)
        else:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): scale shape {list(scale.shape)} is neither a scalar "
                             "nor a 1-D per-axis tensor" + ("" if self.per_axis else f" (opset {node.opset} has no axis)"))
        def as_view(v):
            return v if view == v.shape else Value(v.name, v.dtype, view, None if v.const is None else
                                                   np.asarray(v.const).reshape(view))
        return x, as_view(scale), as_view(zp) if zp is not None else None

    def operands(self, node, ins) -> tuple[list[Value], str, str]:
        """(the kernel's operands, the scale and zero point as C): a constant per-tensor scale
        and zero point are literals (the loop then vectorizes as a plain float one), others are
        operands read through broadcasting."""
        x, scale, zp = self.params(node, ins)
        if scale.is_const and not scale.shape and (zp is None or zp.is_const):
            z = "0" if zp is None else str(int(np.asarray(zp.const).reshape(-1)[0]))
            return [x], c_float(np.asarray(scale.const).reshape(-1)[0]), z
        operands = [x, scale] + ([zp] if zp is not None else [])
        return operands, "x1", "x2" if zp is not None else "0"

    def constants(self, node, ins):
        """(x, scale, zero point) as arrays broadcasting against each other (zero point 0 if absent)."""
        x, scale, zp = self.params(node, ins)
        return x.const, scale.const, np.int32(0) if zp is None else zp.const.astype(np.int32)


@register("QuantizeLinear", since=10)
class QuantizeLinear(QuantizeBase):
    def output_dtype(self, node, zp):
        if zp is not None:
            return zp.dtype
        return dtypes.BY_NAME["uint8"]

    def infer(self, node, ins):
        x, scale, zp = self.params(node, ins)
        common.require_float(node, x)
        out = self.output_dtype(node, zp)
        if out.name not in QUANTIZED:
            raise UnsupportedOpError(f"node {node.name!r} (QuantizeLinear): output type {out.name} is not supported "
                                     f"(om2gen quantizes to {', '.join(QUANTIZED)})")
        return [common.out(out, x.shape)]

    def lower(self, node, ins, outs, ctx):
        operands, scale, zp = self.operands(node, ins)
        expr = quantize_expr(outs[0].dtype.name, "x0", scale, zp)
        return elementwise_call(node, f"QuantizeLinear_{outs[0].dtype.name}", operands, outs[0], expr)

    def evaluate(self, node, ins):
        x, scale, zp = self.constants(node, ins)
        dt = self.infer(node, ins)[0].dtype.name
        lo, hi = RANGES[dt]
        v = np.fmin(np.fmax(x / scale, (lo - zp).astype(np.float32)), (hi - zp).astype(np.float32))
        return [(np.rint(v).astype(np.int32) + zp).astype(dt)]


@register("QuantizeLinear", since=13)
class QuantizeLinearAxis(QuantizeLinear):
    attrs = {"axis": 1}
    per_axis = True


@register("QuantizeLinear", since=19)
class QuantizeLinearSaturate(QuantizeLinearAxis):
    """`saturate` concerns float8 outputs only, which om2gen does not have."""
    attrs = {"axis": 1, "saturate": 1}


@register("QuantizeLinear", since=21)
class QuantizeLinearBlocked(QuantizeLinearSaturate):
    attrs = {"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": 0}

    def output_dtype(self, node, zp):
        code = self.attr(node, "output_dtype")
        if code and zp is not None and zp.dtype.onnx != code:
            raise ShapeError(f"node {node.name!r} (QuantizeLinear): output_dtype {code} differs from the zero point's "
                             f"type {zp.dtype.name}; give one of them, or make them agree")
        if code:
            return dtypes.from_onnx(int(code), f"node {node.name!r} (QuantizeLinear) output_dtype")
        return super().output_dtype(node, zp)


@register("DequantizeLinear", since=10)
class DequantizeLinear(QuantizeBase):
    def infer(self, node, ins):
        x, scale, zp = self.params(node, ins)
        if x.dtype.name not in DEQUANTIZABLE:
            raise UnsupportedOpError(f"node {node.name!r} (DequantizeLinear): input {x.name!r} is {x.dtype.name}; om2gen "
                                     f"dequantizes {', '.join(DEQUANTIZABLE)}")
        if zp is not None and zp.dtype != x.dtype:
            raise ShapeError(f"node {node.name!r} (DequantizeLinear): zero point is {zp.dtype.name} but x is "
                             f"{x.dtype.name}; ONNX wants the same type")
        return [common.out(dtypes.FLOAT32, x.shape)]

    def lower(self, node, ins, outs, ctx):
        operands, scale, zp = self.operands(node, ins)
        expr = dequantize_expr("x0", scale, zp)
        return elementwise_call(node, f"DequantizeLinear_{ins[0].dtype.name}", operands, outs[0], expr)

    def evaluate(self, node, ins):
        self.infer(node, ins)
        x, scale, zp = self.constants(node, ins)
        return [np.asarray((x.astype(np.int32) - zp).astype(np.float32) * scale, np.float32)]


@register("DequantizeLinear", since=13)
class DequantizeLinearAxis(DequantizeLinear):
    attrs = {"axis": 1}
    per_axis = True


@register("DequantizeLinear", since=21)
class DequantizeLinearBlocked(DequantizeLinearAxis):
    attrs = {"axis": 1, "block_size": 0}
