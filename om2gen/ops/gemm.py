"""Gemm and MatMul: one packed-GEMM template (templates/kernels/matmul.c.j2 over om2/om2_gemm.h, and
om2/om2_gemv.h for a few rows over constant weights).

A constant operand is packed at compile time into the panel layout the micro-kernel reads
(transposes folded in), so nothing is repacked at load; an operand computed at run time is
packed from its strides into the task's workspace. Shapes live in the tiling data, so MatMuls
that differ only in shape share one binary.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import Derived, KernelCall
from ..toolchain.blocking import blocking
from . import common, gemm_pack
from .registry import Op, register


def _matrices(v, shape, trans: bool) -> np.ndarray:
    """A constant operand as [..., rows, cols] of the product (transposed if the op says so)."""
    arr = np.asarray(v.const, np.float32).reshape(shape)
    return arr.swapaxes(-1, -2) if trans else arr


def _operand(v, shape, trans: bool, dims: tuple[int, int], pack, tile: int, panels: str):
    """(input, row stride, column stride, elements per batch matrix) of one operand of the product:
    a constant packed now (its strides unused: the kernel walks the panels), else read in place."""
    rows, cols = dims
    if v.is_const:
        packed = pack(_matrices(v, shape, trans))
        how = f"{'transposed and ' if trans else ''}packed into the GEMM's {panels}"
        return Derived(packed, (v.name,), how), 0, 0, packed.shape[-3] * packed.shape[-2] * tile
    return (v.name, 1, rows, rows * cols) if trans else (v.name, cols, 1, rows * cols)


def matmul_call(name, a, b, y, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None,
                a_batch_strides=None, b_batch_strides=None, batch_dims=(), m=None, n=None, k=None,
                act=None, ctx=None) -> KernelCall:
    """act: the clamp applied to every tile stored (ops/fused_activation.py's kernel_params), or None."""
    bl = blocking(ctx.target)
    batch_count = common.prod(batch_dims)
    a_shape = tuple(a.shape[:-2]) + ((k, m) if trans_a else (m, k)) if len(a.shape) >= 2 else (1, k)
    b_shape = tuple(b.shape[:-2]) + ((n, k) if trans_b else (k, n)) if len(b.shape) >= 2 else (k, 1)
    # a constant operand is packed now; strides of a packed batch are in whole packed matrices
    a_in, a_rs, a_cs, a_unit = _operand(a, a_shape, trans_a, (m, k),
                                        lambda x: ctx.derive(("pack_a", bl.mr), x, lambda x: gemm_pack.pack_a(x, bl.mr)),
                                        bl.mr, f"A panels of {bl.mr} rows")
    b_in, b_rs, b_cs, b_unit = _operand(b, b_shape, trans_b, (k, n),
                                        lambda x: ctx.derive(("pack_b", bl.nr), x, lambda x: gemm_pack.pack_b(x, bl.nr)),
                                        bl.nr, f"B panels of {bl.nr} columns")
    inputs = [a_in, b_in]
    # a few rows over constant weights (batch-1 dense layers): bound by streaming B, om2/om2_gemv.h
    # (a dynamic M that may be more rows takes the packed GEMM, right at every size)
    gemv = b.is_const and not a.is_const and symbolic.decided(lambda: m <= gemm_pack.GEMV_MAX_ROWS, False)
    dynamic = not all(isinstance(d, int) for d in (m, n, k, batch_count))
    if gemv:
        tiles, ws = gemm_pack.split_gemv(m, n, k, bl, items=batch_count), 0
    else:
        split = gemm_pack.split_dynamic if dynamic else gemm_pack.split
        tiles = split(m, n, k, bl, items=batch_count, a_packed_at_run_time=not a.is_const,
                      b_packed_at_run_time=not b.is_const)
        ws = gemm_pack.workspace_floats(gemm_pack.largest(tiles), bl, pack_a_at_run_time=not a.is_const)
    tiling = dict(batch=batch_count, M=m, N=n, K=k, a_rs=a_rs, a_cs=a_cs, b_rs=b_rs, b_cs=b_cs,
                  tile_m=tiles.tile_m, tile_n=tiles.tile_n, tiles_m=tiles.tiles_m, tiles_n=tiles.tiles_n,
                  ws_floats=ws)
    # batch dims innermost first, as the kernel peels them off the batch index
    for d, (size, sa, sb) in enumerate(reversed(list(zip(batch_dims, a_batch_strides or [], b_batch_strides or [])))):
        tiling.update({f"batch{d}": size, f"a_batch{d}": sa // (m * k) * a_unit,
                       f"b_batch{d}": sb // (k * n) * b_unit})
    params = {
        "summary": f"{name} as packed GEMM; shapes from the tiling data",
        "a_packed": a.is_const, "b_packed": b.is_const, "nbatch": len(batch_dims),
        "alpha": c_float(alpha), "scale_a": alpha != 1.0, "bias": False, "beta": c_float(beta), "bias_scale": False,
        "gemm": bl.defines(), "gemv": gemv, "gemv_rows": gemm_pack.GEMV_MAX_ROWS, "gemv_bias": 0,
        "act": act,
    }
    if c is not None and beta != 0.0:
        cs = common.broadcast_strides(c.shape, (m, n))
        tiling.update(c_rs=cs[0], c_cs=cs[1])
        params.update(bias=True, bias_scale=beta != 1.0, gemv_bias=2 if beta != 1.0 else 1)
        inputs.append(c.name)
    params.update(y_slot=len(inputs), fields=list(tiling))
    items = batch_count * tiles.tiles_m * tiles.tiles_n
    block_dim = gemm_pack.block_dim(items)
    return KernelCall("kernels/matmul.c.j2", name, params, inputs, [y.name], block_dim=block_dim,
                      tiling=tiling, workspace=block_dim * ws * 4)


@register("Gemm", since=7)
class Gemm(Op):
    dynamic_shapes = True
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

    def activation(self, node) -> dict | None:
        """The clamp applied to every tile stored: none for a Gemm, the fused activation's for
        om2gen.FusedGemm (ops/fused_gemm.py)."""
        return None

    def lower(self, node, ins, outs, ctx):
        m, n, k = self.dims(node, ins)
        c = ins[2] if len(ins) > 2 else None
        return matmul_call("Gemm", ins[0], ins[1], outs[0], trans_a=bool(self.attr(node, "transA")),
                           trans_b=bool(self.attr(node, "transB")), alpha=float(self.attr(node, "alpha")),
                           beta=float(self.attr(node, "beta")), c=c, m=m, n=n, k=k, act=self.activation(node),
                           ctx=ctx)


@register("MatMul", since=1)
class MatMul(Op):
    dynamic_shapes = True

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

    def activation(self, node) -> dict | None:
        """As Gemm's: none for a MatMul, the fused activation's for om2gen.FusedMatMul."""
        return None

    def lower(self, node, ins, outs, ctx):
        sa, sb, batch, _ = self.shapes(node, ins)
        m, k, n = sa[-2], sa[-1], sb[-1]
        if batch and not ins[0].is_const and tuple(sa[:-2]) == batch and \
                symbolic.decided(lambda: all(d == 1 for d in sb[:-2]), False):
            # one weight for every batch matrix of A: their rows are one product's (A and Y contiguous)
            m, batch = m * common.prod(batch), ()
        a_strides = [s * m * k for s in common.broadcast_strides(sa[:-2], batch)] if batch else []
        b_strides = [s * k * n for s in common.broadcast_strides(sb[:-2], batch)] if batch else []
        return matmul_call("MatMul", ins[0], ins[1], outs[0], m=m, n=n, k=k, batch_dims=batch,
                           a_batch_strides=a_strides, b_batch_strides=b_strides, act=self.activation(node), ctx=ctx)


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
