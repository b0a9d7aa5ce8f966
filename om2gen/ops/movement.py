"""Data movement: Slice, Split, Expand, Tile, DepthToSpace, SpaceToDepth (strided copies), Pad, Trilu.

Most of these are one strided copy (templates/kernels/strided_copy.c.j2): the output, walked in
order, reads the source at offset + sum(i_d * stride_d). Each op only works out its dims, strides
and offset in Python (a stride of 0 repeats, a negative one walks backwards); strided_copy()
merges what stays contiguous. Pad maps each output index of a padded dim to its source index
through a compile-time table (the mode's rule), so every mode shares one kernel.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float, c_int
from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.dtypes import DType
from ..ir.graph import Node, Value
from ..ir.program import Alias, KernelCall
from . import common, slice_runtime
from .registry import REQUIRED, Op, register


def c_value(dtype: DType, v) -> str:
    """A C literal of the scalar `v` converted to `dtype` (float16 as its uint16_t bit pattern)."""
    name = dtype.name
    if name == "float32":
        return c_float(v)
    if name == "float16":
        bits = int(np.asarray(v, dtype=np.float16).reshape(()).view(np.uint16))
        return f"(uint16_t){bits:#06x}"
    if name == "float64":
        return c_float(v, double=True)
    if name == "bool":
        return "1" if bool(v) else "0"
    x = int(np.asarray(v).astype(dtype.np))
    return f"{x}ULL" if name == "uint64" else c_int(x)


def contiguous_strides(shape) -> list[int]:
    """Element strides of a C-order tensor (Exprs where a dynamic model's dims are)."""
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc = acc * (shape[i] if isinstance(shape[i], symbolic.Expr) else int(shape[i]))
    return strides


def optional(ins: list, i: int) -> Value | None:
    return ins[i] if i < len(ins) else None


def strided_copy(node: Node, src: Value, dst: Value, dims, strides, offset: int = 0, *,
                 detail: str = "", allow_alias: bool = True) -> KernelCall | Alias:
    """The copy of `src` into the contiguous `dst`: dst walked over `dims` (product = dst.size,
    C order) reads src[offset + sum(i_d * strides[d])]. An identity copy is an Alias."""
    if symbolic.symbols([list(dims), list(strides), offset]):
        return _dynamic_strided_copy(node, src, dst, list(dims), list(strides), offset, detail)
    assert common.prod(dims) == dst.size and dst.size > 0, (node.name, dims, dst.shape)
    dims, (strides,) = common.collapse(tuple(int(d) for d in dims), [[int(s) for s in strides]])
    if allow_alias and len(dims) == 1 and strides[0] == 1 and offset == 0 and src.size == dst.size:
        return Alias(src.name)
    inner, inner_stride = dims[-1], strides[-1]
    rows = common.prod(dims[:-1])
    # Split long rows into chunks so that a single big row still spreads across cores.
    want = common.block_dim_for(dst.size)
    chunks = 1 if rows >= want else max(1, min(want // max(rows, 1), inner // 1024 or 1))
    chunk_len = -(-inner // chunks)
    chunks = -(-inner // chunk_len)
    items = rows * chunks
    params = {
        "summary": f"{node.op_type}{' ' + detail if detail else ''}: {src.describe()} -> {dst.describe()}",
        "ctype": dst.dtype.c_type, "offset": int(offset),
        "outer": [{"size": dims[i], "stride": strides[i]} for i in range(len(dims) - 2, -1, -1)],
        "inner": inner, "inner_stride": inner_stride, "contiguous": inner_stride == 1,
        "chunks": chunks, "chunk_len": chunk_len,
        "layout": " , ".join(f"{d} x {s}" for d, s in zip(dims, strides)),
    }
    return KernelCall("kernels/strided_copy.c.j2", node.op_type, params, [src.name], [dst.name],
                      block_dim=common.block_dim_for(items, max(1, dst.size // items)), tiling={"items": items})


DYNAMIC_CHUNK = 4096    # elements per work item of a dynamic copy's rows


def _dynamic_strided_copy(node: Node, src: Value, dst: Value, dims: list, strides: list, offset, detail: str
                          ) -> KernelCall:
    """strided_copy for a dynamic model (docs/dynamic-shapes.md): the same kernel, every size,
    stride and the offset a tiling field; dims of 1 (the int) dropped, nothing merged that is
    not proven to merge, rows cut into chunks of DYNAMIC_CHUNK elements."""
    keep = [i for i, d in enumerate(dims) if not (isinstance(d, int) and d == 1)] or [len(dims) - 1]
    dims, strides = [dims[i] for i in keep], [strides[i] for i in keep]
    tiling: dict = {}

    def field(value, key: str):
        return common.tiling_field(tiling, value, key)
    inner, inner_stride = dims[-1], strides[-1]
    chunk_len = DYNAMIC_CHUNK if isinstance(inner, symbolic.Expr) else max(1, min(inner, DYNAMIC_CHUNK))
    chunks = symbolic.ceildiv(inner, chunk_len)
    items = common.prod(dims[:-1]) * chunks
    params = {
        "summary": f"{node.op_type}{' ' + detail if detail else ''}: {src.describe()} -> {dst.describe()} (dynamic: "
                   "sizes from the tiling data)",
        "ctype": dst.dtype.c_type, "offset": field(offset, "offset"),
        "outer": [{"size": field(dims[i], f"d{i}"), "stride": field(strides[i], f"s{i}")}
                  for i in range(len(dims) - 2, -1, -1)],
        "inner": field(inner, "inner"), "inner_stride": field(inner_stride, "inner_stride"),
        "contiguous": isinstance(inner_stride, int) and inner_stride == 1,
        "chunks": field(chunks, "chunks"), "chunk_len": chunk_len,
        "layout": " , ".join(f"{symbolic.text(d)} x {symbolic.text(st)}" for d, st in zip(dims, strides)),
    }
    tiling = {"items": items, **tiling}
    params["tiling_fields"] = list(tiling)
    return KernelCall("kernels/strided_copy.c.j2", node.op_type, params, [src.name], [dst.name],
                      block_dim=common.block_dim_for(items, chunk_len), tiling=tiling)


# ---------------------------------------------------------------------------------------------
# Slice

# No dim om2gen compiles reaches this (frontend/limits.py: a dim is at most the elements a tensor
# may have, which $OM2GEN_MAX_TENSOR_ELEMENTS sets to 2^48 at most): a slice bound this far out
# (exporters write INT64_MAX for "to the end") is past the end of any dynamic dim, bounded or not.
_PAST_ANY_DIM = 1 << 48


def _index(v):
    """A slice bound: an int, or an Expr computed from the input shapes."""
    return v if isinstance(v, symbolic.Expr) else int(v)


def _dynamic_range(s, e, step: int, n) -> tuple:
    """(first index, length) of slice(s, e, step) over a dim of n where s, e or n is an Expr: the
    spec's clamping written with smin/smax. Whether a bound counts from the end (is negative) must
    be decided here; the first index of an empty slice is any clamped start."""
    def clamp(i, lo, hi):
        if isinstance(i, int) and i >= _PAST_ANY_DIM:
            return hi
        if isinstance(i, int) and i <= -_PAST_ANY_DIM:
            return lo
        return symbolic.smax(lo, symbolic.smin(i + n if i < 0 else i, hi))

    if step > 0:
        first, stop = clamp(s, 0, n), clamp(e, 0, n)
        return first, symbolic.smax(0, symbolic.ceildiv(stop - first, step))
    first, stop = clamp(s, -1, n - 1), clamp(e, -1, n - 1)
    return first, symbolic.smax(0, symbolic.ceildiv(first - stop, -step))


@register("Slice", since=1)
class Slice(Op):
    """Slice-1: starts, ends and axes are attributes."""
    dynamic_shapes = True
    attrs = {"starts": REQUIRED, "ends": REQUIRED, "axes": None}

    def spec(self, node, ins):
        return self.attr(node, "starts"), self.attr(node, "ends"), self.attr(node, "axes"), None

    def plan(self, node, ins) -> tuple[list[int], list[int], list[int]]:
        """(first index, step, length) per input dim, clamped as the spec says."""
        shape = ins[0].shape
        rank = len(shape)
        if rank == 0:
            raise ShapeError(f"node {node.name!r} (Slice): input {ins[0].name!r} is a scalar; Slice needs a tensor "
                             "of rank 1 or more")
        starts, ends, axes, steps = self.spec(node, ins)
        starts, ends = [_index(s) for s in starts], [_index(e) for e in ends]
        axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
        steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise ShapeError(f"node {node.name!r} (Slice): starts, ends, axes and steps have different lengths "
                             f"({len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})")
        first, step, length = [0] * rank, [1] * rank, list(shape)
        seen = set()
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = common.axis(node, a, rank)
            if a in seen:
                raise ShapeError(f"node {node.name!r} (Slice): axis {a} is sliced twice")
            seen.add(a)
            if st == 0:
                raise ShapeError(f"node {node.name!r} (Slice): step 0 on axis {a}")
            if symbolic.is_static((s, e, shape[a])):
                # Python's slice clamping is the spec's: negatives count from the end, then clamp to
                # [0, dim] (step > 0) or [-1, dim - 1] (step < 0).
                r = range(*slice(s, e, st).indices(shape[a]))
                first[a], step[a], length[a] = (r.start if len(r) else 0), st, len(r)
            else:
                first[a], length[a] = _dynamic_range(s, e, st, shape[a])
                step[a] = st
        return first, step, length

    def infer(self, node, ins):
        return [common.out(ins[0].dtype, self.plan(node, ins)[2])]

    def lower(self, node, ins, outs, ctx):
        src = ins[0]
        first, step, length = self.plan(node, ins)
        strides = contiguous_strides(src.shape)
        offset = sum(f * s for f, s in zip(first, strides))
        detail = f"first={first} step={step}"
        return strided_copy(node, src, outs[0], length, [st * s for st, s in zip(step, strides)], offset,
                            detail=detail)


@register("Slice", since=10)
class Slice10(Slice):
    """Slice-10+: starts, ends, axes and steps are (compile-time constant) inputs."""
    attrs = {}

    def spec(self, node, ins):
        return (common.const_ints(node, ins[1], "starts"), common.const_ints(node, ins[2], "ends"),
                common.const_ints(node, optional(ins, 3), "axes"), common.const_ints(node, optional(ins, 4), "steps"))

    def infer(self, node, ins):
        if slice_runtime.is_run_time(ins[1]) or slice_runtime.is_run_time(ins[2]):   # a data-dependent length
            return slice_runtime.infer(node, ins)
        return super().infer(node, ins)

    def lower(self, node, ins, outs, ctx):
        if slice_runtime.is_run_time(ins[1]) or slice_runtime.is_run_time(ins[2]):
            return slice_runtime.lower(node, ins, outs)
        return super().lower(node, ins, outs, ctx)


# ---------------------------------------------------------------------------------------------
# Split

@register("Split", since=1)
class Split(Op):
    """Split-1/2/11: sizes from the `split` attribute (Split-1 may also give them as input 1),
    else equal parts."""
    dynamic_shapes = True
    attrs = {"axis": 0, "split": None}

    def given_sizes(self, node, ins):
        split = self.attr(node, "split")
        if split is None and optional(ins, 1) is not None:
            split = common.const_ints(node, ins[1], "split")
        return split

    def equal_sizes(self, node, n_out: int, dim: int) -> list[int]:
        if dim % n_out:
            raise ShapeError(f"node {node.name!r} (Split): dim of size {dim} does not split into {n_out} equal parts")
        return [dim // n_out] * n_out

    def plan(self, node, ins) -> tuple[int, list[int]]:
        shape = ins[0].shape
        a = common.axis(node, int(self.attr(node, "axis")), len(shape))
        n_out = len(node.outputs)
        sizes = self.given_sizes(node, ins)
        sizes = self.equal_sizes(node, n_out, shape[a]) if sizes is None else [_index(s) for s in sizes]
        if len(sizes) != n_out or any(s < 0 for s in sizes) or sum(sizes) != shape[a]:
            raise ShapeError(f"node {node.name!r} (Split): sizes {sizes} do not split dim {a} of size {shape[a]} "
                             f"into {n_out} outputs")
        return a, sizes

    def infer(self, node, ins):
        a, sizes = self.plan(node, ins)
        shape = list(ins[0].shape)
        return [common.out(ins[0].dtype, shape[:a] + [s] + shape[a + 1:]) for s in sizes]

    def lower(self, node, ins, outs, ctx):
        src = ins[0]
        a, sizes = self.plan(node, ins)
        outer = common.prod(src.shape[:a])
        inner = common.prod(src.shape[a + 1:])
        dim = src.shape[a]
        if len(outs) == 1:
            return strided_copy(node, src, outs[0], [outer, dim, inner], [dim * inner, inner, 1])
        calls, start = [], 0
        for size, dst in zip(sizes, outs):
            if dst.size:
                calls.append(strided_copy(node, src, dst, [outer, size, inner], [dim * inner, inner, 1],
                                          start * inner, detail=f"axis={a} [{start}, {start + size})",
                                          allow_alias=False))
            start += size
        return calls


@register("Split", since=13)
class Split13(Split):
    """Split-13: sizes are an optional constant input."""
    attrs = {"axis": 0}

    def given_sizes(self, node, ins):
        return common.const_ints(node, optional(ins, 1), "split")


@register("Split", since=18)
class Split18(Split13):
    """Split-18: without sizes, `num_outputs` parts of ceil(dim / num_outputs), the last smaller."""
    attrs = {"axis": 0, "num_outputs": None}

    def equal_sizes(self, node, n_out, dim):
        n = self.attr(node, "num_outputs")
        n = n_out if n is None else int(n)
        if n != n_out:
            raise ShapeError(f"node {node.name!r} (Split): num_outputs={n} but the node has {n_out} outputs")
        chunk = -(-dim // n)
        last = dim - chunk * (n - 1)
        if last < 0:
            raise ShapeError(f"node {node.name!r} (Split): dim of size {dim} cannot give {n} parts of {chunk}")
        return [chunk] * (n - 1) + [last]


# ---------------------------------------------------------------------------------------------
# Expand, Tile

@register("Expand", since=8)
class Expand(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        shape = common.const_ints(node, ins[1], "the target shape")
        return [common.out(ins[0].dtype, common.broadcast_shape(node, ins[0].shape, tuple(shape)))]

    def lower(self, node, ins, outs, ctx):
        src, dst = ins[0], outs[0]
        return strided_copy(node, src, dst, dst.shape, common.broadcast_strides(src.shape, dst.shape))


@register("Tile", since=6)
class Tile(Op):
    dynamic_shapes = True

    def repeats(self, node, ins) -> list[int]:
        reps = common.const_ints(node, ins[1], "repeats")
        if len(reps) != len(ins[0].shape) or any(r < 0 for r in reps):
            raise ShapeError(f"node {node.name!r} (Tile): repeats {reps} do not fit input rank {len(ins[0].shape)}")
        return reps

    def infer(self, node, ins):
        return [common.out(ins[0].dtype, [n * r for n, r in zip(ins[0].shape, self.repeats(node, ins))])]

    def lower(self, node, ins, outs, ctx):
        src = ins[0]
        reps = self.repeats(node, ins)
        dims, strides = [], []
        for n, r, s in zip(src.shape, reps, contiguous_strides(src.shape)):
            dims += [r, n]      # output index along a dim = repeat * n + i: the repeat walks stride 0
            strides += [0, s]
        return strided_copy(node, src, outs[0], dims, strides, detail=f"repeats={reps}")


# ---------------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth: a 6-D view of the input, transposed

class _BlockRearrange(Op):
    dynamic_shapes = True

    def mode(self, node) -> str:
        return "DCR"

    def blocks(self, node, x: Value) -> tuple[int, int, int, int, int]:
        if len(x.shape) != 4:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): input must be 4-D (N, C, H, W), "
                             f"got {list(x.shape)}")
        b = int(self.attr(node, "blocksize"))
        if b <= 0:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): blocksize {b} must be positive")
        return (*x.shape, b)

    def view(self, node, x) -> tuple[tuple, tuple, list[int]]:
        """(output shape, 6-D source shape, permutation of the source dims into output order)."""
        raise NotImplementedError

    def infer(self, node, ins):
        return [common.out(ins[0].dtype, self.view(node, ins[0])[0])]

    def lower(self, node, ins, outs, ctx):
        _, src6, perm = self.view(node, ins[0])
        strides = contiguous_strides(src6)
        return strided_copy(node, ins[0], outs[0], [src6[p] for p in perm], [strides[p] for p in perm],
                            detail=f"blocksize={self.attr(node, 'blocksize')} mode={self.mode(node)}")

    def checked_mode(self, node) -> str:
        mode = self.mode(node)
        if mode not in ("DCR", "CRD"):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): mode {mode!r} is not DCR or CRD")
        return mode


# DepthToSpace with a block this small interleaves whole input rows (depth_to_space.c.j2); larger
# blocks take the strided copy, whose innermost run is then long enough
INTERLEAVE_MAX_BLOCK = 4


@register("DepthToSpace", since=1)
class DepthToSpace(_BlockRearrange):
    attrs = {"blocksize": REQUIRED}

    def lower(self, node, ins, outs, ctx):
        x, y = ins[0], outs[0]
        n, c, h, w, b = self.blocks(node, x)
        if b > INTERLEAVE_MAX_BLOCK or b < 2:
            return super().lower(node, ins, outs, ctx)
        cb = c // (b * b)
        rows = n * cb * h * b
        tiling = {"rows": rows}     # with a dynamic model's sizes (common.tiling_field)
        sizes = {key: common.tiling_field(tiling, value, key)
                 for key, value in (("C", c), ("CB", cb), ("H", h), ("W", w), ("OH", h * b), ("OW", w * b),
                                    ("plane", h * w))}
        params = {"summary": f"DepthToSpace blocksize={b} mode={self.mode(node)}: {x.describe()} -> {y.describe()}",
                  "ctype": y.dtype.c_type, "mode": self.mode(node), "B": b, **sizes, "block_area": b * b}
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/depth_to_space.c.j2", node.op_type, params, [x.name], [y.name],
                          block_dim=common.block_dim_for(rows, w * b), tiling=tiling)

    def view(self, node, x):
        n, c, h, w, b = self.blocks(node, x)
        if c % (b * b):
            raise ShapeError(f"node {node.name!r} (DepthToSpace): {c} channels do not divide by blocksize^2 = {b * b}")
        cb = c // (b * b)
        if self.checked_mode(node) == "DCR":
            src6, perm = (n, b, b, cb, h, w), [0, 3, 4, 1, 5, 2]
        else:
            src6, perm = (n, cb, b, b, h, w), [0, 1, 4, 2, 5, 3]
        return (n, cb, h * b, w * b), src6, perm


@register("DepthToSpace", since=11)
class DepthToSpace11(DepthToSpace):
    attrs = {"blocksize": REQUIRED, "mode": "DCR"}

    def mode(self, node):
        return str(self.attr(node, "mode"))


@register("SpaceToDepth", since=1)
class SpaceToDepth(_BlockRearrange):
    attrs = {"blocksize": REQUIRED}

    def view(self, node, x):
        n, c, h, w, b = self.blocks(node, x)
        if h % b or w % b:
            raise ShapeError(f"node {node.name!r} (SpaceToDepth): H={h} and W={w} must divide by blocksize {b}")
        src6 = (n, c, h // b, b, w // b, b)
        perm = [0, 3, 5, 1, 2, 4] if self.checked_mode(node) == "DCR" else [0, 1, 3, 5, 2, 4]
        return (n, c * b * b, h // b, w // b), src6, perm


@register("SpaceToDepth", since=28)
class SpaceToDepth28(SpaceToDepth):
    attrs = {"blocksize": REQUIRED, "mode": "DCR"}

    def mode(self, node):
        return str(self.attr(node, "mode"))


# ---------------------------------------------------------------------------------------------
# Pad

def pad_source_index(mode: str, x: int, n: int) -> int:
    """The source index output position x (relative to the unpadded start) reads; -1 = the value."""
    if 0 <= x < n:
        return x
    if mode == "constant":
        return -1
    if mode == "edge":
        return 0 if x < 0 else n - 1
    if mode == "wrap":
        return x % n
    if n == 1:          # reflect of a single element repeats it
        return 0
    period = 2 * (n - 1)
    x %= period
    return x if x < n else period - x


@register("Pad", since=2)
class Pad(Op):
    """Pad-2: pads, mode and value are attributes."""
    dynamic_shapes = True
    attrs = {"pads": REQUIRED, "mode": "constant", "value": 0.0}
    modes = ("constant", "reflect", "edge")

    def spec(self, node, ins) -> tuple[list[tuple[int, int]], object]:
        """((begin, end) pads per input dim, the padding value: a number or a Value)."""
        rank = len(ins[0].shape)
        pads = [int(p) for p in self.attr(node, "pads")]
        return self.per_dim(node, pads, list(range(rank)), rank), float(self.attr(node, "value"))

    @staticmethod
    def per_dim(node, pads: list[int], axes: list[int], rank: int) -> list[tuple[int, int]]:
        if len(pads) != 2 * len(axes):
            raise ShapeError(f"node {node.name!r} (Pad): {len(pads)} pads for {len(axes)} axes (need 2 per axis)")
        out = [(0, 0)] * rank
        seen = set()
        for i, a in enumerate(axes):
            a = common.axis(node, a, rank)
            if a in seen:
                raise ShapeError(f"node {node.name!r} (Pad): axis {a} appears twice")
            seen.add(a)
            out[a] = (pads[i], pads[i + len(axes)])
        return out

    def mode(self, node) -> str:
        mode = self.attr(node, "mode")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in self.modes:
            raise UnsupportedOpError(f"node {node.name!r} (Pad): mode {mode!r} is not supported at opset "
                                     f"{node.opset} ({', '.join(self.modes)})")
        return mode

    def infer(self, node, ins):
        pads, _ = self.spec(node, ins)
        mode = self.mode(node)
        shape = [n + b + e for n, (b, e) in zip(ins[0].shape, pads)]
        if any(d < 0 for d in shape):
            raise ShapeError(f"node {node.name!r} (Pad): pads {pads} crop {list(ins[0].shape)} below zero")
        for n, (b, e) in zip(ins[0].shape, pads):
            if mode != "constant" and (b > 0 or e > 0) and n == 0:   # (n asked last: it may be dynamic)
                raise ShapeError(f"node {node.name!r} (Pad): cannot pad an empty dim in {mode} mode")
        return [common.out(ins[0].dtype, shape)]

    def lower(self, node, ins, outs, ctx):
        src, dst = ins[0], outs[0]
        pads, value = self.spec(node, ins)
        mode = self.mode(node)
        if all(b == 0 and e == 0 for b, e in pads):
            return Alias(src.name)
        if not src.is_static:
            return self.lower_dynamic(node, src, dst, pads, value, mode)
        return pad_call(src, dst, pads, value, mode)

    def lower_dynamic(self, node, src: Value, dst: Value, pads, value, mode: str) -> KernelCall:
        """A dynamic model's Pad (templates/kernels/pad_dynamic.c.j2): the source index of each
        output position computed per mode, every size a tiling field."""
        tiling: dict = {"rows": common.prod(dst.shape[:-1])}

        def field(v, key):
            return common.tiling_field(tiling, v, key)
        strides = contiguous_strides(src.shape)
        dims = [{"n": field(n, f"n{i}"), "b": field(b, f"b{i}"), "o": field(n + b + e, f"o{i}"),
                 "stride": field(st, f"s{i}")} for i, (n, (b, e), st) in enumerate(zip(src.shape, pads, strides))]
        inputs = [src.name]
        value_expr, value_slot = "0", 0
        if isinstance(value, Value) and not value.is_const:
            value_slot, value_expr = 1, "pad_value"
            inputs.append(value.name)
        else:
            value_expr = c_value(dst.dtype, self.scalar(value))
        params = {
            "summary": f"Pad mode={mode} pads={pads}: {src.describe()} -> {dst.describe()} (dynamic: sizes from the "
                      "tiling data)",
            "ctype": dst.dtype.c_type, "mode": mode, "outer": list(reversed(dims[:-1])), "inner": dims[-1],
            "value": value_expr, "value_slot": value_slot, "out_slot": len(inputs), "tiling_fields": list(tiling),
        }
        return KernelCall("kernels/pad_dynamic.c.j2", "Pad", params, inputs, [dst.name],
                          block_dim=common.block_dim_for(tiling["rows"], dst.shape[-1]), tiling=tiling)

    @staticmethod
    def scalar(value) -> object:
        if isinstance(value, Value):
            arr = np.asarray(value.const).reshape(-1)
            return arr[0] if arr.size else 0
        return value


def pad_call(src: Value, dst: Value, pads: list[tuple[int, int]], value, mode: str = "constant") -> KernelCall:
    """The static Pad kernel (templates/kernels/pad.c.j2): src padded by (begin, end) per dim
    into dst; value a number or a Value (a constant, or one read at run time)."""
    # Neighbouring unpadded dims merge into one; each group is (size, pad begin, pad end).
    groups: list[list[int]] = []
    for n, (b, e) in zip(src.shape, pads):
        if groups and b == e == 0 and groups[-1][1] == groups[-1][2] == 0:
            groups[-1][0] *= n
        else:
            groups.append([n, b, e])
    strides = contiguous_strides([g[0] for g in groups])
    table: list[int] = []

    def add_table(n, b, o, stride) -> tuple[int, bool]:
        at = len(table)
        idx = [pad_source_index(mode, i - b, n) for i in range(o)]
        table.extend(-1 if x < 0 else x * stride for x in idx)
        return at, any(x < 0 for x in idx)

    outer, fill_rows = [], False
    for (n, b, e), stride in zip(groups[:-1], strides[:-1]):
        o = n + b + e
        if b == e == 0:
            outer.append({"size": o, "stride": stride, "table": None})
        else:
            at, fills = add_table(n, b, o, stride)
            fill_rows |= fills
            outer.append({"size": o, "stride": stride, "table": at})
    n, b, e = groups[-1]
    inner = n + b + e
    inner_table, fill_inner = (None, False) if b == e == 0 else add_table(n, b, inner, 1)
    lo = min(max(0, b), inner)
    hi = max(lo, min(inner, b + n))

    inputs = [src.name, np.array(table or [0], dtype=np.int64)]
    value_expr, value_slot = "0", 0
    if fill_rows or fill_inner:
        if isinstance(value, Value) and not value.is_const:
            value_slot, value_expr = len(inputs), "pad_value"
            inputs.append(value.name)
        else:
            value_expr = c_value(dst.dtype, Pad.scalar(value))
    rows = common.prod([g["size"] for g in outer])
    params = {
        "summary": f"Pad mode={mode} pads={pads}: {src.describe()} -> {dst.describe()}",
        "ctype": dst.dtype.c_type, "mode": mode, "outer": list(reversed(outer)), "inner": inner,
        "inner_table": inner_table, "lo": lo, "hi": hi, "interior_src": lo - b, "interior_len": hi - lo,
        "fill_rows": fill_rows, "fill_inner": fill_inner, "value": value_expr, "value_slot": value_slot,
        "out_slot": len(inputs),
        "layout": " , ".join(f"{g[0]}{'' if g[1] == g[2] == 0 else f' pad ({g[1]}, {g[2]})'}" for g in groups),
    }
    return KernelCall("kernels/pad.c.j2", "Pad", params, inputs, [dst.name],
                      block_dim=common.block_dim_for(rows, inner), tiling={"rows": rows})


@register("Pad", since=11)
class Pad11(Pad):
    """Pad-11+: pads (constant), constant_value (optional, may be computed at run time) and, from
    opset 18, axes (constant) are inputs; opset 19 adds wrap mode."""
    attrs = {"mode": "constant"}
    modes = ("constant", "reflect", "edge", "wrap")

    def spec(self, node, ins):
        rank = len(ins[0].shape)
        pads = common.const_ints(node, ins[1], "pads")
        axes = common.const_ints(node, optional(ins, 3), "axes")
        value = optional(ins, 2)
        if value is not None and value.size > 1:
            raise ShapeError(f"node {node.name!r} (Pad): constant_value must be a scalar, got {list(value.shape)}")
        return self.per_dim(node, pads, list(range(rank)) if axes is None else axes, rank), \
            (0 if value is None else value)


# ---------------------------------------------------------------------------------------------
# Trilu

@register("Trilu", since=14)
class Trilu(Op):
    dynamic_shapes = True
    attrs = {"upper": 1}

    def infer(self, node, ins):
        if len(ins[0].shape) < 2:
            raise ShapeError(f"node {node.name!r} (Trilu): input must have rank >= 2, got {list(ins[0].shape)}")
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        src, dst = ins[0], outs[0]
        k = optional(ins, 1)
        inputs = [src.name]
        if k is None:
            k_expr = "0"
        elif k.is_const:
            k_expr = c_int(common.const_ints(node, k, "k")[0])
        else:   # a run-time diagonal offset only moves the boundary: read it in the kernel
            k_expr = f"(int64_t)*(const {k.dtype.c_type} *)OM2_ADDR(1)"
            inputs.append(k.name)
        n, m = src.shape[-2:]
        rows = common.prod(src.shape[:-1])
        tiling = {"rows": rows}     # with a dynamic model's sizes (common.tiling_field)
        upper = bool(self.attr(node, "upper"))
        params = {
            "summary": f"Trilu upper={int(upper)}: {src.describe()} -> {dst.describe()}",
            "ctype": dst.dtype.c_type, "upper": upper, "n": common.tiling_field(tiling, n, "n"),
            "m": common.tiling_field(tiling, m, "m"), "k_expr": k_expr, "out_slot": len(inputs),
        }
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/trilu.c.j2", "Trilu", params, inputs, [dst.name],
                          block_dim=common.block_dim_for(rows, m), tiling=tiling)
