"""LogSoftmax, Hardmax, LpNormalization, LayerNormalization, InstanceNormalization,
GroupNormalization and MeanVarianceNormalization.

The along-an-axis ops (LogSoftmax, Hardmax, LpNormalization) see the input as outer x len x inner
and let each work item walk a chunk of adjacent inner positions side by side. Layer/Instance/Group
normalization see it as rows of contiguous elements normalised one by one
(templates/kernels/normalize_rows.c.j2); MeanVarianceNormalization reduces over any axes.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import Node, Value
from ..ir.program import KernelCall
from . import common
from .reduce import along_axis, axis_layout, dim_groups
from .registry import REQUIRED, Op, register

_FLOATS = ("float32", "float64")


def _require(node: Node, v: Value, allowed=_FLOATS) -> None:
    if v.dtype.name not in allowed:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input {v.name!r} is {v.dtype.name}; "
                                 f"om2gen compiles this operator for {', '.join(allowed)}")


def _along_axis_call(node: Node, x: Value, y: Value, layout: tuple[int, int, int], template: str,
                     extra: dict, what: str) -> KernelCall:
    tiling: dict = {}
    sizes, chunk, items = along_axis(layout, tiling)
    params = {"summary": f"{node.op_type} {what}: {x.describe()} -> {y.describe()}",
              "t": x.dtype.c_type, **sizes, **extra}
    return KernelCall(template, node.op_type, params, [x.name], [y.name],
                      block_dim=common.block_dim_for(items, layout[1] * chunk), tiling=tiling)


@register("LogSoftmax", "Hardmax", since=1)
class AxisSoftmaxFamily(Op):
    """Opsets before 13: the input is coerced to 2-D at `axis` (default 1)."""
    dynamic_shapes = True
    attrs = {"axis": 1}

    def layout(self, node, x) -> tuple[int, int, int]:
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        return common.prod(x.shape[:a]), common.prod(x.shape[a:]), 1

    def infer(self, node, ins):
        _require(node, ins[0])
        self.layout(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        what = f"axis={self.attr(node, 'axis')}"
        if node.op_type == "Hardmax":
            return _along_axis_call(node, x, outs[0], self.layout(node, x), "kernels/hardmax.c.j2", {}, what)
        extra = {"exp": "expf" if x.dtype.name == "float32" else "exp"}
        return _along_axis_call(node, x, outs[0], self.layout(node, x), "kernels/log_softmax.c.j2", extra, what)


@register("LogSoftmax", "Hardmax", since=13)
class AxisSoftmaxFamily13(AxisSoftmaxFamily):
    """Opset 13+: along the single axis `axis` (default -1)."""
    attrs = {"axis": -1}

    def layout(self, node, x):
        return axis_layout(x.shape, common.axis(node, int(self.attr(node, "axis")), len(x.shape)))


@register("LpNormalization", since=1)
class LpNormalization(Op):
    dynamic_shapes = True
    attrs = {"axis": -1, "p": 2}

    def infer(self, node, ins):
        _require(node, ins[0])
        if int(self.attr(node, "p")) not in (1, 2):
            raise UnsupportedOpError(f"node {node.name!r} (LpNormalization): p={self.attr(node, 'p')} is not "
                                     "supported (the spec allows 1 and 2)")
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        p = int(self.attr(node, "p"))
        extra = {"p": p, "term": "fabs(v)" if p == 1 else "v * v", "norm": "acc[jj]" if p == 1 else "sqrt(acc[jj])"}
        return _along_axis_call(node, x, outs[0], axis_layout(x.shape, a), "kernels/lp_normalization.c.j2",
                                extra, f"p={p} axis={a}")


def _rows_call(node: Node, x: Value, ins: list[Value | None], outs: list[Value], rows: int, length: int,
               eps: float, affine: dict, stats: tuple[bool, bool] = (False, False)) -> KernelCall:
    """normalize_rows.c.j2 over `rows` contiguous rows of `length`; ins = [x, scale, bias or None];
    outs = [y, mean?, invstd?] as `stats` says which statistics are written."""
    inputs = [v if isinstance(v, np.ndarray) else v.name for v in ins if v is not None]
    slots = {"x": 0, "scale": 1, "bias": 2 if ins[2] is not None else None}
    n_in = len(inputs)
    slots["y"] = n_in
    slots["mean"] = n_in + 1 if stats[0] else None
    slots["invstd"] = n_in + 1 + int(stats[0]) if stats[1] else None
    slots["n_addr"] = n_in + 1 + sum(stats)
    tiling = {"rows": rows}     # with a dynamic model's row length and segments (common.tiling_field)
    affine = {k: common.tiling_field(tiling, v, k) for k, v in affine.items()}
    params = {"summary": f"{node.op_type} rows={rows} len={length}: {x.describe()} -> {outs[0].describe()}",
              "len": common.tiling_field(tiling, length, "len"), "epsilon": c_float(eps), "slots": slots, **affine}
    if len(tiling) > 1:
        params["tiling_fields"] = list(tiling)
    return KernelCall("kernels/normalize_rows.c.j2", node.op_type, params, inputs, [v.name for v in outs],
                      block_dim=common.block_dim_for(rows, 3 * length), tiling=tiling)


def _element_affine(node: Node, v: Value | None, norm_shape: tuple[int, ...], what: str):
    """(input for the kernel, element stride) of a Scale/B broadcast over the normalized dims:
    stride 1 when it covers them, 0 for one value, a broadcast copy when it is a constant."""
    if v is None:
        return None, 0
    n = common.prod(norm_shape)
    try:
        np.broadcast_shapes(v.shape, norm_shape)
    except ValueError:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} shape {list(v.shape)} does not broadcast "
                         f"to the normalized shape {list(norm_shape)}") from None
    if len(v.shape) > len(norm_shape) or np.broadcast_shapes(v.shape, norm_shape) != tuple(norm_shape):
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} shape {list(v.shape)} is larger than the "
                         f"normalized shape {list(norm_shape)}")
    if v.size == n:
        return v, 1
    if v.size == 1:
        return v, 0
    if v.is_const:
        full = np.asarray(np.broadcast_to(np.asarray(v.const, dtype=np.float32), norm_shape), order="C")
        return full, 1
    raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} of shape {list(v.shape)} broadcasts "
                             f"partially over {list(norm_shape)} and is not a constant; om2gen supports a full "
                             "or a single-value runtime scale/bias")


@register("LayerNormalization", since=17)
class LayerNormalization(Op):
    dynamic_shapes = True
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}

    def infer(self, node, ins):
        x = ins[0]
        common.require_float(node, x)
        common.require_float(node, ins[1], "Scale")
        if int(self.attr(node, "stash_type")) != 1:
            raise UnsupportedOpError(f"node {node.name!r} (LayerNormalization): stash_type="
                                     f"{self.attr(node, 'stash_type')} is not supported (1: float32)")
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        stat = x.shape[:a] + (1,) * (len(x.shape) - a)
        return [common.out(x.dtype, x.shape), common.out(dtypes.FLOAT32, stat), common.out(dtypes.FLOAT32, stat)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        a = common.axis(node, int(self.attr(node, "axis")), len(x.shape))
        norm_shape = x.shape[a:]
        length = common.prod(norm_shape)
        rows = common.prod(x.shape[:a])
        bias_in = ins[2] if len(ins) > 2 else None
        if bias_in is not None:
            common.require_float(node, bias_in, "B")
        scale, s_stride = _element_affine(node, ins[1], norm_shape, "Scale")
        bias, b_stride = _element_affine(node, bias_in, norm_shape, "B")
        stats = tuple(len(node.outputs) > i and bool(node.outputs[i]) for i in (1, 2))
        affine = {"mode": "element", "scale_stride": s_stride, "bias_stride": b_stride,
                  "affine_note": f"Scale stride {s_stride}, B stride {b_stride} along the row."}
        return _rows_call(node, x, [x, scale, bias], outs, rows, length, float(self.attr(node, "epsilon")),
                          affine, stats)


def _channels(node: Node, x: Value) -> tuple[int, int, int]:
    """(N, C, spatial size) of an N x C x D1 x ... input."""
    if len(x.shape) < 2:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): input must be N x C x ..., got {list(x.shape)}")
    return x.shape[0], x.shape[1], common.prod(x.shape[2:])


def _per_channel(node: Node, v: Value | None, count: int, what: str) -> None:
    if v is None or v.size != count or len([d for d in v.shape if d != 1]) > 1:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} must hold {count} values, got "
                         f"{list(v.shape) if v is not None else 'none'}")
    common.require_float(node, v, what)


@register("InstanceNormalization", since=6)
class InstanceNormalization(Op):
    dynamic_shapes = True
    attrs = {"epsilon": 1e-5}

    def infer(self, node, ins):
        x = ins[0]
        common.require_float(node, x)
        _, c, _ = _channels(node, x)
        _per_channel(node, ins[1], c, "scale")
        _per_channel(node, ins[2], c, "B")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        n, c, s = _channels(node, x)
        affine = {"mode": "segment", "row_mod": c, "row_mul": 1, "nseg": 1, "seg": s, "seg_mul": 0,
                  "affine_note": "Row r = (n, c) uses scale[c], B[c]."}
        return _rows_call(node, x, ins[:3], outs[:1], n * c, s, float(self.attr(node, "epsilon")), affine)


@register("GroupNormalization", since=18)
class GroupNormalization(Op):
    """GroupNormalization-18: scale and bias hold one value per group."""
    dynamic_shapes = True
    attrs = {"epsilon": 1e-5, "num_groups": REQUIRED}
    per_channel = False

    def groups(self, node, x) -> tuple[int, int, int, int]:
        n, c, s = _channels(node, x)
        g = int(self.attr(node, "num_groups"))
        if g <= 0 or c % g:
            raise ShapeError(f"node {node.name!r} (GroupNormalization): {c} channels do not split into "
                             f"num_groups={g} groups")
        return n, c, s, g

    def infer(self, node, ins):
        x = ins[0]
        common.require_float(node, x)
        _, c, _, g = self.groups(node, x)
        for i, what in ((1, "scale"), (2, "bias")):
            _per_channel(node, ins[i] if len(ins) > i else None, c if self.per_channel else g, what)
        if int(self.attr(node, "stash_type") if "stash_type" in self.attrs else 1) != 1:
            raise UnsupportedOpError(f"node {node.name!r} (GroupNormalization): stash_type="
                                     f"{self.attr(node, 'stash_type')} is not supported (1: float32)")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        n, c, s, g = self.groups(node, x)
        cg = c // g
        if self.per_channel:
            affine = {"mode": "segment", "row_mod": g, "row_mul": cg, "nseg": cg, "seg": s, "seg_mul": 1,
                      "affine_note": f"Row r = (n, g) of {cg} channels; channel g*{cg}+k uses scale/bias[g*{cg}+k]."}
        else:
            affine = {"mode": "segment", "row_mod": g, "row_mul": 1, "nseg": cg, "seg": s, "seg_mul": 0,
                      "affine_note": "Row r = (n, g) uses scale[g], bias[g]."}
        return _rows_call(node, x, ins[:3], outs[:1], n * g, cg * s, float(self.attr(node, "epsilon")), affine)


@register("GroupNormalization", since=21)
class GroupNormalization21(GroupNormalization):
    """GroupNormalization-21: scale and bias hold one value per channel; stash_type."""
    attrs = {"epsilon": 1e-5, "num_groups": REQUIRED, "stash_type": 1}
    per_channel = True


@register("MeanVarianceNormalization", since=9)
class MeanVarianceNormalization(Op):
    dynamic_shapes = True
    attrs = {"axes": [0, 2, 3]}

    def axes(self, node, x) -> list[int]:
        axes = sorted({common.axis(node, int(a), len(x.shape)) for a in self.attr(node, "axes")})
        if len(axes) != len(self.attr(node, "axes")):
            raise ShapeError(f"node {node.name!r} (MeanVarianceNormalization): axes {self.attr(node, 'axes')} "
                             "name a dim twice")
        return axes

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        self.axes(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        """A dynamic model's sizes, strides and element count are tiling fields (the kernel's
        TilingData, common.tiling_field); a static one's are compiled in."""
        x = ins[0]
        axes = self.axes(node, x)
        groups = dim_groups(x.shape, set(axes))
        count = common.prod([x.shape[a] for a in axes])
        if not symbolic.decided(lambda: count >= 1, False):
            if isinstance(count, symbolic.Expr):
                raise symbolic.Undecidable(f"whether {symbolic.text(count)} elements are normalized, or none")
            raise ShapeError(f"node {node.name!r} (MeanVarianceNormalization): the normalized dims are empty")
        tiling: dict = {"items": 0}

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)

        def dims(pairs, prefix: str) -> list[dict]:
            return common.tiling_dims(tiling, pairs, prefix)
        kept = [(n, s) for n, s, r in groups if not r]
        reduced = [(n, s) for n, s, r in groups if r]
        (run, run_stride), reduced = (reduced[-1], reduced[:-1]) if reduced else ((1, 0), [])
        items = common.prod([n for n, _ in kept])
        tiling["items"] = items
        params = {"summary": f"MeanVarianceNormalization axes={axes}: {x.describe()} -> {outs[0].describe()}",
                  "count": field(count, "count"), "kept": dims(kept, "k"), "red_outer": dims(reduced, "r"),
                  "router": field(common.prod([n for n, _ in reduced]), "router"), "run": field(run, "run"),
                  "at": f"off + l * {field(run_stride, 'run_stride')}"}
        params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/mvn.c.j2", node.op_type, params, [x.name], [outs[0].name],
                          block_dim=common.block_dim_for(items, 3 * count), tiling=tiling)
