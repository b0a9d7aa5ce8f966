"""Softmax: opset < 13 coerces the input to 2-D at `axis`; opset 13+ works along one axis."""
from __future__ import annotations

from ..ir.program import KernelCall
from ..toolchain.blocking import blocking
from . import common
from .registry import Op, register


@register("Softmax", since=1)
class Softmax(Op):
    dynamic_shapes = True
    attrs = {"axis": 1}

    def layout(self, node, x):
        """(outer, length, inner) of the reduction."""
        a = common.axis(node, self.attr(node, "axis"), len(x.shape))
        outer = common.prod(x.shape[:a])
        return outer, common.prod(x.shape[a:]), 1

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        outer, length, inner = self.layout(node, ins[0])
        items = outer * inner
        tiling = {"items": items}   # with a dynamic model's sizes (common.tiling_field)
        params = {"summary": f"Softmax axis={self.attr(node, 'axis')}: {ins[0].describe()} -> {outs[0].describe()}",
                  "len": common.tiling_field(tiling, length, "len"), "inner": common.tiling_field(tiling, inner, "inner"),
                  "gemm": blocking(ctx.target).defines()}
        if len(tiling) > 1:
            params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/softmax.c.j2", "Softmax", params, [ins[0].name], [outs[0].name],
                          block_dim=common.block_dim_for(items, length), tiling=tiling)


@register("Softmax", since=13)
class Softmax13(Softmax):
    attrs = {"axis": -1}

    def layout(self, node, x):
        a = common.axis(node, self.attr(node, "axis"), len(x.shape))
        return (common.prod(x.shape[:a]), x.shape[a],
                common.prod(x.shape[a + 1:]))
