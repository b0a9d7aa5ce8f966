"""Helpers shared by op definitions: shapes, broadcasting, block_dim choice."""
from __future__ import annotations

import math
import re

import numpy as np

from ..advice import value_option
from ..codegen.literals import TilingRef
from ..errors import NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.dtypes import DType
from ..ir.graph import Node, Value

# A block should carry at least this much work (elements touched), so that splitting a launch
# across cores pays for the synchronisation.
MIN_WORK_PER_BLOCK = 1 << 14
MAX_BLOCKS = 64


def prod(dims):
    """The product of dims: an int, or an Expr where a dim is dynamic."""
    p = math.prod(dims)
    return p if isinstance(p, symbolic.Expr) else int(p)


def tiling_field(tiling: dict, value, name: str):
    """A template parameter of a kernel whose sizes may be dynamic (docs/dynamic-shapes.md): an
    int stays the number compiled into the code; an Expr becomes the tiling field `name` (added to
    `tiling`), which the template then reads as tiling->name."""
    if isinstance(value, symbolic.Expr):
        tiling[name] = value
        return TilingRef(f"tiling->{name}")
    return value


def tiling_dims(tiling: dict, pairs, prefix: str) -> list[dict]:
    """Dims given outermost first as (size, stride) pairs, as a template lists them (innermost
    first: {"size", "stride"}), each a tiling field where it is dynamic (tiling_field; named
    <prefix><i>_size and <prefix><i>_stride)."""
    return [{"size": tiling_field(tiling, n, f"{prefix}{i}_size"),
             "stride": tiling_field(tiling, st, f"{prefix}{i}_stride")} for i, (n, st) in enumerate(reversed(pairs))]


def out(dtype: DType, shape) -> Value:
    return Value("", dtype, tuple(d if isinstance(d, symbolic.Expr) else int(d) for d in shape))


def block_dim_for(items: int, work_per_item: int = 1) -> int:
    """How many SPMD blocks to split `items` independent work items into. A small odd count
    rounds up to even (3 blocks of equal work run on two cores as 2 + 1, 4 as 2 + 2). For a
    dynamic count, the same bounds as an expression the run evaluates (without the rounding)."""
    if isinstance(items, symbolic.Expr) or isinstance(work_per_item, symbolic.Expr):
        by_work = symbolic.smax(1, symbolic.floordiv(items * symbolic.smax(1, work_per_item), MIN_WORK_PER_BLOCK))
        return symbolic.smax(1, symbolic.smin(items, by_work, MAX_BLOCKS))
    if items <= 1:
        return 1
    by_work = max(1, (items * max(1, work_per_item)) // MIN_WORK_PER_BLOCK)
    if 1 < by_work < 8 and by_work % 2:
        by_work += 1
    return int(max(1, min(items, by_work, MAX_BLOCKS)))


def broadcast_shape(node: Node, *shapes: tuple) -> tuple:
    """numpy's broadcasting. A dynamic dim broadcasts with 1 and with itself; against anything
    else the run would decide (Undecidable)."""
    if any(isinstance(d, symbolic.Expr) for s in shapes for d in s):
        return _broadcast_dynamic(node, shapes)
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise _no_broadcast(node, shapes) from None


def _no_broadcast(node: Node, shapes) -> ShapeError:
    return ShapeError(f"node {node.name!r} ({node.op_type}): input shapes "
                      f"{' and '.join('[' + ','.join(map(str, s)) + ']' for s in shapes)} do not broadcast")


def _broadcast_dynamic(node: Node, shapes) -> tuple:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        result = 1
        for d in dims:
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(result, int) and result == 1:
                result = d
            elif not _same_dim(node, d, result):
                raise _no_broadcast(node, shapes)
        out.append(result)
    return tuple(out)


def _same_dim(node: Node, a, b) -> bool:
    """a == b for two dims that broadcast against each other. Undecidable where the run decides
    (N against 4), except two symbols of overlapping ranges (S against T), which the compile of a
    dynamic model takes as equal, for the run's guard check to verify (symbolic.assume_equal)."""
    try:
        return a == b
    except symbolic.Undecidable:
        if symbolic.assume_equal(b, a, node.name):
            return True
        raise


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous `shape` seen through broadcasting to `out_shape` (0 = repeated)."""
    rank = len(out_shape)
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    strides, acc = [0] * rank, 1
    for i in range(rank - 1, -1, -1):   # (a dim of 1 against a dynamic one: broadcast at every size)
        one = isinstance(padded[i], int) and padded[i] == 1
        strides[i] = 0 if one and not (isinstance(out_shape[i], int) and out_shape[i] == 1) else acc
        acc = acc * padded[i]
    return strides


def collapse(out_shape: tuple[int, ...], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Merges adjacent dims that every operand walks contiguously; drops size-1 dims."""
    dims = [d for d in out_shape]
    keep = [i for i, d in enumerate(dims) if d != 1] or [len(dims) - 1] if dims else []
    dims = [dims[i] for i in keep] if dims else [1]
    strides = [[s[i] for i in keep] if keep else [0] for s in strides]
    if not out_shape:
        return [1], [[0] for _ in strides]
    return merge_dims(dims, strides)


def merge_dims(dims: list, strides: list[list], contiguous=lambda outer, inner: outer == inner):
    """Merges (in place) adjacent dims that every operand walks contiguously: contiguous(stride of
    the outer dim, inner stride * inner size), plain equality unless a caller decides otherwise."""
    i = len(dims) - 1
    while i > 0:
        if all(contiguous(s[i - 1], s[i] * dims[i]) for s in strides):
            dims[i - 1] *= dims[i]
            for s in strides:
                s[i - 1] = s[i]
            del dims[i]
            for s in strides:
                del s[i]
        i -= 1
    return dims, strides


def require_float(node: Node, v: Value, what: str = "input") -> None:
    if v.dtype.name != "float32":
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} is {v.dtype.name}; "
                                 "om2gen compiles this operator for float32 only")


def axis(node: Node, a: int, rank: int) -> int:
    if not -rank <= a < max(rank, 1):
        raise ShapeError(f"node {node.name!r} ({node.op_type}): axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def const_ints(node: Node, v: Value | None, what: str) -> list | None:
    """An int input known at compile time: a constant, or in a dynamic model a value computed
    from the input shapes (ints and Exprs, frontend/shape_dims.py)."""
    if v is None:
        return None
    if not v.is_const and v.dims is not None:
        return [d if isinstance(d, symbolic.Expr) else int(d) for d in v.dims.reshape(-1)]
    if not v.is_const:
        raise NeedsConstantError(f"node {node.name!r} ({node.op_type}): {what} ({v.name!r}) must be known at compile "
                                 f"time, as a constant or computed from the input shapes (if {v.name!r} is a model "
                                 f"input, freeze it with {value_option(v.name)})", v.name)
    arr = np.asarray(v.const).reshape(-1)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} ({v.name!r}) holds {arr.tolist()[:8]}; they "
                         "must be integers (an int64 tensor, as ONNX defines it)")
    return [int(x) for x in arr]


def const_ints_or_floats(node: Node, v: Value, what: str) -> float:
    """A scalar constant input (e.g. Clip's min/max) as a Python float."""
    if not v.is_const:
        raise NeedsConstantError(f"node {node.name!r} ({node.op_type}): {what} ({v.name!r}) must be a compile-time "
                                 f"constant (if it is a model input, freeze it with {value_option(v.name)})", v.name)
    arr = np.asarray(v.const).reshape(-1)
    if arr.size != 1:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} must be a scalar, got shape {list(v.shape)}")
    return float(arr[0])


def count_dim(node: Node, most):
    """The dim of a data-dependent count (NonZero's, NonMaxSuppression's; docs/dynamic-shapes.md):
    a symbol in 0~most that the node's kernel writes at run time, named for the node. `most` is
    the bound the input sizes give (an Expr for a dynamic model: its upper bound); 0 is the int."""
    hi = symbolic.upper_bound(most)
    if hi is None:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): its output count is at most {symbolic.text(most)}, "
                         "which has no upper bound; give the model's dynamic dims a range lo~hi")
    if hi == 0:
        return 0
    name = re.sub(r"[^A-Za-z0-9_]", "_", f"{node.op_type}_{node.name}_count")
    return symbolic.sym(name, 0, hi)
