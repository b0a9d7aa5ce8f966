"""Shape sub-graphs of a dynamic model, evaluated on expressions.

torch.onnx exports `x.view(x.size(0), x.size(1), 12, 64)` as Shape -> Gather -> Unsqueeze ->
Concat -> Reshape. In a static model the frontend folds those nodes into constants. In a dynamic
one their values are known too, as expressions over the dynamic dims: Shape(x) of x[N, S, 768] is
[N, S, 768], Gather(.., 1) is S, and the Reshape's target [N, S, 12, 64]. This module computes
those values (Value.dims, numpy object arrays of ints and Exprs), so that the ops reading a shape
(Reshape, Expand, ConstantOfShape, Slice, ...) see it; a result that holds only ints becomes a
constant, as folding would make it. What it cannot compute (a float, a data-dependent value)
stays a tensor computed at run time.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtypes, symbolic
from ..ir.graph import Node, Value

_INT = ("int64", "int32")


def _known(v: Value | None):
    """The value's elements as an object array (constants too), or None."""
    if v is None:
        return None
    if v.dims is not None:
        return v.dims
    if v.is_const and v.dtype.name in _INT + ("bool",) and v.const.size <= 64:
        return v.const.astype(object)
    return None


def evaluate(node: Node, ins: list[Value | None]) -> list[Value] | None:
    """The outputs of a shape-sub-graph node one of whose inputs holds dims (None: not one)."""
    if node.domain != "" or not any(v is not None and v.dims is not None for v in ins):
        if node.op_type in ("Shape", "Size") and ins and ins[0] is not None and not ins[0].is_static:
            return [_value(_SHAPE[node.op_type](node, ins[0]), dtypes.INT64)]
        return None
    fn = _OPS.get(node.op_type)
    if fn is None:
        return None
    known = [_known(v) for v in ins]
    if any(k is None for k, v in zip(known, ins) if v is not None):
        return None
    try:
        result, dtype = fn(node, known, ins)
    except symbolic.Undecidable:
        return None
    return [_value(np.asarray(result, dtype=object), dtype)]


def _value(arr: np.ndarray, dtype) -> Value:
    """A constant where every element is an int, else a value with dims."""
    if all(isinstance(x, (int, np.integer, bool, np.bool_)) for x in arr.reshape(-1)):
        const = np.array(arr.tolist(), dtype=dtype.np).reshape(arr.shape)
        return Value("", dtype, tuple(arr.shape), const)
    return Value("", dtype, tuple(arr.shape), dims=arr)


def _shape(node: Node, x: Value):
    start = node.attrs.get("start", 0)
    end = node.attrs.get("end", None)
    return np.array(list(x.shape)[start:end], dtype=object)


def _size(node: Node, x: Value):
    return np.array(x.size, dtype=object)


_SHAPE = {"Shape": _shape, "Size": _size}


def _attr(node: Node, name: str, default):
    return node.attrs.get(name, default)


def _gather(node, k, ins):
    data, idx = k
    axis = _attr(node, "axis", 0)
    n = data.shape[axis]
    idx = np.vectorize(lambda i: int(i) + n if int(i) < 0 else int(i), otypes=[object])(idx) if idx.size else idx
    return np.take(data, idx.astype(np.int64), axis=axis), ins[0].dtype


def _concat(node, k, ins):
    return np.concatenate(k, axis=_attr(node, "axis", 0)), ins[0].dtype


def _axes(node, k, rank: int):
    axes = node.attrs.get("axes")
    if axes is None and len(k) > 1 and k[1] is not None:
        axes = [int(a) for a in k[1].reshape(-1)]
    return None if axes is None else [int(a) + rank if int(a) < 0 else int(a) for a in axes]


def _unsqueeze(node, k, ins):
    x = k[0]
    axes = node.attrs.get("axes")
    if axes is None:
        axes = [int(a) for a in k[1].reshape(-1)]
    out_rank = x.ndim + len(axes)
    axes = sorted(a + out_rank if a < 0 else a for a in axes)
    for a in axes:
        x = np.expand_dims(x, a)
    return x, ins[0].dtype


def _squeeze(node, k, ins):
    x = k[0]
    axes = _axes(node, k, x.ndim)
    return (np.squeeze(x) if axes is None else np.squeeze(x, tuple(axes))), ins[0].dtype


def _slice(node, k, ins):
    x = k[0]
    if "starts" in node.attrs:      # Slice-1: attributes
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes, steps = node.attrs.get("axes"), None
    else:
        starts, ends = [int(v) for v in k[1]], [int(v) for v in k[2]]
        axes = [int(v) for v in k[3]] if len(k) > 3 and k[3] is not None else None
        steps = [int(v) for v in k[4]] if len(k) > 4 and k[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [a + x.ndim if a < 0 else a for a in axes]
    index = [slice(None)] * x.ndim
    for i, a in enumerate(axes):
        index[a] = slice(int(starts[i]), int(ends[i]), steps[i] if steps else 1)
    return x[tuple(index)], ins[0].dtype


def _cast(node, k, ins):
    to = dtypes.from_onnx(node.attrs["to"], f"node {node.name!r}")
    if to.name not in _INT:
        raise symbolic.Undecidable(f"a dim cast to {to.name}")
    return k[0], to


def _binary(fn):
    """An element-wise op over two inputs (Max, Min: over any number, pairwise)."""
    def run(node, k, ins):
        acc = k[0]
        for b in k[1:]:
            acc = np.vectorize(fn, otypes=[object])(*np.broadcast_arrays(acc, b))
        return acc, ins[0].dtype
    return run


def _div(a, b):
    """ONNX integer Div truncates; dims are >= 0, where that is floor division."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise symbolic.Undecidable("a division by 0")
        return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return symbolic.floordiv(a, b)


def _compare(fn):
    def run(node, k, ins):
        a, b = k
        return np.vectorize(fn, otypes=[object])(*np.broadcast_arrays(a, b)), dtypes.BY_NAME["bool"]
    return run


def _where(node, k, ins):
    c, a, b = k
    c, a, b = np.broadcast_arrays(c, a, b)
    return np.vectorize(lambda c, a, b: a if bool(c) else b, otypes=[object])(c, a, b), ins[1].dtype


def _reduce(fn, identity):
    def run(node, k, ins):
        x = k[0]
        axes = _axes(node, k, x.ndim)
        keep = _attr(node, "keepdims", 1)
        axes = tuple(range(x.ndim)) if axes is None else tuple(axes)
        out = np.empty([d for i, d in enumerate(x.shape) if i not in axes] or [], dtype=object)
        moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim))).reshape(out.shape + (-1,))
        for idx in np.ndindex(out.shape):
            acc = identity
            for v in moved[idx]:
                acc = v if acc is None else fn(acc, v)
            out[idx] = acc
        if keep:
            out = out.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
        return out, ins[0].dtype
    return run


def _reshape(node, k, ins):
    target = [int(v) for v in k[1]]
    return k[0].reshape([d if d != 0 else k[0].shape[i] for i, d in enumerate(target)]), ins[0].dtype


def _identity(node, k, ins):
    return k[0], ins[0].dtype


def _static_shape(fn):
    """Shape and Size of a tensor known as dims: its shape is static, so they are constants."""
    return lambda node, k, ins: (fn(node, ins[0]), dtypes.INT64)


_OPS = {
    "Shape": _static_shape(_shape), "Size": _static_shape(_size),
    "Gather": _gather, "Concat": _concat, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice,
    "Cast": _cast, "Identity": _identity, "Reshape": _reshape,
    "Add": _binary(lambda a, b: a + b), "Sub": _binary(lambda a, b: a - b), "Mul": _binary(lambda a, b: a * b),
    "Div": _binary(_div), "Max": _binary(lambda a, b: symbolic.smax(a, b)),
    "Min": _binary(lambda a, b: symbolic.smin(a, b)),
    "Equal": _compare(lambda a, b: a == b), "Less": _compare(lambda a, b: a < b),
    "Greater": _compare(lambda a, b: a > b), "Where": _where,
    "ReduceProd": _reduce(lambda a, b: a * b, 1), "ReduceSum": _reduce(lambda a, b: a + b, 0),
    "ReduceMax": _reduce(lambda a, b: symbolic.smax(a, b), None), "ReduceMin": _reduce(lambda a, b: symbolic.smin(a, b), None),
}
