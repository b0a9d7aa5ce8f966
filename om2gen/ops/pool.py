"""MaxPool (with its optional Indices output), AveragePool and LpPool for 1-D, 2-D and 3-D inputs,
and GlobalAveragePool for any rank.

Like Conv, every rank is lowered as 3-D with leading singleton dims. The window of an output
element is clipped per dim to the taps that land inside the input; AveragePool divides by the
taps inside the input, or (count_include_pad) inside the explicitly padded input.
A float32 2-D undilated MaxPool without Indices runs the output columns whose window is wholly
inside the row through an unchecked loop the compiler vectorises (same tap order, same NaN rule).
On AVX-512, a float32 1-D or 2-D MaxPool without Indices with column stride 1 or 2 runs the direct
depthwise-window kernel instead (templates/kernels/dwconv_direct.c.j2 without weights: -inf
padding, a NaN in a window gives NaN).
"""
from __future__ import annotations

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.dtypes import INT64
from ..ir.program import KernelCall
from . import common, conv
from .conv import as3, out_size, same_sizes, spatial_ints, spatial_pads, spatial_rank
from .registry import REQUIRED, Op, register

_MAX_INIT = {"float32": "-INFINITY", "float64": "-INFINITY", "int8": "INT8_MIN", "uint8": "0"}


class Pool(Op):
    """The windowed pools. Attributes absent from a version's `attrs` take their neutral value."""
    dynamic_shapes = True
    attrs = {"auto_pad": "NOTSET", "kernel_shape": REQUIRED, "pads": None, "strides": None}
    kind = ""
    dtypes = ("float32",)

    def opt(self, node, name, neutral):
        return self.attr(node, name) if name in self.attrs else neutral

    def windows(self, node, x) -> tuple:
        """(rank, sizes, kernel, strides, dilations, pads, ceil_mode, output sizes) per spatial dim."""
        r = spatial_rank(node, x)
        kernel = [int(v) for v in self.attr(node, "kernel_shape")]
        if len(kernel) != r or min(kernel) <= 0:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): kernel_shape {kernel} does not fit input "
                             f"{list(x.shape)} ({r} spatial dims)")
        strides = spatial_ints(node, self.attr(node, "strides"), r, "strides", 1, minimum=1)
        dil = spatial_ints(node, self.opt(node, "dilations", None), r, "dilations", 1, minimum=1)
        sizes = list(x.shape[2:])
        pads = spatial_pads(node, lambda a: self.attr(node, a), sizes, kernel, strides, dil)
        ceil = bool(self.opt(node, "ceil_mode", 0))
        outs = []
        for i in range(r):
            o = out_size(sizes[i], kernel[i], strides[i], dil[i], pads[i], pads[r + i], ceil)
            if ceil and isinstance(o, symbolic.Expr):
                o = _last_window_inside(o, sizes[i], kernel[i], strides[i], dil[i], pads[i], pads[r + i])
            elif ceil and (o - 1) * strides[i] >= sizes[i] + pads[i]:
                o -= 1  # the last window must start inside the (begin-padded) input
            outs.append(o)
        outs = same_sizes(lambda a: self.attr(node, a), sizes, strides, outs)
        if any(o <= 0 for o in outs):
            raise ShapeError(f"node {node.name!r} ({node.op_type}): output would be empty ({outs})")
        return r, sizes, kernel, strides, dil, pads, ceil, outs

    def geometry(self, node, ins):
        x = ins[0]
        r, sizes, kernel, strides, dil, pads, ceil, outs = self.windows(node, x)
        dims = []
        for name, size, k, s, d, pb, pe, o in zip("dhw", as3(sizes, 1), as3(kernel, 1), as3(strides, 1),
                                                   as3(dil, 1), as3(pads[:r], 0), as3(pads[r:], 0), as3(outs, 1)):
            trivial = isinstance(size, int) and size == 1 and k == 1 and pb == 0 and pe == 0 and o == 1
            dims.append(dict(n=name, size=size, K=k, S=s, DIL=d, DM1=d - 1, PB=pb, PE=pe, OUT=o, trivial=trivial))
        note = f"{r}-D, kernel={kernel} strides={strides} dilations={dil} pads={pads} ceil_mode={int(ceil)}"
        return dict(rank=r, N=x.shape[0], C=x.shape[1], dims=dims, out_spatial=outs, notes=[note])

    def check_dtype(self, node, x):
        if x.dtype.name not in self.dtypes:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input {x.name!r} is {x.dtype.name}; "
                                     f"om2gen compiles this operator for {', '.join(self.dtypes)}")

    def infer(self, node, ins):
        self.check_dtype(node, ins[0])
        x = ins[0]
        return [common.out(x.dtype, (x.shape[0], x.shape[1], *self.windows(node, x)[-1]))]

    def params(self, node, ins, g) -> dict:
        return {}

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        x = ins[0]
        rows = g["N"] * g["C"] * g["dims"][0]["OUT"] * g["dims"][1]["OUT"]
        work = g["dims"][2]["OUT"] * g["dims"][0]["K"] * g["dims"][1]["K"] * g["dims"][2]["K"]
        tiling = {"rows": rows}
        extra = self.params(node, ins, g)
        # a dynamic model's sizes: tiling fields the template reads (common.tiling_field)
        dims = [dict(dim, size=common.tiling_field(tiling, dim["size"], f"{dim['n']}_size"),
                     OUT=common.tiling_field(tiling, dim["OUT"], f"{dim['n']}_out")) for dim in g["dims"]]
        if extra.get("fast"):
            extra["fast"] = {key: common.tiling_field(tiling, v, f"fast_{key}") for key, v in extra["fast"].items()}
        d, h, w = dims
        params = dict(summary=f"{node.op_type}: {x.describe()} -> {', '.join(o.describe() for o in outs)}",
                      notes=g["notes"], kind=self.kind, kind_title=_KIND_TITLES[self.kind], ctype=x.dtype.c_type, dims=dims, d=d, h=h, w=w,
                      indices=False, include_pad=False, fast=None)
        params.update(extra)
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/pool2d.c.j2", node.op_type, params, [x.name], [o.name for o in outs],
                          block_dim=common.block_dim_for(rows, work), tiling=tiling)


_KIND_TITLES = {"max": "Max", "avg": "Average", "lp": "Lp"}


def _last_window_inside(o, size, k, s, d, pb, pe):
    """ceil_mode's output size o of a dynamic dim, less the last window where it would start past
    the begin-padded input: min(o, (size + pb - 1) // s + 1). That is the static rule (one window
    less where (o - 1) * s >= size + pb) wherever o exceeds the bound by at most one, which holds
    when the end pad is no wider than the window."""
    if pe > (k - 1) * d + 1:
        raise symbolic.Undecidable(f"ceil_mode's last window over a dim of {size} with an end pad ({pe}) wider than "
                                   f"the window ({(k - 1) * d + 1})")
    return symbolic.smin(o, symbolic.floordiv(size + pb - 1, s) + 1)


def interior_columns(g) -> dict | None:
    """The output columns [lo, hi) of a 2-D undilated pool whose window lies wholly inside the input row,
    for the kernel's unchecked (vectorised) loop; None when there are none or the pool is not 2-D."""
    d, h, w = g["dims"]
    if g["rank"] != 2 or h["DIL"] != 1 or w["DIL"] != 1:
        return None
    lo = -(-w["PB"] // w["S"])
    if isinstance(w["size"], symbolic.Expr):   # the run's: [lo, hi) empty where the row is too short
        hi = symbolic.smax(lo, symbolic.smin((w["size"] - w["K"] + w["PB"]) // w["S"] + 1, w["OUT"]))
        return {"lo": lo, "hi": hi, "count": hi - lo, "first_input": lo * w["S"] - w["PB"]}
    hi = min((w["size"] - w["K"] + w["PB"]) // w["S"] + 1, w["OUT"])
    # first_input: the input column output column lo's window starts at
    return {"lo": lo, "hi": hi, "count": hi - lo, "first_input": lo * w["S"] - w["PB"]} if hi > lo else None


@register("MaxPool", since=1)
class MaxPool1(Pool):
    kind = "max"
    dtypes = ("float32", "float64", "int8", "uint8")

    def infer(self, node, ins):
        y = super().infer(node, ins)[0]
        if len(node.outputs) > 1 and node.outputs[1]:
            if "storage_order" not in self.attrs:
                raise UnsupportedOpError(f"node {node.name!r} (MaxPool): the Indices output needs opset 8 or later")
            if not node.outputs[0]:
                raise UnsupportedOpError(f"node {node.name!r} (MaxPool): Indices without the pooled output "
                                         "is not supported")
            return [y, common.out(INT64, y.shape)]
        return [y]

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        d, h, w = g["dims"]
        plain = len(node.outputs) < 2 or not node.outputs[1]
        if plain and ins[0].dtype.name == "float32" and d["trivial"] and ins[0].is_static:
            # a 2-D (or 1-D) float max pool is a depthwise window without weights: the direct kernel
            geom = dict(N=g["N"], C=g["C"], H=h["size"], W=w["size"], OH=h["OUT"], OW=w["OUT"], KH=h["K"], KW=w["K"],
                        SH=h["S"], SW=w["S"], DH=h["DIL"], DW=w["DIL"], PT=h["PB"], PL=w["PB"])
            if conv.direct_window_fits(ctx.target, geom):
                return conv.direct_window_call("MaxPool", [ins[0].name], outs[0].name, geom, pool=True)
        return super().lower(node, ins, outs, ctx)

    def params(self, node, ins, g):
        if len(node.outputs) < 2 or not node.outputs[1]:
            return {"init": _MAX_INIT[ins[0].dtype.name], "is_float": ins[0].dtype.name.startswith("float"),
                    "fast": interior_columns(g) if ins[0].dtype.name == "float32" else None}
        order = int(self.opt(node, "storage_order", 0))
        if order not in (0, 1):
            raise UnsupportedOpError(f"node {node.name!r} (MaxPool): storage_order {order} is not 0 or 1")
        # Flattened index of the input element: n, c and the spatial dims, row-major (storage_order 0)
        # or column-major over the spatial dims (1). Singleton dims added for the 3-D form get 0.
        r = g["rank"]
        sizes = [dim["size"] for dim in g["dims"]][3 - r:]
        if order == 0:
            strides = [1] * r
            for i in range(r - 2, -1, -1):
                strides[i] = strides[i + 1] * sizes[i + 1]
        else:
            strides = [1] * r
            for i in range(1, r):
                strides[i] = strides[i - 1] * sizes[i - 1]
        strides = as3(strides, 0)
        return {"init": _MAX_INIT[ins[0].dtype.name], "is_float": ins[0].dtype.name.startswith("float"),
                "indices": True, "index_strides": strides, "storage_order": order}


@register("MaxPool", since=8)
class MaxPool8(MaxPool1):
    attrs = dict(Pool.attrs, storage_order=0)


@register("MaxPool", since=10)
class MaxPool10(MaxPool8):
    attrs = dict(MaxPool8.attrs, ceil_mode=0, dilations=None)


@register("AveragePool", since=1)
class AveragePool1(Pool):
    kind = "avg"

    def params(self, node, ins, g):
        return {"include_pad": bool(self.opt(node, "count_include_pad", 0))}


@register("AveragePool", since=7)
class AveragePool7(AveragePool1):
    attrs = dict(Pool.attrs, count_include_pad=0)


@register("AveragePool", since=10)
class AveragePool10(AveragePool7):
    attrs = dict(AveragePool7.attrs, ceil_mode=0)


@register("AveragePool", since=19)
class AveragePool19(AveragePool10):
    attrs = dict(AveragePool10.attrs, dilations=None)


@register("LpPool", since=1)
class LpPool1(Pool):
    """y = (sum over the window's taps inside the input of |x|^p)^(1/p)."""
    kind = "lp"
    attrs = dict(Pool.attrs, p=2.0)

    def params(self, node, ins, g):
        p = float(self.attr(node, "p"))
        if p <= 0:
            raise UnsupportedOpError(f"node {node.name!r} (LpPool): p = {p} is not positive")
        if p == 1.0:
            term, final = "fabsf(v)", "acc"
        elif p == 2.0:
            term, final = "v * v", "sqrtf(acc)"
        else:
            term, final = f"powf(fabsf(v), {c_float(p)})", f"powf(acc, {c_float(1.0 / p)})"
        return {"lp_term": term, "lp_final": final}


@register("LpPool", since=2)
class LpPool2(LpPool1):
    attrs = dict(Pool.attrs, p=2)


@register("LpPool", since=18)
class LpPool18(LpPool2):
    attrs = dict(LpPool2.attrs, ceil_mode=0, dilations=None)


@register("GlobalAveragePool", since=1)
class GlobalAveragePool(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        x = ins[0]
        if len(x.shape) < 3:
            raise ShapeError(f"node {node.name!r} (GlobalAveragePool): input must be N x C x spatial")
        return [common.out(x.dtype, x.shape[:2] + (1,) * (len(x.shape) - 2))]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        rows = x.shape[0] * x.shape[1]
        spatial = common.prod(x.shape[2:])
        tiling = {"planes": rows}    # with a dynamic model's plane size (common.tiling_field)
        params = {"summary": f"GlobalAveragePool: {x.describe()} -> {outs[0].describe()}",
                  "len": common.tiling_field(tiling, spatial, "len")}
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/global_avgpool.c.j2", "GlobalAveragePool", params, [x.name], [outs[0].name],
                          block_dim=common.block_dim_for(rows, spatial), tiling=tiling)
