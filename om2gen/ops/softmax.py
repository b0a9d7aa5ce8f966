"""Softmax: opset < 13 coerces the input to 2-D at `axis`; opset 13+ works along one axis."""
from __future__ import annotations

from ..ir.program import KernelCall
from . import common, gemm_pack
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
        params = {"summary": f"Softmax axis={self.attr(node, 'axis')}: {ins[0].describe()} -> {outs[0].describe()}",
                  "len": length, "inner": inner, "gemm": gemm_pack.blocking(ctx.target).defines()}
        items = outer * inner
        return KernelCall("kernels/softmax.c.j2", "Softmax", params, [ins[0].name], [outs[0].name],
                          block_dim=common.block_dim_for(items, length), tiling={"items": items})


@register("Softmax", since=13)
class Softmax13(Softmax):
    attrs = {"axis": -1}

    def layout(self, node, x):
        a = common.axis(node, self.attr(node, "axis"), len(x.shape))
        return (common.prod(x.shape[:a]), x.shape[a],
                common.prod(x.shape[a + 1:]))
