"""Strided views: a value seen as (base buffer, shape, element strides, element offset).

The data-movement ops that only re-index their input (Reshape and the other aliases, Transpose,
Slice, Expand, Gather of one constant index, ...) lower to an Alias or to a strided gather
(strided_copy.c.j2 / transpose.c.j2). Such a node's output is a view of its input; a fused
element-wise kernel can read the view in place instead of a copy (om2gen/passes/fuse_elementwise.py).
The strides of those kernels are over merged dims; `reshape` maps them back onto the node's
output shape the way numpy reshapes without copying. In a dynamic model a value's whole view has
symbolic dims and strides (ir/symbolic.py); `broadcast` then answers only what holds at every size
and raises Undecidable otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir import symbolic
from ..ir.program import Alias, KernelCall


@dataclass(frozen=True)
class View:
    base: str                   # the value whose buffer is read
    shape: tuple[int, ...]
    strides: tuple[int, ...]    # in elements of the base; any sign, 0 repeats
    offset: int = 0             # in elements of the base

    @property
    def size(self):
        return _prod(self.shape)


def _dim(d):
    """An int, or the Expr of a dynamic size as it is."""
    return d if isinstance(d, symbolic.Expr) else int(d)


def _prod(dims):
    if any(isinstance(d, symbolic.Expr) for d in dims):
        return math.prod(dims)
    return int(np.prod(dims, dtype=np.int64))


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= _dim(shape[i])
    return tuple(strides)


def whole(name: str, shape) -> View:
    """A value read as it is stored (C order)."""
    shape = tuple(_dim(d) for d in shape)
    return View(name, shape, contiguous_strides(shape))


def reshape(view: View, new_shape) -> View | None:
    """The view with the same elements in C order under `new_shape`, or None when that needs a
    copy (numpy's no-copy reshape rule)."""
    new_shape = tuple(int(d) for d in new_shape)
    if int(np.prod(new_shape, dtype=np.int64)) != view.size:
        return None
    if view.size == 0:
        return View(view.base, new_shape, (0,) * len(new_shape), view.offset)
    old = [(d, s) for d, s in zip(view.shape, view.strides) if d != 1]
    new = [d for d in new_shape if d != 1]
    new_strides: list[int] = [0] * len(new)
    oi, ni = 0, 0
    while ni < len(new) and oi < len(old):
        oj, nj = oi + 1, ni + 1
        op, np_ = old[oi][0], new[ni]
        while op != np_:
            if np_ < op:
                np_ *= new[nj]
                nj += 1
            else:
                op *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):   # the old dims merged here must be walked as one
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new[k]
        oi, ni = oj, nj
    it = iter(new_strides)
    return View(view.base, new_shape, tuple(0 if d == 1 else next(it) for d in new_shape), view.offset)


def gather(source: View, dims, strides, offset: int) -> View | None:
    """out[i] = flat(source)[offset + sum_d i_d * strides[d]] (a strided copy of `source` seen
    flat), as a view of source's base over `dims`; None unless `source` reads as one run."""
    flat = reshape(source, (source.size,))
    if flat is None:
        return None
    step = flat.strides[0] if flat.shape[0] > 1 else 1
    return View(source.base, tuple(int(d) for d in dims), tuple(int(s) * step for s in strides),
                flat.offset + int(offset) * step)


def of_lowering(result, source: View, out_shape) -> View | None:
    """The view a data-movement node's lowering describes (Alias, strided_copy, transpose), over
    the node's output shape; None for anything else."""
    if isinstance(result, Alias):
        return reshape(source, out_shape)
    if not isinstance(result, KernelCall) or len(result.inputs) != 1 or len(result.outputs) != 1:
        return None
    if symbolic.symbols(list(result.tiling.values())):   # a dynamic model's copy: no view of fixed strides
        return None
    p = result.params
    if result.template == "kernels/strided_copy.c.j2":
        outer = list(reversed(p["outer"]))
        dims = [d["size"] for d in outer] + [p["inner"]]
        strides = [d["stride"] for d in outer] + [p["inner_stride"]]
        merged = gather(source, dims, strides, p["offset"])
    elif result.template == "kernels/transpose.c.j2":
        outer = list(reversed(p["outer"]))
        dims = [d["size"] for d in outer] + [p["inner"]]
        strides = [d["strides"][0] for d in outer] + [p["inner_stride"]]
        merged = gather(source, dims, strides, 0)
    else:
        return None
    return None if merged is None else reshape(merged, out_shape)


def permute(view: View, perm) -> View:
    """The view with its dims in the order `perm` (a Transpose), whatever its strides."""
    return View(view.base, tuple(view.shape[p] for p in perm), tuple(view.strides[p] for p in perm), view.offset)


def broadcast(view: View, shape) -> tuple[int, ...] | None:
    """Element strides of `view` read at every index of `shape` under ONNX (numpy) broadcasting;
    None if it does not broadcast to `shape`. A dim of 1 broadcasts at every size; a dynamic dim
    only against itself (else Undecidable: the run would decide)."""
    shape = tuple(_dim(d) for d in shape)
    if len(view.shape) > len(shape):
        return None
    pad = len(shape) - len(view.shape)
    strides = []
    for i, d in enumerate(shape):
        if i < pad:
            strides.append(0)
            continue
        vd, vs = view.shape[i - pad], view.strides[i - pad]
        if isinstance(vd, int) and vd == 1 and not isinstance(d, int):
            strides.append(0)
        elif vd == d:
            strides.append(0 if isinstance(d, int) and d == 1 else vs)
        elif vd == 1:
            strides.append(0)
        else:
            return None
    return tuple(strides)
