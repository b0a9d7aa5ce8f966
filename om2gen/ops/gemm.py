"""Gemm and MatMul: one row-streaming matmul template (B walked row by row so the N loop vectorizes).

Constant B operands are transposed at compile time into the [K, N] row-major layout the
kernel walks, so nothing is repacked at load.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..lower.program import KernelCall
from . import common
from .registry import Op, register


def matmul_call(node, name, a, b, y, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None,
                a_batch_strides=None, b_batch_strides=None, batch_dims=(), m=None, n=None, k=None) -> KernelCall:
    inputs = [a.name]
    if b.is_const and trans_b:
        inputs.append(np.asarray(np.asarray(b.const).reshape(b.shape[:-2] + (n, k)).swapaxes(-1, -2), order="C"))
        trans_b = False
    else:
        inputs.append(b.name)
    params = {
        "summary": f"{node.op_type}: {a.describe()} x {b.describe()}{' + ' + c.describe() if c is not None else ''}"
                   f" -> {y.describe()}",
        "M": m, "N": n, "K": k,
        "a_rs": 1 if trans_a else k, "a_cs": m if trans_a else 1,
        "b_rs": 1 if trans_b else n, "b_cs": k if trans_b else 1,
        "alpha": c_float(alpha), "scale_a": alpha != 1.0,
        "batch": [{"size": d, "a": sa, "b": sb} for d, sa, sb in
                  reversed(list(zip(batch_dims, a_batch_strides or [], b_batch_strides or [])))],
        "bias": None,
    }
    if c is not None and beta != 0.0:
        cs = common.broadcast_strides(c.shape, (m, n))
        params["bias"] = {"rs": cs[0], "cs": cs[1], "beta": c_float(beta), "scale": beta != 1.0}
        inputs.append(c.name)
    rows = int(np.prod(batch_dims, dtype=np.int64)) * m
    return KernelCall("kernels/matmul.c.j2", name, params, inputs, [y.name],
                      block_dim=common.block_dim_for(rows, n * k), tiling=[rows])


@register("Gemm", since=7)
class Gemm(Op):
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}

    def dims(self, node, ins):
        a, b = ins[0], ins[1]
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ShapeError(f"node {node.name!r} (Gemm): A and B must be 2-D, got {list(a.shape)} and {list(b.shape)}")
        m, k = a.shape[::-1] if self.attr(node, "transA") else a.shape
        k2, n = b.shape[::-1] if self.attr(node, "transB") else b.shape
        if k != k2:
            raise ShapeError(f"node {node.name!r} (Gemm): inner dims differ ({k} vs {k2})")
        return m, n, k

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        m, n, _ = self.dims(node, ins)
        if len(ins) > 2 and ins[2] is not None:
            common.broadcast_shape(node, ins[2].shape, (m, n))
        return [common.out(ins[0].dtype, (m, n))]

    def lower(self, node, ins, outs, ctx):
        m, n, k = self.dims(node, ins)
        c = ins[2] if len(ins) > 2 else None
        return matmul_call(node, "Gemm", ins[0], ins[1], outs[0], trans_a=bool(self.attr(node, "transA")),
                           trans_b=bool(self.attr(node, "transB")), alpha=float(self.attr(node, "alpha")),
                           beta=float(self.attr(node, "beta")), c=c, m=m, n=n, k=k)


@register("MatMul", since=1)
class MatMul(Op):
    def shapes(self, node, ins):
        a, b = ins
        sa = (1,) + a.shape if len(a.shape) == 1 else a.shape
        sb = b.shape + (1,) if len(b.shape) == 1 else b.shape
        if not a.shape or not b.shape:
            raise ShapeError(f"node {node.name!r} (MatMul): scalar operands are not allowed")
        if sa[-1] != sb[-2]:
            raise ShapeError(f"node {node.name!r} (MatMul): {list(a.shape)} x {list(b.shape)}: inner dims differ")
        batch = common.broadcast_shape(node, sa[:-2], sb[:-2])
        out = batch + (sa[-2], sb[-1])
        # numpy's rule: the prepended/appended 1 dims of 1-D operands are removed again
        if len(a.shape) == 1:
            out = out[:-2] + out[-1:]
        if len(b.shape) == 1:
            out = out[:-1]
        return sa, sb, batch, out

    def infer(self, node, ins):
        if ins[0].dtype != ins[1].dtype:
            raise UnsupportedOpError(f"node {node.name!r} (MatMul): mixed dtypes {ins[0].dtype.name}/{ins[1].dtype.name}")
        common.require_float(node, ins[0])
        return [common.out(ins[0].dtype, self.shapes(node, ins)[3])]

    def lower(self, node, ins, outs, ctx):
        sa, sb, batch, _ = self.shapes(node, ins)
        m, k, n = sa[-2], sa[-1], sb[-1]
        a_strides = [s * m * k for s in common.broadcast_strides(sa[:-2], batch)] if batch else []
        b_strides = [s * k * n for s in common.broadcast_strides(sb[:-2], batch)] if batch else []
        return matmul_call(node, "MatMul", ins[0], ins[1], outs[0], m=m, n=n, k=k, batch_dims=batch,
                           a_batch_strides=a_strides, b_batch_strides=b_strides)


@register("Gemm", since=1)
class GemmLegacy(Gemm):
    """Opsets 1-6: C broadcasts only with broadcast=1; otherwise it must be M x N."""
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, "broadcast": 0}

    def infer(self, node, ins):
        outs = super().infer(node, ins)
        c = ins[2] if len(ins) > 2 else None
        if c is not None and not self.attr(node, "broadcast") and c.shape != outs[0].shape:
            raise ShapeError(f"node {node.name!r} (Gemm-{node.opset}): C has shape {list(c.shape)}, expected "
                             f"{list(outs[0].shape)} with broadcast=0")
        return outs
