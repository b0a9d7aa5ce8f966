"""The integer and quantized matrix products: MatMulInteger, QLinearMatMul, and ONNX Runtime's
com.microsoft MatMulIntegerToFloat, DynamicQuantizeMatMul and QGemm, all on the exact integer
GEMM (ops/igemm.py); only the epilogue differs. Requantization is MLAS's: the int32 sum (+ int32
bias) times the float (a_scale * b_scale) / y_scale, rounded half to even, plus the zero point,
saturated; so the outputs equal ONNX Runtime's bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Value
from . import common, dynamic_quantize
from .gemm import Gemm
from .igemm import Epilogue, igemm_call, matmul_shapes, per_column, require_bytes, require_float_scalar
from .registry import Op, register

MS = "com.microsoft"


def _opt(ins, i):
    return ins[i] if len(ins) > i else None


@register("MatMulInteger", since=10)
class MatMulInteger(Op):
    def infer(self, node, ins):
        require_bytes(node, ins[0], "A")
        require_bytes(node, ins[1], "B")
        return [common.out(dtypes.BY_NAME["int32"], matmul_shapes(node, ins[0], ins[1])[4])]

    def lower(self, node, ins, outs, ctx):
        m, k, n, batch, _, sa, sb = matmul_shapes(node, ins[0], ins[1])
        return igemm_call(node, "MatMulInteger", ins[0], ins[1], outs[0], m=m, n=n, k=k, za=_opt(ins, 2),
                          zb=_opt(ins, 3), epi=Epilogue("I32"), batch_dims=batch, a_batch_strides=sa,
                          b_batch_strides=sb, ctx=ctx)


@register("QLinearMatMul", since=10)
class QLinearMatMul(Op):
    """a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point."""

    def infer(self, node, ins):
        a, sa, za, b, sb, zb, sy, zy = ins[:8]
        for v, what in ((a, "a"), (b, "b"), (zy, "y_zero_point")):
            require_bytes(node, v, what)
        require_float_scalar(node, sa, "a_scale")
        require_float_scalar(node, sy, "y_scale")
        return [common.out(zy.dtype, matmul_shapes(node, a, b)[4])]

    def lower(self, node, ins, outs, ctx):
        a, sa, za, b, sb, zb, sy, zy = ins[:8]
        m, k, n, batch, _, sas, sbs = matmul_shapes(node, a, b)
        return igemm_call(node, "QLinearMatMul", a, b, outs[0], m=m, n=n, k=k, za=za, zb=zb,
                          epi=Epilogue("Q8", sa=sa, sb=sb, sy=sy, zy=zy), batch_dims=batch, a_batch_strides=sas,
                          b_batch_strides=sbs, ctx=ctx)


@register("MatMulIntegerToFloat", since=1, domain=MS)
class MatMulIntegerToFloat(Op):
    """A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?: (A - za)(B - zb) * a_scale * b_scale + bias."""

    def infer(self, node, ins):
        a, b, sa = ins[:3]
        require_float_scalar(node, sa, "a_scale")
        m, k, n, batch, out, _, _ = matmul_shapes(node, a, b)
        bias = _opt(ins, 6)
        if bias is not None:
            per_column(node, bias, n, "bias", "float32")
        return [common.out(dtypes.FLOAT32, out)]

    def lower(self, node, ins, outs, ctx):
        a, b, sa, sb = ins[:4]
        m, k, n, batch, _, sas, sbs = matmul_shapes(node, a, b)
        bias = _bias_row(node, _opt(ins, 6), n)
        return igemm_call(node, "MatMulIntegerToFloat", a, b, outs[0], m=m, n=n, k=k, za=_opt(ins, 4),
                          zb=_opt(ins, 5), epi=Epilogue("F32", sa=sa, sb=sb, bias=bias), batch_dims=batch,
                          a_batch_strides=sas, b_batch_strides=sbs, ctx=ctx)


def _bias_row(node, bias, n):
    """A float bias of N (or one value) as the per-column array the epilogue reads."""
    if bias is None:
        return None
    if bias.size == n:
        return bias
    if not bias.is_const:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): a one-value bias {bias.name!r} must be a "
                                 "constant (om2gen reads the bias per column)")
    return np.full(n, np.asarray(bias.const, np.float32).reshape(-1)[0], np.float32)


@register("DynamicQuantizeMatMul", since=1, domain=MS)
class DynamicQuantizeMatMul(Op):
    """A (float), B, b_scale, b_zero_point?, bias?: A quantized to uint8 as DynamicQuantizeLinear
    does, then MatMulIntegerToFloat."""

    def infer(self, node, ins):
        a, b = ins[:2]
        common.require_float(node, a, "A")
        require_bytes(node, b, "B")
        m, k, n, batch, out, _, _ = matmul_shapes(node, a, b)
        bias = _opt(ins, 4)
        if bias is not None:
            per_column(node, bias, n, "bias", "float32")
        return [common.out(dtypes.FLOAT32, out)]

    def lower(self, node, ins, outs, ctx):
        a, b, sb = ins[:3]
        u8 = dtypes.BY_NAME["uint8"]
        qa = Value(f"{node.name}::a_quantized", u8, a.shape)
        scale = Value(f"{node.name}::a_scale", dtypes.FLOAT32, ())
        zp = Value(f"{node.name}::a_zero_point", u8, ())
        first = dynamic_quantize.call(node, a, qa, scale, zp, temps=[qa, scale, zp])
        m, k, n, batch, _, sas, sbs = matmul_shapes(node, a, b)
        second = igemm_call(node, "DynamicQuantizeMatMul", qa, b, outs[0], m=m, n=n, k=k, za=zp, zb=_opt(ins, 3),
                            epi=Epilogue("F32", sa=scale, sb=sb, bias=_bias_row(node, _opt(ins, 4), n)),
                            batch_dims=batch, a_batch_strides=sas, b_batch_strides=sbs, ctx=ctx)
        return first + [second]


@register("QGemm", since=1, domain=MS)
class QGemm(Op):
    """A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?; transA,
    transB, alpha. Without y_scale the output is float: alpha * a_scale * b_scale * (A - za)(B - zb)
    + C (float C is not allowed: C is int32, scaled as the product); with y_scale, requantized."""
    attrs = {"alpha": 1.0, "transA": 0, "transB": 0}

    def dims(self, node, ins):
        return Gemm.dims(self, node, [ins[0], ins[3]])   # (A and B are inputs 0 and 3)

    def infer(self, node, ins):
        a, sa, za, b = ins[:4]
        require_bytes(node, a, "A")
        require_bytes(node, b, "B")
        require_float_scalar(node, sa, "a_scale")
        m, n, _ = self.dims(node, ins)
        c, zy = _opt(ins, 6), _opt(ins, 8)
        if c is not None:
            per_column(node, c, n, "C", "int32")
        if _opt(ins, 7) is not None and float(self.attr(node, "alpha")) != 1.0:
            raise UnsupportedOpError(f"node {node.name!r} (QGemm): alpha != 1 with a quantized output is not "
                                     "supported; fold alpha into y_scale")
        return [common.out(zy.dtype if zy is not None else dtypes.FLOAT32, (m, n))]

    def lower(self, node, ins, outs, ctx):
        a, sa, za, b, sb, zb = ins[:6]
        c, sy, zy = _opt(ins, 6), _opt(ins, 7), _opt(ins, 8)
        m, n, k = self.dims(node, ins)
        if sy is not None:
            epi = Epilogue("Q8", sa=sa, sb=sb, sy=sy, zy=zy, bias=_int_bias(node, c, n))
        else:
            epi = Epilogue("F32", sa=sa, sb=sb, alpha=float(self.attr(node, "alpha")),
                           bias=None if c is None else _scaled_bias(node, c, sa, sb, n, float(self.attr(node, "alpha"))))
        return igemm_call(node, "QGemm", a, b, outs[0], m=m, n=n, k=k, za=za, zb=zb, epi=epi,
                          trans_a=bool(self.attr(node, "transA")), trans_b=bool(self.attr(node, "transB")), ctx=ctx)


def _int_bias(node, c, n):
    if c is None or c.size == n:
        return c
    if not c.is_const:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): a one-value C {c.name!r} must be a constant")
    return np.full(n, np.asarray(c.const, np.int32).reshape(-1)[0], np.int32)


def _scaled_bias(node, c, sa, sb, n, alpha):
    """QGemm's int32 C with a float output: C * a_scale * b_scale * alpha per column, computed
    now (ONNX Runtime adds it so, as the float bias of the scaled product)."""
    if not (c.is_const and sa.is_const and sb.is_const):
        raise UnsupportedOpError(f"node {node.name!r} (QGemm): with a float output, C, a_scale and b_scale must be "
                                 "constants")
    scale = np.float32(np.asarray(sa.const, np.float32).reshape(-1)[0]) * np.asarray(sb.const, np.float32).reshape(-1)
    return (np.asarray(c.const, np.int32).reshape(-1).astype(np.float32) * scale * np.float32(alpha)).astype(
        np.float32) * np.ones(n, np.float32)
