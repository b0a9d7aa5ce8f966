"""TopK: the k largest (or smallest) elements along an axis, with their int64 indices.

Lowered to templates/kernels/topk.c.j2: a bounded heap per (outer, inner) position, emptied
into the output in order, so the result is always sorted (a valid order when sorted=0 too).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.program import KernelCall
from . import common
from .registry import Op, register

_TYPES = {"float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}


@register("TopK", since=1)
class TopK(Op):
    """TopK-1: k is an attribute; always the largest, sorted."""
    attrs = {"axis": -1, "k": None}
    dynamic_shapes = True       # the sizes (and k taken from a shape) may be a dynamic model's (tiling fields)

    def k(self, node, ins):
        k = self.attr(node, "k")
        if k is None:
            raise UnsupportedOpError(f"node {node.name!r} (TopK): required attribute 'k' is missing")
        return int(k)

    def largest(self, node) -> bool:
        return True

    def geometry(self, node, ins):
        x = ins[0]
        if x.dtype.name not in _TYPES:
            raise UnsupportedOpError(f"node {node.name!r} (TopK): input dtype {x.dtype.name} is not supported "
                                     f"(supported: {', '.join(sorted(_TYPES))})")
        if not x.shape:
            raise ShapeError(f"node {node.name!r} (TopK): the input must have at least one dim")
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        k = self.k(node, ins)
        if not 0 <= k <= x.shape[a]:
            raise ShapeError(f"node {node.name!r} (TopK): k={k} is outside [0, {x.shape[a]}] "
                             f"(the size of axis {a})")
        return a, k

    def infer(self, node, ins):
        x = ins[0]
        a, k = self.geometry(node, ins)
        shape = x.shape[:a] + (k,) + x.shape[a + 1:]
        return [common.out(x.dtype, shape), common.out(dtypes.INT64, shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        a, k = self.geometry(node, ins)
        outer = common.prod(x.shape[:a])
        length = x.shape[a]
        inner = common.prod(x.shape[a + 1:])
        nan_aware = x.dtype.name in ("float32", "float64")
        idx_offset = symbolic.ceildiv(k * x.dtype.itemsize, 8) * 8
        ws_stride = idx_offset + 8 * k
        items = outer * inner
        most_k = symbolic.upper_bound(k) or 0     # a k taken from a shape: each block's heap planned for its largest
        block_dim = common.block_dim_for(items, length * max(1, int(np.log2(max(most_k, 2)))))
        largest = self.largest(node)
        tiling = {"items": items}   # with a dynamic model's sizes (common.tiling_field)
        sizes = {key: common.tiling_field(tiling, value, key)
                 for key, value in (("len", length), ("inner", inner), ("slab", length * inner),
                                    ("out_slab", k * inner), ("k", k), ("idx_offset", idx_offset),
                                    ("ws_stride", ws_stride))}
        params = {
            "summary": f"TopK k={symbolic.text(k)} axis={a} {'largest' if largest else 'smallest'}: {x.describe()} -> "
                       f"{outs[0].describe()}, {outs[1].describe()}",
            "t": x.dtype.c_type, **sizes, "largest": largest, "nan_aware": nan_aware,
            "greater": "(isnan(a) && !isnan(b)) || a > b" if nan_aware else "a > b",
            **({"heap_from_tiling": True} if isinstance(k, symbolic.Expr) else {}),
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/topk.c.j2", "TopK", params, [x.name], [v.name for v in outs], block_dim=block_dim,
                          tiling=tiling, workspace=block_dim * ws_stride)


@register("TopK", since=10)
class TopK10(TopK):
    """TopK-10: k is a 1-element int64 input, known at compile time: a constant, or in a dynamic
    model taken from a shape (torch exports sort and argsort as TopK with k = Shape(x)[axis])."""
    attrs = {"axis": -1}

    def k(self, node, ins):
        ks = common.const_ints(node, ins[1] if len(ins) > 1 else None, "K")
        if ks is None or len(ks) != 1:
            raise ShapeError(f"node {node.name!r} (TopK): input K must hold exactly one value")
        return ks[0]


@register("TopK", since=11)
class TopK11(TopK10):
    """TopK-11: largest and sorted attributes (negative axis allowed)."""
    attrs = {"axis": -1, "largest": 1, "sorted": 1}

    def largest(self, node) -> bool:
        return bool(self.attr(node, "largest"))
