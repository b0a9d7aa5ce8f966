"""DynamicQuantizeLinear: float32 to uint8 with a scale and zero point computed from the data,
as ONNX Runtime computes them (templates/kernels/dynamic_quantize.c.j2): two passes, each block
first finding the min and max of its share, then every block reading all the shares and
quantizing its own (ties to even, saturated)."""
from __future__ import annotations

from ..ir import dtypes
from ..ir.graph import Value
from ..ir.program import KernelCall
from . import common
from .registry import Op, register


def call(node, x, y, scale, zp, temps=()) -> list[KernelCall]:
    """The two kernel calls quantizing x into y, scale and zp (Values; temps: those the calls
    make for themselves, as DynamicQuantizeMatMul's)."""
    blocks = common.block_dim_for(x.size)
    ranges = Value(f"{node.name}::ranges", dtypes.FLOAT32, (2 * blocks,))
    summary = f"DynamicQuantizeLinear: {x.describe()} -> {y.describe()}"
    first = KernelCall("kernels/dynamic_quantize.c.j2", "DynamicQuantizeLinear_range",
                       {"phase": "range", "summary": f"{summary} (pass 1: min and max per block)"}, [x.name],
                       [ranges.name], block_dim=blocks, tiling={"items": x.size}, temps=[ranges, *temps])
    second = KernelCall("kernels/dynamic_quantize.c.j2", "DynamicQuantizeLinear",
                        {"phase": "quantize", "blocks": blocks, "summary": summary}, [x.name, ranges.name],
                        [y.name, scale.name, zp.name], block_dim=blocks, tiling={"items": x.size})
    return [first, second]


@register("DynamicQuantizeLinear", since=11)
class DynamicQuantizeLinear(Op):
    def infer(self, node, ins):
        common.require_float(node, ins[0])
        u8 = dtypes.BY_NAME["uint8"]
        return [common.out(u8, ins[0].shape), common.out(dtypes.FLOAT32, ()), common.out(u8, ())]

    def lower(self, node, ins, outs, ctx):
        return call(node, ins[0], outs[0], outs[1], outs[2])
