"""Conv (2-D): direct convolution, one output row per work item; pads incl. auto_pad, strides,
dilations, groups (depthwise included)."""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedOpError
from ..lower.program import KernelCall
from . import common
from .registry import Op, register


def spatial_pads(node, attr, in_sizes, kernel, strides, dilations) -> list[int]:
    """Begin/end pads per spatial dim, resolving auto_pad as the spec defines it."""
    auto = attr("auto_pad")
    rank = len(in_sizes)
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("NOTSET", "", None):
        pads = attr("pads") or [0] * (2 * rank)
        return [int(p) for p in pads]
    if auto == "VALID":
        return [0] * (2 * rank)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end
    raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): auto_pad {auto!r} is not supported")


def out_size(size, k, s, d, pb, pe, ceil_mode=False) -> int:
    span = size + pb + pe - ((k - 1) * d + 1)
    return (math.ceil(span / s) if ceil_mode else span // s) + 1


@register("Conv", since=1)
class Conv(Op):
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
             "strides": None}

    def geometry(self, node, ins):
        x, w = ins[0], ins[1]
        if len(x.shape) != 4:
            raise UnsupportedOpError(f"node {node.name!r} (Conv): only 2-D convolution (4-D input) is supported, "
                                     f"got input {list(x.shape)}")
        n, c, h, wd = x.shape
        m, cg, kh, kw = w.shape
        group = int(self.attr(node, "group"))
        if c != cg * group or m % group:
            raise ShapeError(f"node {node.name!r} (Conv): input channels {c}, weight {list(w.shape)} and "
                             f"group {group} do not fit")
        strides = [int(s) for s in (self.attr(node, "strides") or [1, 1])]
        dil = [int(d) for d in (self.attr(node, "dilations") or [1, 1])]
        pads = spatial_pads(node, lambda a: self.attr(node, a), (h, wd), (kh, kw), strides, dil)
        oh = out_size(h, kh, strides[0], dil[0], pads[0], pads[2])
        ow = out_size(wd, kw, strides[1], dil[1], pads[1], pads[3])
        if oh <= 0 or ow <= 0:
            raise ShapeError(f"node {node.name!r} (Conv): output would be empty ({oh}x{ow})")
        return dict(N=n, C=c, H=h, W=wd, M=m, KH=kh, KW=kw, G=group, CG=cg, MG=m // group, OH=oh, OW=ow,
                    SH=strides[0], SW=strides[1], DH=dil[0], DW=dil[1], PT=pads[0], PL=pads[1])

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        g = self.geometry(node, ins)
        return [common.out(ins[0].dtype, (g["N"], g["M"], g["OH"], g["OW"]))]

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        bias = len(ins) > 2 and ins[2] is not None
        # Per kernel column kw: the output columns whose input column is inside the image.
        cols = []
        for kw in range(g["KW"]):
            off = kw * g["DW"] - g["PL"]
            lo = min(g["OW"], max(0, -(off // g["SW"])))          # first ow with ow*SW + off >= 0
            hi = min(g["OW"], max(lo, -((off - g["W"]) // g["SW"])))  # first ow with ow*SW + off >= W
            cols.append({"kw": kw, "off": off, "lo": lo, "hi": hi})
        params = dict(g, summary=f"Conv: {ins[0].describe()} * {ins[1].describe()} -> {outs[0].describe()}",
                      bias=bias, cols=cols)
        params["notes"] = [f"group={g['G']} strides=[{g['SH']},{g['SW']}] dilations=[{g['DH']},{g['DW']}] "
                           f"pads(top,left)=[{g['PT']},{g['PL']}]"]
        rows = g["N"] * g["M"] * g["OH"]
        inputs = [ins[0].name, ins[1].name] + ([ins[2].name] if bias else [])
        return KernelCall("kernels/conv2d.c.j2", "Conv", params, inputs, [outs[0].name],
                          block_dim=common.block_dim_for(rows, g["OW"] * g["CG"] * g["KH"] * g["KW"]), tiling=[rows])
