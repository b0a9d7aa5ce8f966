"""com.microsoft QLinearSoftmax (what ONNX Runtime's QDQ transformer makes of DequantizeLinear ->
Softmax -> QuantizeLinear, and the QOperator format's op), with ORT's own arithmetic
(contrib_ops/cpu/quantization/qlinear_softmax.cc), which is not quantize(softmax(dequantize(x))):

- a table of 256 floats made at compile time: exp((i - 255 + shift) * x_scale) in double, where
  shift = max(0, log(FLT_MAX / D) - 5) / x_scale keeps the row sum finite (D: the row length;
  FLT_MAX / D and its log in float, as ORT's C++ computes them: a double log gives another table,
  one output step apart on a real model's attention), cast to float; int8 inputs index it with
  their byte moved so that the row's maximum lands on the table's last entry (uint8: the table
  read from 255 - max; int8: x + 127 - max);
- per row, the looked-up values summed in float in order, then each output
  rint(value * floor(1 / y_scale) / sum) + y_zero_point, saturated above (ORT 1.32 gives 127
  for int8 where its source reads as a wrap to -128: tests/ops/test_qlinear_softmax.py has the
  case; below, the zero point is the least a value can be).

The zero point of x does not enter (a softmax is shift-invariant, and ORT ignores it). Softmax
over the last axis only (opset >= 13; ORT transposes for another axis, om2gen refuses); for
opset < 13 the row is everything from `axis` on, which must then be the last axis.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from ..codegen.literals import c_float
from ..errors import UnsupportedOpError
from ..ir.program import Derived, KernelCall
from . import common
from .qlinear import MS, check_type, scale_of, zero_point_of
from .registry import Op, register


@functools.lru_cache(maxsize=1)
def _libm():
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    logf = ctypes.CDLL(name).logf
    logf.restype, logf.argtypes = ctypes.c_float, [ctypes.c_float]
    return logf


def _logf(x: np.float32) -> float:
    """logf(x) as ORT's C++ calls it (the C library's, correctly rounded in glibc); numpy's float32
    log differs from it in the last bit for 3% of the row lengths. Without a C library, the
    double log rounded to float (which differs for about 1 in 70000)."""
    logf = _libm()
    return float(logf(float(x))) if logf is not None else float(np.float32(math.log(float(x))))


def table(x_scale: np.float32, length: int, signed: bool) -> np.ndarray:
    """ORT's QlinearBuildLookupTableUint32: the 256 exp values, at the byte positions it reads them."""
    limit = np.float32(np.finfo(np.float32).max) / np.float32(length)
    shift = max(0.0, _logf(limit) - 5) / float(x_scale)
    out = np.empty(256, np.float32)
    for i in range(256):
        out[(i - 128) & 0xFF if signed else i] = np.float32(math.exp((i - 255 + shift) * float(x_scale)))
    return out


@register("QLinearSoftmax", since=1, domain=MS)
class QLinearSoftmax(Op):
    """Inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point; attributes axis, opset (the
    Softmax's opset the QDQ form came from)."""
    attrs = {"axis": None, "opset": -1}

    def axis(self, node, x) -> int:
        opset = int(self.attr(node, "opset"))
        axis = self.attr(node, "axis")
        axis = (1 if opset < 13 else -1) if axis is None else int(axis)
        axis = common.axis(node, axis, len(x.shape))
        if axis != len(x.shape) - 1:
            raise UnsupportedOpError(f"node {node.name!r} (QLinearSoftmax): axis {axis} of input {list(x.shape)} is "
                                     "not the last; om2gen computes QLinearSoftmax over the last axis (transpose the "
                                     "input, or quantize the model with Softmax left float)")
        return axis

    def infer(self, node, ins):
        check_type(node, ins[0])
        self.axis(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        x, dt = ins[0], ins[0].dtype.name
        self.axis(node, x)
        get = (lambda i: ins[i] if i < len(ins) else None)
        sx, sy = scale_of(node, get(1), "X_scale"), scale_of(node, get(3), "Y_scale")
        zy = zero_point_of(node, get(4), "Y_zero_point")
        length = x.shape[-1]
        rows = common.prod(x.shape[:-1])
        signed = dt == "int8"
        params = {"summary": f"QLinearSoftmax: {x.describe()} -> {outs[0].describe()} (ONNX Runtime's table and "
                             "rounding)",
                  "ctype": x.dtype.c_type, "len": length, "signed": int(signed), "zero_point": zy,
                  "y_scale": c_float(np.floor(np.float32(1.0) / sy))}
        sources = tuple(v.name for v in ins[1:] if v is not None)
        return KernelCall("kernels/qlinear_softmax.c.j2", f"QLinearSoftmax_{dt}", params,
                          [x.name, Derived(table(sx, length, signed), sources, "QLinearSoftmax's table of exp values")],
                          [outs[0].name], block_dim=common.block_dim_for(rows, 3 * length), tiling={"rows": rows})
