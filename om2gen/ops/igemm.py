"""The kernel call of an integer MatMul (templates/kernels/igemm.c.j2 over om2/om2_igemm.h): what
MatMulInteger, QLinearMatMul, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm and a folded
QDQ MatMul/Gemm all lower to, differing only in the epilogue.

Zero points and scales are kernel inputs read at run time (a scalar, or one per column of B),
so a dynamically quantized A's come straight from DynamicQuantizeLinear; a constant B is packed
at compile time (ops/igemm_pack.py), an input B per tile at run time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir.program import Derived, KernelCall
from . import common, igemm_pack
from .gemm import MatMul

_BYTES = ("uint8", "int8")


@dataclass
class Epilogue:
    """What the int32 sums become: "I32" (as they are), "Q8" (requantized: int32 bias added, then
    * (sa * sb[n]) / sy, rounded half to even, + zy, saturated to y's type) or "F32" (* sa * sb[n]
    [* alpha], + float bias)."""
    kind: str
    sa: object = None       # Values (scalars), sb per column or scalar
    sb: object = None
    sy: object = None
    zy: object = None
    bias: object = None
    alpha: float = 1.0


def require_bytes(node, v, what: str) -> None:
    if v.dtype.name not in _BYTES:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} is {v.dtype.name}; "
                                 "ONNX defines it as uint8 or int8")


def require_float_scalar(node, v, what: str) -> None:
    if v.dtype.name != "float32" or v.size != 1:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} must be one float32 (a scalar), "
                         f"got {v.dtype.name}{list(v.shape)}; om2gen quantizes this operand per tensor")


def per_column(node, v, n: int, what: str, dtype=None) -> int:
    """The step of a scalar (0) or per-column (1) parameter of N columns; else a ShapeError."""
    if dtype is not None and v.dtype.name != dtype:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} is {v.dtype.name}, "
                                 f"expected {dtype}")
    if v.size == 1:
        return 0
    if len(v.shape) == 1 and v.shape[0] == n:
        return 1
    raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} has shape {list(v.shape)}; it must "
                     f"be a scalar or hold one value per output column ({n})")


def zero_point(node, zp, of, what: str):
    """A zero point input, or (absent) 0 of the operand's type as a constant; its type must be the operand's."""
    if zp is None:
        return np.zeros(1, of.dtype.np)
    if zp.dtype != of.dtype:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {zp.name!r} is {zp.dtype.name}, but "
                                 f"its operand {of.name!r} is {of.dtype.name}; they must have one type")
    return zp.name


def zeros_after_shift(zb, b_shift: int) -> bool:
    """Whether every zb' = zb - shift is 0 (zb a constant, or None: 0): then rowsum(A') is never needed."""
    if zb is None:
        return b_shift == 0
    return zb.is_const and bool((np.asarray(zb.const).astype(np.int32) - b_shift == 0).all())


def igemm_call(node, name, a, b, y, *, m, n, k, za, zb, epi: Epilogue, batch_dims=(), a_batch_strides=(),
               b_batch_strides=(), trans_a=False, trans_b=False, ctx) -> KernelCall:
    """za, zb: a Value or None (0); zb scalar or one per column."""
    require_bytes(node, a, "A")
    require_bytes(node, b, "B")
    if za is not None and za.size != 1:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): A's zero point {za.name!r} has shape "
                                 f"{list(za.shape)}; om2gen (as ONNX Runtime) takes one zero point for A")
    zb_in = zero_point(node, zb, b, "B's zero point")
    za_in = zero_point(node, za, a, "A's zero point")
    zb_step = per_column(node, zb, n, "B's zero point") if zb is not None else 0
    a_signed, b_signed = igemm_pack.signed(a.dtype), igemm_pack.signed(b.dtype)
    b_shift = 0 if b_signed else 128
    b_packed = b.is_const and not batch_dims_of_b(b_batch_strides)
    tiling = dict(batch=common.prod(batch_dims), M=m, N=n, K=k, a_rs=1 if trans_a else k, a_cs=m if trans_a else 1,
                  b_rs=1 if trans_b else n, b_cs=k if trans_b else 1, zb_step=zb_step)
    inputs, slot = [a.name], {"a": 0}
    if b_packed:
        arr = np.asarray(b.const).reshape(b.shape[-2:])
        mat = arr.T if trans_b else arr
        panels, colsum = ctx.derive(("igemm_pack_b", b_signed), np.ascontiguousarray(mat),
                                    lambda x: igemm_pack.pack_b(x, b_signed))
        how = f"{'transposed and ' if trans_b else ''}packed into the integer GEMM's panels of 16 columns"
        inputs += [Derived(panels, (b.name,), how), Derived(colsum, (b.name,), "column sums of the packed B")]
        slot.update(b=1, bsum=2)
    else:
        inputs.append(b.name)
        slot["b"] = 1
    slot["za"], slot["zb"] = len(inputs), len(inputs) + 1
    inputs += [za_in, zb_in]
    params = {"out": epi.kind, "alpha": None, "y_type": "uint8_t", "y_signed": 0, "y_size": 4}
    if epi.kind in ("Q8", "F32"):
        slot["sa"], slot["sb"] = len(inputs), len(inputs) + 1
        inputs += [epi.sa.name, epi.sb.name]
        tiling["sb_step"] = per_column(node, epi.sb, n, "B's scale", "float32")
    else:
        tiling["sb_step"] = 0
    slot["bias"] = None
    if epi.kind == "Q8":
        slot["sy"], slot["zy"] = len(inputs), len(inputs) + 1
        inputs += [epi.sy.name, epi.zy.name]
        params.update(y_type=epi.zy.dtype.c_type, y_signed=int(igemm_pack.signed(epi.zy.dtype)), y_size=1)
    elif epi.kind == "F32":
        params.update(y_size=4, alpha=c_float(epi.alpha) if epi.alpha != 1.0 else None)
    if epi.bias is not None:
        slot["bias"] = len(inputs)
        inputs.append(epi.bias if isinstance(epi.bias, (np.ndarray, Derived)) else epi.bias.name)
    slot["y"] = len(inputs)
    tiles = igemm_pack.split(m, n, k, ctx.target, items=tiling["batch"], b_packed=b_packed)
    ws = igemm_pack.workspace_bytes(k, tiles.tile_n, b_packed, ctx.target)
    tiling.update(tiles_m=tiles.tiles_m, tiles_n=tiles.tiles_n, ws_bytes=ws)
    for d, (size, sa, sb) in enumerate(reversed(list(zip(batch_dims, a_batch_strides, b_batch_strides)))):
        tiling.update({f"batch{d}": size, f"a_batch{d}": sa, f"b_batch{d}": sb})
    params.update(
        summary=f"{name}: {a.describe()} x {b.describe()} -> {y.describe()} as the integer GEMM",
        formula=formula(epi), mr=igemm_pack.mr(ctx.target), a_type=a.dtype.c_type, b_type=b.dtype.c_type,
        b_packed=b_packed, a_flip=igemm_pack.FLIP if a_signed else 0, b_flip=0 if b_signed else igemm_pack.FLIP,
        a_shift=128 if a_signed else 0, b_shift=b_shift, b_signed=int(b_signed), slot=slot, nbatch=len(batch_dims),
        need_rowsum=0 if zeros_after_shift(zb, b_shift) else 1, fields=list(tiling))
    items = tiling["batch"] * tiles.tiles_m * tiles.tiles_n
    blocks = igemm_pack.block_dim(items)
    return KernelCall("kernels/igemm.c.j2", name, params, inputs, [y.name], block_dim=blocks, tiling=tiling,
                      workspace=blocks * ws)


def batch_dims_of_b(b_batch_strides) -> bool:
    """Whether B differs between the batch matrices (then it is packed per tile at run time)."""
    return any(s != 0 for s in b_batch_strides)


def formula(epi: Epilogue) -> str:
    core = "sum_k (A - za)(B - zb)"
    if epi.kind == "I32":
        return f"{core} (int32)"
    if epi.kind == "F32":
        return f"({core}) * sa * sb{' * alpha' if epi.alpha != 1.0 else ''}{' + bias' if epi.bias is not None else ''} (float)"
    return f"saturate(round_half_even(({core}{' + bias' if epi.bias is not None else ''}) * (sa * sb / sy)) + zy)"


def matmul_shapes(node, a, b):
    """MatMul's shapes (numpy's rules) for the integer MatMuls: (m, k, n, batch, out shape, A and B
    batch strides in elements)."""
    sa, sb, batch, out = MatMul().shapes(node, [a, b])
    m, k, n = sa[-2], sa[-1], sb[-1]
    if batch and all(d == 1 for d in sb[:-2]) and tuple(sa[:-2]) == batch:
        # one B for every batch matrix of A: their rows are one product's
        return m * common.prod(batch), k, n, (), out, [], []
    a_strides = [s * m * k for s in common.broadcast_strides(sa[:-2], batch)] if batch else []
    b_strides = [s * k * n for s in common.broadcast_strides(sb[:-2], batch)] if batch else []
    return m, k, n, batch, out, a_strides, b_strides
