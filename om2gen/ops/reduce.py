"""Reductions (Reduce*, GlobalMaxPool, GlobalLpPool), ArgMax/ArgMin and CumSum.

Every Reduce* lowers to templates/kernels/reduce.c.j2: the input's dims are split into kept and
reduced groups (size-1 dims dropped, neighbours of the same kind merged), and each output is
Finalize(Combine over the reduced elements of Map(x))). Float sums accumulate in double.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import Node, Value
from ..ir.program import Alias, KernelCall
from . import common
from .registry import Op, register

_FLOATS = {"float32", "float64"}
_INTS = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
# Outputs computed side by side in one work item when the innermost input dim is kept.
_CHUNK = 512


@dataclass(frozen=True)
class Reduction:
    """C expressions of one reduction: map over v (s = log-sum-exp shift), combine a and b,
    finalize a ({n} = the element count, substituted by the lowering)."""
    map: str
    combine: str
    finalize: str
    init: str
    ints: bool = False      # integer (and, for max/min, bool) inputs allowed
    shift: bool = False     # needs the maximum first (log-sum-exp)


_SUM = "a + b"
_REDUCTIONS = {
    "ReduceSum": Reduction("v", _SUM, "a", "0", ints=True),
    "ReduceMean": Reduction("v", _SUM, "a / {n}", "0"),
    "ReduceProd": Reduction("v", "a * b", "a", "1", ints=True),
    "ReduceMax": Reduction("v", "b > a ? b : a", "a", "lowest", ints=True),
    "ReduceMin": Reduction("v", "b < a ? b : a", "a", "highest", ints=True),
    "ReduceL1": Reduction("fabs(v)", _SUM, "a", "0"),
    "ReduceL2": Reduction("v * v", _SUM, "sqrt(a)", "0"),
    "ReduceSumSquare": Reduction("v * v", _SUM, "a", "0"),
    "ReduceLogSum": Reduction("v", _SUM, "log(a)", "0"),
    "ReduceLogSumExp": Reduction("exp(v - s)", _SUM, "log(a) + s", "0", shift=True),
}


def _limit(dtype: str, which: str) -> str:
    """The identity of max (`lowest`) or min (`highest`) for a dtype, as a C expression."""
    if dtype in _FLOATS:
        return "-INFINITY" if which == "lowest" else "INFINITY"
    if dtype == "bool":
        return "0" if which == "lowest" else "1"
    if dtype.startswith("u"):
        return "0" if which == "lowest" else f"{dtype.upper()}_MAX"
    return f"{dtype.upper()}_MIN" if which == "lowest" else f"{dtype.upper()}_MAX"


def dim_groups(shape: tuple[int, ...], axes: set[int]) -> list[tuple[int, int, bool]]:
    """(size, element stride, reduced) per dim group of a contiguous tensor: size-1 dims dropped
    (a dynamic dim, which may be 1 or not, is kept: merging it is right either way), adjacent dims
    of the same kind merged (always possible: the tensor is contiguous)."""
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc = acc * shape[i]
    groups: list[tuple[int, int, bool]] = []
    for d, (n, s) in enumerate(zip(shape, strides)):
        if isinstance(n, int) and n == 1:
            continue
        red = d in axes
        if groups and groups[-1][2] == red:
            groups[-1] = (groups[-1][0] * n, s, red)
        else:
            groups.append((n, s, red))
    return groups


def template_dims(groups) -> list[dict]:
    """Template dims, innermost first (the order the offset decomposition walks them)."""
    return [{"size": n, "stride": s} for n, s in reversed(groups)]


def reduce_call(node: Node, x: Value, y: Value, axes: list[int], red: Reduction) -> KernelCall:
    """A KernelCall of reduce.c.j2: y[kept] = reduction of x over `axes` (normalised, unique)."""
    if not x.is_static:
        return _dynamic_reduce_call(node, x, y, axes, red)
    dt = x.dtype.name
    count = common.prod([x.shape[a] for a in axes])
    if red.ints and dt not in _FLOATS and red.init in ("0", "1"):
        acc = "uint64_t"    # integer sums and products wrap modulo 2^64, then narrow: no signed overflow
    elif red.init in ("lowest", "highest"):
        acc = x.dtype.c_type
    else:
        acc = "double"
    finalize = red.finalize
    if "{n}" in finalize:   # the mean of nothing is 0, as ONNX Runtime computes it
        finalize = finalize.format(n=c_float(count, double=True)) if count else "0"
    params = {
        "summary": f"{node.op_type} axes={sorted(axes)}: {x.describe()} -> {y.describe()}",
        "in_t": x.dtype.c_type, "out": y.dtype.c_type, "acc": acc, "map": red.map, "combine": red.combine,
        "finalize": finalize, "init": _limit(dt, red.init) if red.init in ("lowest", "highest") else red.init,
        "shift": red.shift, "empty": count == 0,
    }
    if count == 0:  # every output is the identity; the (empty) input is never read and may have no buffer
        return KernelCall("kernels/reduce.c.j2", node.op_type, params, [], [y.name],
                          block_dim=common.block_dim_for(y.size), tiling={"items": y.size})

    groups = dim_groups(x.shape, set(axes))
    kept = [(n, s) for n, s, r in groups if not r]
    reduced = [(n, s) for n, s, r in groups if r]
    # The innermost reduced group is walked as a run; the others are decomposed per step.
    (run, run_stride), reduced = (reduced[-1], reduced[:-1]) if reduced else ((1, 0), [])
    params.update(red_outer=template_dims(reduced), router=common.prod([n for n, _ in reduced]),
                  run=run, run_stride=run_stride)
    work = count
    if groups and not groups[-1][2]:   # innermost dim kept: a chunk of adjacent outputs per work item
        inner = groups[-1][0]
        kept_outer = kept[:-1]
        outer = common.prod([n for n, _ in kept_outer])
        want = common.block_dim_for(outer * inner, work)
        chunk = min(inner, _CHUNK)
        if outer * -(-inner // chunk) < want:   # few rows: split them finer so every block gets work
            chunk = max(min(chunk, 64), -(-inner * outer // want))
        chunks = -(-inner // chunk)
        params.update(vector_inner=True, inner=inner, chunk=chunk, chunks=chunks, n=chunk_len(inner, chunk),
                      kept_outer=template_dims(kept_outer))
        items = outer * chunks
        work *= chunk
    else:                               # innermost dim reduced: one output per work item
        params.update(vector_inner=False, kept=template_dims(kept))
        items = y.size
    return KernelCall("kernels/reduce.c.j2", node.op_type, params, [x.name], [y.name],
                      block_dim=common.block_dim_for(items, work), tiling={"items": items})


def _check_dtype(node: Node, x: Value, red: Reduction) -> None:
    allowed = set(_FLOATS)
    if red.ints:
        allowed |= _INTS
    if red.init in ("lowest", "highest"):   # max and min are defined on bool too
        allowed.add("bool")
    dt = x.dtype.name
    if dt in allowed:
        return
    allowed = sorted(allowed)
    raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input dtype {dt} is not supported "
                             f"(supported: {', '.join(allowed)})")


def _reduced_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@register(*_REDUCTIONS, since=1)
class Reduce(Op):
    """Opsets before 13 (ReduceSum) / 18 (the others): axes is an attribute."""
    dynamic_shapes = True
    attrs = {"axes": None, "keepdims": 1}

    def raw_axes(self, node, ins) -> list[int] | None:
        axes = self.attr(node, "axes")
        return None if axes is None else [int(a) for a in axes]

    def noop(self, node) -> bool:
        return False

    def axes(self, node, ins) -> list[int]:
        """Normalised reduced axes; [] reduces nothing (noop_with_empty_axes): each output is its
        element mapped and finalized, e.g. |x| for ReduceL2, as ONNX Runtime and the reference do."""
        x = ins[0]
        raw = self.raw_axes(node, ins)
        if not raw:
            return [] if self.noop(node) else list(range(len(x.shape)))
        axes = [common.axis(node, a, len(x.shape)) for a in raw]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"node {node.name!r} ({node.op_type}): axes {raw} name a dim twice")
        return sorted(axes)

    def infer(self, node, ins):
        x = ins[0]
        _check_dtype(node, x, _REDUCTIONS[node.op_type])
        axes = self.axes(node, ins)
        return [common.out(x.dtype, _reduced_shape(x.shape, set(axes), bool(self.attr(node, "keepdims"))))]

    def lower(self, node, ins, outs, ctx):
        axes = self.axes(node, ins)
        red = _REDUCTIONS[node.op_type]
        if not axes and red.map == "v" and red.finalize in ("a", "a / {n}"):
            return Alias(ins[0].name)
        return reduce_call(node, ins[0], outs[0], axes, red)


class ReduceAxesInput(Reduce):
    """ReduceSum-13+ and the other Reduce*-18+: axes is an optional constant input."""
    attrs = {"keepdims": 1, "noop_with_empty_axes": 0}

    def raw_axes(self, node, ins):
        v = ins[1] if len(ins) > 1 else None
        return common.const_ints(node, v, "axes")

    def noop(self, node) -> bool:
        return bool(self.attr(node, "noop_with_empty_axes"))


register("ReduceSum", since=13)(ReduceAxesInput)
register(*(t for t in _REDUCTIONS if t != "ReduceSum"), since=18)(ReduceAxesInput)


@register("GlobalMaxPool", since=1)
class GlobalMaxPool(Op):
    """Max over the spatial dims of N x C x D1 x ... (output N x C x 1 x ...)."""
    dynamic_shapes = True

    def reduction(self, node) -> Reduction:
        return _REDUCTIONS["ReduceMax"]

    def infer(self, node, ins):
        x = ins[0]
        if x.dtype.name not in _FLOATS:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input dtype {x.dtype.name} is not "
                                     "supported (float32, float64)")
        if len(x.shape) < 3:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): input must be N x C x spatial, "
                             f"got {list(x.shape)}")
        return [common.out(x.dtype, x.shape[:2] + (1,) * (len(x.shape) - 2))]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        return reduce_call(node, x, outs[0], list(range(2, len(x.shape))), self.reduction(node))


@register("GlobalLpPool", since=2)
class GlobalLpPool(GlobalMaxPool):
    """(sum |x|^p)^(1/p) over the spatial dims."""
    attrs = {"p": 2}

    def reduction(self, node) -> Reduction:
        p = int(self.attr(node, "p"))
        if p == 1:
            return _REDUCTIONS["ReduceL1"]
        if p == 2:
            return _REDUCTIONS["ReduceL2"]
        if p <= 0:
            raise UnsupportedOpError(f"node {node.name!r} (GlobalLpPool): p={p} must be positive")
        return Reduction(f"pow(fabs(v), {p}.0)", _SUM, f"pow(a, 1.0 / {p}.0)", "0")


def axis_layout(shape: tuple[int, ...], a: int) -> tuple[int, int, int]:
    """(outer, length, inner) of a contiguous tensor seen along axis `a` (normalised)."""
    return (common.prod(shape[:a]), shape[a], common.prod(shape[a + 1:]))


def chunking(outer: int, inner: int, length: int, limit: int = 256) -> tuple[int, int]:
    """(chunk, chunks): contiguous inner positions one work item handles side by side."""
    chunk = max(1, min(inner, limit))
    want = common.block_dim_for(outer * inner, length)
    if outer * -(-inner // chunk) < want:
        chunk = max(1, min(chunk, max(16, -(-inner * outer // want))))
    return chunk, -(-inner // chunk)


def _dynamic_reduce_call(node: Node, x: Value, y: Value, axes: list[int], red: Reduction) -> KernelCall:
    """reduce_call for a dynamic model (docs/dynamic-shapes.md): the same kernel, its sizes,
    strides and element count tiling fields, chunks of _CHUNK outputs (the accumulators' size is
    compiled in), dims merged as for a static one (a contiguous tensor's always merge) but only
    the int 1 dropped. A reduction over what may be nothing at run time is refused."""
    dt = x.dtype.name
    count = common.prod([x.shape[a] for a in axes])
    if not symbolic.decided(lambda: count >= 1, False):
        raise symbolic.Undecidable(f"whether {symbolic.text(count)} elements are reduced, or none")
    tiling: dict = {"items": 0}

    def field(value, key: str):
        return common.tiling_field(tiling, value, key)

    def dims(groups, prefix: str) -> list[dict]:
        return common.tiling_dims(tiling, groups, prefix)
    acc = "uint64_t" if red.ints and dt not in _FLOATS and red.init in ("0", "1") else \
        x.dtype.c_type if red.init in ("lowest", "highest") else "double"
    finalize = red.finalize.format(n=f"(double){field(count, 'count')}") if "{n}" in red.finalize else red.finalize
    params = {
        "summary": f"{node.op_type} axes={sorted(axes)}: {x.describe()} -> {y.describe()} (dynamic: sizes from the "
                   "tiling data)",
        "in_t": x.dtype.c_type, "out": y.dtype.c_type, "acc": acc, "map": red.map, "combine": red.combine,
        "finalize": finalize, "init": _limit(dt, red.init) if red.init in ("lowest", "highest") else red.init,
        "shift": red.shift, "empty": False,
    }
    shape = tuple(x.shape)
    groups = dim_groups(shape, set(axes))
    kept = [(n, st) for n, st, r in groups if not r]
    reduced = [(n, st) for n, st, r in groups if r]
    (run, run_stride), reduced = (reduced[-1], reduced[:-1]) if reduced else ((1, 0), [])
    params.update(red_outer=dims(reduced, "r"), router=field(common.prod([n for n, _ in reduced]), "router"),
                  run=field(run, "run"), run_stride=field(run_stride, "run_stride"))
    if groups and not groups[-1][2]:
        inner = groups[-1][0]
        chunk = _CHUNK if isinstance(inner, symbolic.Expr) else min(inner, _CHUNK)
        chunks = symbolic.ceildiv(inner, chunk)
        items = common.prod([n for n, _ in kept[:-1]]) * chunks
        inner_ref = field(inner, "inner")
        params.update(vector_inner=True, inner=inner_ref, chunk=chunk, chunks=field(chunks, "chunks"),
                      n=f"j0 + {chunk} <= {inner_ref} ? {chunk} : {inner_ref} - j0", kept_outer=dims(kept[:-1], "k"))
        work = count * chunk
    else:
        params.update(vector_inner=False, kept=dims(kept, "k"))
        items, work = y.size, count
    tiling["items"] = items
    params["tiling_fields"] = list(tiling)
    return KernelCall("kernels/reduce.c.j2", node.op_type, params, [x.name], [y.name],
                      block_dim=common.block_dim_for(items, work), tiling=tiling)


AXIS_CHUNK = 256    # chunking()'s limit: the most inner positions a work item walks side by side


def along_axis(layout: tuple, tiling: dict) -> tuple[dict, int, object]:
    """The sizes of a kernel that walks an axis of `length` elements `inner` apart, a chunk of
    adjacent inner positions per work item (len, inner, slab, chunk, chunks, n), with the chunk
    and the work item count. A dynamic model's sizes become tiling fields (common.tiling_field,
    added to `tiling`, whose "items" this sets); the chunk stays a number (the kernel's
    accumulators are arrays of it), the most a work item takes over the range."""
    outer, length, inner = layout
    if not any(isinstance(v, symbolic.Expr) for v in layout):
        chunk, chunks = chunking(outer, inner, length)
        tiling["items"] = outer * chunks
        return ({"len": length, "inner": inner, "slab": length * inner, "chunk": chunk, "chunks": chunks,
                 "n": chunk_len(inner, chunk)}, chunk, outer * chunks)
    tiling.setdefault("items", 0)   # first in the TilingData, as the static kernel's

    def field(value, key: str):
        return common.tiling_field(tiling, value, key)
    chunk = max(1, min(AXIS_CHUNK, symbolic.upper_bound(inner) or AXIS_CHUNK))
    chunks = symbolic.ceildiv(inner, chunk)
    inner_ref = field(inner, "inner")
    n = chunk_len(inner, chunk) if isinstance(inner, int) else f"j0 + {chunk} <= {inner_ref} ? {chunk} : {inner_ref} - j0"
    tiling["items"] = outer * chunks
    return ({"len": field(length, "len"), "inner": inner_ref, "slab": field(length * inner, "slab"), "chunk": chunk,
             "chunks": field(chunks, "chunks"), "n": n, "tiling_fields": list(tiling)}, chunk, outer * chunks)


def chunk_len(inner: int, chunk: int) -> str:
    """C expression of how many of a work item's `chunk` positions exist (j0 = its first); a
    constant when chunks tile `inner` exactly, so the compiler sees fixed trip counts."""
    if inner % chunk == 0:
        return str(chunk)
    return f"j0 + {chunk} <= {inner} ? {chunk} : {inner} - j0"


@register("ArgMax", "ArgMin", since=1)
class ArgReduce(Op):
    dynamic_shapes = True
    attrs = {"axis": 0, "keepdims": 1}

    def infer(self, node, ins):
        x = ins[0]
        if x.dtype.name not in _FLOATS | _INTS:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input dtype {x.dtype.name} is not "
                                     "supported (float and integer types)")
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        if x.shape[a] == 0:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): the reduced axis {a} has size 0")
        return [common.out(dtypes.INT64, _reduced_shape(x.shape, {a}, bool(self.attr(node, "keepdims"))))]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        layout = axis_layout(x.shape, a)
        tiling: dict = {}
        sizes, chunk, items = along_axis(layout, tiling)
        length = layout[1]
        last = bool(self.attr(node, "select_last_index")) if "select_last_index" in self.attrs else False
        cmp = (">" if node.op_type == "ArgMax" else "<") + ("=" if last else "")
        params = {"summary": f"{node.op_type} axis={a}{' last' if last else ''}: {x.describe()} -> "
                             f"{outs[0].describe()}",
                  "in_t": x.dtype.c_type, "cmp": cmp, **sizes}
        return KernelCall("kernels/argreduce.c.j2", node.op_type, params, [x.name], [outs[0].name],
                          block_dim=common.block_dim_for(items, length * chunk), tiling=tiling)


@register("ArgMax", "ArgMin", since=12)
class ArgReduce12(ArgReduce):
    attrs = {"axis": 0, "keepdims": 1, "select_last_index": 0}


@register("CumSum", since=11)
class CumSum(Op):
    dynamic_shapes = True
    attrs = {"exclusive": 0, "reverse": 0}
    allowed = _FLOATS | {"int32", "int64", "uint32", "uint64"}

    def infer(self, node, ins):
        x = ins[0]
        if x.dtype.name not in self.allowed:
            raise UnsupportedOpError(f"node {node.name!r} (CumSum): input dtype {x.dtype.name} is not supported "
                                     f"(supported: {', '.join(sorted(self.allowed))})")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        axis_vals = common.const_ints(node, ins[1], "axis")
        if len(axis_vals) != 1:
            raise ShapeError(f"node {node.name!r} (CumSum): axis must be a scalar, got {axis_vals}")
        a = common.axis(node, axis_vals[0], len(x.shape))
        layout = axis_layout(x.shape, a)
        tiling: dict = {}
        sizes, chunk, items = along_axis(layout, tiling)
        length = layout[1]
        reverse = bool(self.attr(node, "reverse"))
        params = {"summary": f"CumSum axis={a} exclusive={self.attr(node, 'exclusive')} reverse={int(reverse)}: "
                             f"{x.describe()} -> {outs[0].describe()}",
                  "t": x.dtype.c_type,
                  "acc": "double" if x.dtype.name in _FLOATS else "uint64_t",
                  "exclusive": bool(self.attr(node, "exclusive")),
                  "first": common.tiling_field(tiling, length - 1, "first") if reverse else 0,
                  "step": -1 if reverse else 1, **sizes}
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/cumsum.c.j2", "CumSum", params, [x.name], [outs[0].name],
                          block_dim=common.block_dim_for(items, length * chunk), tiling=tiling)
