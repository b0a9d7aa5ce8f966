"""Indexing by run-time tensors: Gather, GatherElements, GatherND, ScatterElements (and Scatter), ScatterND.

Indices are read by the kernels (int32 or int64, negative values count from the end). An index
still out of range gives zeros when gathering and is skipped when scattering: the kernels never
touch memory outside their tensors, whatever the indices hold.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.graph import Node, Value
from ..ir.program import KernelCall
from . import common
from .elementwise import copy_call
from .movement import contiguous_strides, strided_copy
from .registry import Op, register

_INDEX_TYPES = ("int32", "int64")


def _check_indices(node: Node, v: Value) -> None:
    if v.dtype.name not in _INDEX_TYPES:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): indices {v.name!r} are {v.dtype.name}; "
                                 "the spec allows int32 and int64")


def _check_within(node: Node, data: Value, indices: Value, a: int) -> None:
    """GatherElements/ScatterElements: indices have the data's rank and fit it outside the axis."""
    _check_not_scalar(node, data)
    if len(indices.shape) != len(data.shape):
        raise ShapeError(f"node {node.name!r} ({node.op_type}): indices {list(indices.shape)} and data "
                         f"{list(data.shape)} must have the same rank")
    for d, (q, n) in enumerate(zip(indices.shape, data.shape)):
        if d != a and q > n:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): indices {list(indices.shape)} exceed data "
                             f"{list(data.shape)} in dim {d}")
    _check_constant_range(node, indices, data.shape[a], a)


def _check_not_scalar(node: Node, data: Value) -> None:
    if not data.shape:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): data {data.name!r} is a scalar; it needs rank 1 or "
                         "more")


def _check_constant_range(node: Node, indices: Value, n: int, a: int, component: int | None = None) -> None:
    """Constant indices must lie in [-n, n): one outside is a malformed model, refused here rather
    than gathered as zeros or skipped by the kernel, as a run-time index would be. `component`:
    only that position of the last dim (ScatterND's index tuples) indexes dim `a`."""
    if indices.is_const and indices.size:
        arr = np.asarray(indices.const)
        if component is not None:
            arr = arr[..., component]
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -n or hi >= n:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): the constant indices {indices.name!r} hold "
                             f"{lo if lo < -n else hi}, out of range for dim {a} of size {n} (indices lie in "
                             f"[-{n}, {n}))")


@register("Gather", since=1)
class Gather(Op):
    dynamic_shapes = True
    attrs = {"axis": 0}

    def infer(self, node, ins):
        data, indices = ins
        _check_indices(node, indices)
        _check_not_scalar(node, data)
        a = common.axis(node, int(self.attr(node, "axis")), len(data.shape))
        _check_constant_range(node, indices, data.shape[a], a)
        return [common.out(data.dtype, data.shape[:a] + indices.shape + data.shape[a + 1:])]

    def lower(self, node, ins, outs, ctx):
        data, indices = ins
        dst = outs[0]
        a = common.axis(node, int(self.attr(node, "axis")), len(data.shape))
        outer = common.prod(data.shape[:a])
        n = data.shape[a]
        inner = common.prod(data.shape[a + 1:])
        if indices.is_const and indices.size == 1:
            # One known index (x[:, 3] in a model): a slice, no index read at run time.
            idx = int(np.asarray(indices.const).reshape(-1)[0])
            if not -n <= idx < n:
                raise ShapeError(f"node {node.name!r} (Gather): index {idx} is out of range for dim {a} of size {n}")
            idx += n if idx < 0 else 0
            return strided_copy(node, data, dst, [outer, inner], [n * inner, 1], idx * inner, detail=f"index {idx}")
        items = outer * indices.size
        tiling = {"items": items}   # with a dynamic model's sizes (common.tiling_field)
        params = {
            "summary": f"Gather axis={a}: {data.describe()}, {indices.describe()} -> {dst.describe()}",
            "ctype": data.dtype.c_type, "index_ctype": indices.dtype.c_type,
            **{key: common.tiling_field(tiling, value, key)
               for key, value in (("outer", outer), ("n", n), ("inner", inner), ("positions", indices.size))},
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/gather.c.j2", "Gather", params, [data.name, indices.name], [dst.name],
                          block_dim=common.block_dim_for(items, inner), tiling=tiling)


@register("GatherElements", since=11)
class GatherElements(Op):
    attrs = {"axis": 0}
    dynamic_shapes = True

    def infer(self, node, ins):
        data, indices = ins
        _check_indices(node, indices)
        a = common.axis(node, int(self.attr(node, "axis")), len(data.shape))
        _check_within(node, data, indices, a)
        return [common.out(data.dtype, indices.shape)]

    def lower(self, node, ins, outs, ctx):
        data, indices = ins
        dst = outs[0]
        rank = len(data.shape)
        a = common.axis(node, int(self.attr(node, "axis")), rank)
        ds = contiguous_strides(data.shape)
        walk = [0 if d == a else ds[d] for d in range(rank)]    # the axis coordinate comes from the index
        inner = indices.shape[-1]
        rows = common.prod(indices.shape[:-1])
        tiling = {"rows": rows}     # with a dynamic model's sizes and strides (common.tiling_field)

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)
        params = {
            "summary": f"GatherElements axis={a}: {data.describe()}, {indices.describe()} -> {dst.describe()}",
            "ctype": data.dtype.c_type, "index_ctype": indices.dtype.c_type,
            "outer": [{"size": field(indices.shape[d], f"size{d}"), "stride": field(walk[d], f"stride{d}")}
                      for d in range(rank - 2, -1, -1)],
            "rows": field(rows, "rows"), "inner": field(inner, "inner"), "inner_stride": field(walk[-1], "inner_stride"),
            "n": field(data.shape[a], "n"), "axis_stride": field(ds[a], "axis_stride"),
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/gather_elements.c.j2", "GatherElements", params, [data.name, indices.name],
                          [dst.name], block_dim=common.block_dim_for(rows, inner), tiling=tiling)


@register("GatherND", since=11)
class GatherND(Op):
    """GatherND-11, and -12+ with batch_dims."""
    dynamic_shapes = True
    attrs = {"batch_dims": 0}

    def plan(self, node, ins) -> tuple[int, int]:
        data, indices = ins
        _check_indices(node, indices)
        b = int(self.attr(node, "batch_dims"))
        r, q = len(data.shape), len(indices.shape)
        if q < 1 or not 0 <= b < min(r, q):
            raise ShapeError(f"node {node.name!r} (GatherND): batch_dims {b} does not fit data rank {r} and "
                             f"indices rank {q}")
        m = indices.shape[-1]
        if not 1 <= m <= r - b or data.shape[:b] != indices.shape[:b]:
            raise ShapeError(f"node {node.name!r} (GatherND): indices {list(indices.shape)} do not index data "
                             f"{list(data.shape)} with batch_dims {b}")
        return b, m

    def infer(self, node, ins):
        data, indices = ins
        b, m = self.plan(node, ins)
        return [common.out(data.dtype, indices.shape[:-1] + data.shape[b + m:])]

    def lower(self, node, ins, outs, ctx):
        data, indices = ins
        dst = outs[0]
        b, m = self.plan(node, ins)
        ds = contiguous_strides(data.shape)
        batches = common.prod(indices.shape[:b])
        positions = common.prod(indices.shape[b:-1])
        inner = common.prod(data.shape[b + m:])
        items = batches * positions
        tiling = {"items": items}   # with a dynamic model's sizes (common.tiling_field)
        field = common.tiling_field
        params = {
            "summary": f"GatherND batch_dims={b}: {data.describe()}, {indices.describe()} -> {dst.describe()}",
            "ctype": data.dtype.c_type, "index_ctype": indices.dtype.c_type,
            "positions": field(tiling, positions, "positions"), "inner": field(tiling, inner, "inner"),
            "batch_stride": field(tiling, ds[b - 1] if b else 0, "batch_stride"),
            "comps": [{"dim": field(tiling, data.shape[b + i], f"dim{i}"), "stride": field(tiling, ds[b + i], f"stride{i}")}
                      for i in range(m)],
            "tiling_fields": list(tiling),
        }
        return KernelCall("kernels/gather_nd.c.j2", "GatherND", params, [data.name, indices.name], [dst.name],
                          block_dim=common.block_dim_for(items, inner), tiling=tiling)


# The update each reduction applies to *p (the output element) with u (the update).
_REDUCE = {"none": "u", "add": "*p + u", "mul": "*p * u", "max": "u > *p ? u : *p", "min": "u < *p ? u : *p"}


class _Scatter(Op):
    """The scatters: the output is a copy of the data, then one kernel applies the updates in place
    (no kernel without updates). Each op checks its inputs (check) and makes that kernel (scatter)."""
    reductions: tuple[str, ...] = tuple(_REDUCE)    # those the op's version defines

    def reduction(self, node, dtype) -> str:
        """The reduction attribute ("none" where the op's version has none), checked against the
        ones the version defines and against the dtype."""
        red = str(self.attr(node, "reduction")) if "reduction" in self.attrs else "none"
        if red not in self.reductions:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): reduction {red!r} is not supported "
                                     f"at opset {node.opset} ({', '.join(self.reductions)})")
        if red != "none" and dtype.name in ("float16", "bool"):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): reduction {red!r} on {dtype.name} "
                                     "is not supported")
        return red

    def check(self, node, ins) -> None:
        raise NotImplementedError

    def scatter(self, node, ins, dst) -> KernelCall:
        raise NotImplementedError

    def infer(self, node, ins):
        data = ins[0]
        self.check(node, ins)
        self.reduction(node, data.dtype)
        return [common.out(data.dtype, data.shape)]

    def lower(self, node, ins, outs, ctx):
        copy = copy_call(ins[0], outs[0])
        empty = symbolic.decided(lambda: ins[2].size == 0, False)   # (a count may be 0 or not)
        return [copy] if empty else [copy, self.scatter(node, ins, outs[0])]


@register("ScatterElements", since=11)
class ScatterElements(_Scatter):
    """ScatterElements-11+ (reduction from 16: add/mul, from 18: max/min); Scatter-9 is the same
    without reduction."""
    attrs = {"axis": 0, "reduction": "none"}
    dynamic_shapes = True

    def check(self, node, ins):
        data, indices, updates = ins
        _check_indices(node, indices)
        a = common.axis(node, int(self.attr(node, "axis")), len(data.shape))
        _check_within(node, data, indices, a)
        # dims only the run decides (two data-dependent counts: SLANet's Range and Slice) may differ
        # there, which ONNX Runtime reports; the kernel then scatters what both cover
        same = symbolic.decided(lambda: len(updates.shape) == len(indices.shape)
                                and all(u == q for u, q in zip(updates.shape, indices.shape)), True)
        if not same or updates.dtype != data.dtype:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): updates {updates.describe()} must match the "
                             f"indices' shape {list(indices.shape)} and the data's dtype {data.dtype.name}")

    def scatter(self, node, ins, dst):
        data, indices, updates = ins
        rank = len(data.shape)
        a = common.axis(node, int(self.attr(node, "axis")), rank)
        red = self.reduction(node, data.dtype)
        ds, qs = contiguous_strides(data.shape), contiguous_strides(indices.shape)
        us = contiguous_strides(updates.shape)
        # indices and updates of dims only the run decides (check): what both cover, each read with its own strides
        own = not symbolic.decided(lambda: all(u == q for u, q in zip(updates.shape, indices.shape)), False)
        sizes = [symbolic.smin(q, u) if own else q for q, u in zip(indices.shape, updates.shape)]
        lines = common.prod([q for d, q in enumerate(sizes) if d != a])
        tiling = {"lines": lines}   # with a dynamic model's sizes and strides (common.tiling_field)

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)
        params = {
            "summary": f"{node.op_type} axis={a} reduction={red}: {data.describe()}, {indices.describe()}, "
                       f"{updates.describe()} -> {dst.describe()} (in place over a copy of the data)",
            "ctype": data.dtype.c_type, "index_ctype": indices.dtype.c_type, "reduction": red,
            "update_expr": _REDUCE[red],
            "dims": [{"size": field(sizes[d], f"size{d}"), "index_stride": field(qs[d], f"index_stride{d}"),
                      "out_stride": field(ds[d], f"out_stride{d}"),
                      **({"update_stride": field(us[d], f"update_stride{d}")} if own else {})}
                     for d in range(rank - 1, -1, -1) if d != a],
            "len": field(sizes[a], "len"), "n": field(data.shape[a], "n"),
            "index_axis_stride": field(qs[a], "index_axis_stride"), "out_axis_stride": field(ds[a], "out_axis_stride"),
            **({"update_axis_stride": field(us[a], "update_axis_stride")} if own else {}),
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/scatter_elements.c.j2", node.op_type, params, [indices.name, updates.name],
                          [dst.name], block_dim=common.block_dim_for(lines, sizes[a]), tiling=tiling)


@register("Scatter", since=9)
class Scatter(ScatterElements):
    attrs = {"axis": 0}


@register("ScatterND", since=11)
class ScatterND(_Scatter):
    """ScatterND-11 and -13 (no reduction), -16 (add, mul), -18 (max, min). The kernel applies the
    update slices in order: its blocks split each slice's elements, so every output element belongs
    to one block and sees its updates in index order (a repeated index with reduction none: the
    last update wins, as in ONNX Runtime)."""
    attrs: dict = {}
    reductions = ("none",)
    dynamic_shapes = True

    def check(self, node, ins):
        """Each index tuple has k = indices.shape[-1] components and picks the slice data[i0..ik-1]."""
        data, indices, updates = ins
        _check_indices(node, indices)
        _check_not_scalar(node, data)
        if not indices.shape or indices.shape[-1] > len(data.shape):
            raise ShapeError(f"node {node.name!r} (ScatterND): indices {list(indices.shape)} do not index data "
                             f"{list(data.shape)} (the last dim of the indices is at most the data's rank)")
        k = indices.shape[-1]
        want = indices.shape[:-1] + data.shape[k:]
        if not symbolic.decided(lambda: tuple(updates.shape) == tuple(want), False) or updates.dtype != data.dtype:
            raise ShapeError(f"node {node.name!r} (ScatterND): updates {updates.describe()} must be "
                             f"{data.dtype.name}[{','.join(map(str, want))}] (indices {list(indices.shape)}, data "
                             f"{data.describe()})")
        for c in range(k):
            _check_constant_range(node, indices, data.shape[c], c, component=c)

    def scatter(self, node, ins, dst):
        """A dynamic model's tuple count, slice size and index dims and strides are tiling fields."""
        data, indices, updates = ins
        k = indices.shape[-1]
        red = self.reduction(node, data.dtype)
        ds = contiguous_strides(data.shape)
        tuples = common.prod(indices.shape[:-1])
        inner = common.prod(data.shape[k:])
        unit = max(1, 64 // data.dtype.itemsize)    # blocks split slices in cache lines: no false sharing
        units = symbolic.ceildiv(inner, unit) if isinstance(inner, symbolic.Expr) else -(-inner // unit)
        tiling: dict = {"inner": inner}

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)
        params = {
            "summary": f"ScatterND reduction={red}: {data.describe()}, {indices.describe()}, {updates.describe()} "
                       f"-> {dst.describe()} (in place over a copy of the data)",
            "ctype": data.dtype.c_type, "index_ctype": indices.dtype.c_type, "reduction": red,
            "update_expr": _REDUCE[red], "tuples": field(tuples, "tuples"), "unit": unit,
            "inner": field(inner, "inner"),
            "comps": [{"dim": field(data.shape[c], f"dim{c}"), "stride": field(ds[c], f"stride{c}")} for c in range(k)],
        }
        params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/scatter_nd.c.j2", "ScatterND", params, [indices.name, updates.name], [dst.name],
                          block_dim=common.block_dim_for(units, tuples * unit), tiling=tiling)


@register("ScatterND", since=16)
class ScatterND16(ScatterND):
    attrs = {"reduction": "none"}
    reductions = ("none", "add", "mul")


@register("ScatterND", since=18)
class ScatterND18(ScatterND16):
    reductions = tuple(_REDUCE)
