"""OneHot: indices to rows of off values with one on value (templates/kernels/onehot.c.j2).

The depth sets the output's shape, so it must be a compile-time constant; the values (off, on)
are read at run time. OneHot-9 gives an all-off row to an index outside [0, depth); OneHot-11
counts negative indices from the end, so its range is [-depth, depth). Float indices are cast to
int64 (truncated toward zero) as the spec says, as ONNX Runtime does; NaN, infinities and values
outside the range give all-off rows, and nothing is written outside the output.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..ir.program import KernelCall
from . import common
from .registry import Op, register

_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOAT = ("float32", "float64")


@register("OneHot", since=9)
class OneHot(Op):
    attrs = {"axis": -1}
    negative_indices = False    # OneHot-9: only [0, depth) is on

    def depth(self, node, ins) -> int:
        depth = ins[1]
        got = common.const_ints(node, depth, "depth")
        if len(got) != 1:
            raise ShapeError(f"node {node.name!r} (OneHot): depth {depth.name!r} has shape {list(depth.shape)}; it "
                             "must be a scalar or hold one value")
        if got[0] < 1:
            raise ShapeError(f"node {node.name!r} (OneHot): depth {depth.name!r} is {got[0]}; it must be at least 1")
        return got[0]

    def plan(self, node, ins) -> tuple[int, int]:
        """(depth, the output axis it lies along)."""
        indices, _, values = ins
        kind = indices.dtype.name
        if kind not in _SIGNED + _UNSIGNED + _FLOAT:
            raise UnsupportedOpError(f"node {node.name!r} (OneHot): indices {indices.name!r} are {kind}; om2gen "
                                     f"takes {', '.join(_SIGNED + _UNSIGNED + _FLOAT)}")
        if not indices.shape:
            raise ShapeError(f"node {node.name!r} (OneHot): indices {indices.name!r} are a scalar; they need rank 1 "
                             "or more")
        if values.size != 2 or len(values.shape) != 1:
            raise ShapeError(f"node {node.name!r} (OneHot): values {values.describe()} must be a tensor of two "
                             "elements, [off_value, on_value]")
        depth = self.depth(node, ins)
        return depth, common.axis(node, int(self.attr(node, "axis")), len(indices.shape) + 1)

    def infer(self, node, ins):
        indices, _, values = ins
        depth, a = self.plan(node, ins)
        return [common.out(values.dtype, indices.shape[:a] + (depth,) + indices.shape[a:])]

    def lower(self, node, ins, outs, ctx):
        indices, _, values = ins
        dst = outs[0]
        depth, a = self.plan(node, ins)
        outer = int(np.prod(indices.shape[:a], dtype=np.int64))
        inner = int(np.prod(indices.shape[a:], dtype=np.int64))
        kind = indices.dtype.name
        wrap = self.negative_indices and kind not in _UNSIGNED
        params = {
            "summary": f"OneHot axis={a} depth={depth}: {indices.describe()}, {values.describe()} -> "
                       f"{dst.describe()}",
            "ctype": values.dtype.c_type, "index_ctype": indices.dtype.c_type, "depth": depth, "inner": inner,
            "float_indices": kind in _FLOAT, "wrap": wrap,
            # a float index is on where it truncates into the range: low < v < high
            "low": -depth - 1 if wrap else -1, "high": depth,
            # axis last: one work item per index, its row of depth; else one per output row of inner
            "by_index": inner == 1,
        }
        if inner == 1:
            items, work = outer, depth
        else:
            items, work = outer * depth, inner
        return KernelCall("kernels/onehot.c.j2", "OneHot", params, [indices.name, values.name], [dst.name],
                          block_dim=common.block_dim_for(items, work), tiling={"items": items})


@register("OneHot", since=11)
class OneHot11(OneHot):
    negative_indices = True
