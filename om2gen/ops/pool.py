"""MaxPool, AveragePool (2-D) and GlobalAveragePool."""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedOpError
from ..lower.program import KernelCall
from . import common
from .conv import out_size, spatial_pads
from .registry import Op, register


class Pool2d(Op):
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None, "pads": None,
             "storage_order": 0, "strides": None, "count_include_pad": 0}
    kind = ""

    def geometry(self, node, ins):
        x = ins[0]
        if len(x.shape) != 4:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): only 2-D pooling (4-D input) is "
                                     f"supported, got {list(x.shape)}")
        kernel = self.attr(node, "kernel_shape")
        if not kernel or len(kernel) != 2:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): kernel_shape must have 2 values")
        kh, kw = (int(v) for v in kernel)
        strides = [int(s) for s in (self.attr(node, "strides") or [1, 1])]
        dil = [int(d) for d in (self.attr(node, "dilations") or [1, 1])]
        n, c, h, w = x.shape
        pads = spatial_pads(node, lambda a: self.attr(node, a), (h, w), (kh, kw), strides, dil)
        ceil = bool(self.attr(node, "ceil_mode"))
        oh = out_size(h, kh, strides[0], dil[0], pads[0], pads[2], ceil)
        ow = out_size(w, kw, strides[1], dil[1], pads[1], pads[3], ceil)
        if ceil:  # the last window must start inside the (left-padded) input
            if (oh - 1) * strides[0] >= h + pads[0]:
                oh -= 1
            if (ow - 1) * strides[1] >= w + pads[1]:
                ow -= 1
        if oh <= 0 or ow <= 0:
            raise ShapeError(f"node {node.name!r} ({node.op_type}): output would be empty")
        return dict(N=n, C=c, H=h, W=w, KH=kh, KW=kw, SH=strides[0], SW=strides[1], DH=dil[0], DW=dil[1],
                    PT=pads[0], PL=pads[1], PB=pads[2], PR=pads[3], OH=oh, OW=ow)

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        if len([o for o in node.outputs if o]) > 1:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): the Indices output is not supported")
        g = self.geometry(node, ins)
        return [common.out(ins[0].dtype, (g["N"], g["C"], g["OH"], g["OW"]))]

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        params = dict(g, summary=f"{node.op_type} {g['KH']}x{g['KW']}: {ins[0].describe()} -> {outs[0].describe()}",
                      kind=self.kind, include_pad=bool(self.attr(node, "count_include_pad")))
        rows = g["N"] * g["C"] * g["OH"]
        return KernelCall("kernels/pool2d.c.j2", node.op_type, params, [ins[0].name], [outs[0].name],
                          block_dim=common.block_dim_for(rows, g["OW"] * g["KH"] * g["KW"]), tiling=[rows])


@register("MaxPool", since=1)
class MaxPool(Pool2d):
    kind = "max"


@register("AveragePool", since=1)
class AveragePool(Pool2d):
    kind = "avg"

    def geometry(self, node, ins):
        if self.attr(node, "dilations") not in (None, [1, 1]):
            raise UnsupportedOpError(f"node {node.name!r} (AveragePool): dilations are not supported")
        return super().geometry(node, ins)


@register("GlobalAveragePool", since=1)
class GlobalAveragePool(Op):
    def infer(self, node, ins):
        common.require_float(node, ins[0])
        x = ins[0]
        if len(x.shape) < 3:
            raise ShapeError(f"node {node.name!r} (GlobalAveragePool): input must be N x C x spatial")
        return [common.out(x.dtype, x.shape[:2] + (1,) * (len(x.shape) - 2))]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        rows = x.shape[0] * x.shape[1]
        spatial = x.size // max(rows, 1)
        params = {"summary": f"GlobalAveragePool: {x.describe()} -> {outs[0].describe()}", "len": spatial}
        return KernelCall("kernels/global_avgpool.c.j2", "GlobalAveragePool", params, [x.name], [outs[0].name],
                          block_dim=common.block_dim_for(rows, spatial), tiling=[rows])
