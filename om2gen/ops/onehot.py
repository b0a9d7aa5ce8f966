"""OneHot: indices to rows of off values with one on value (templates/kernels/onehot.c.j2).

The depth sets the output's shape: a constant, a size computed from a dynamic model's input
shapes, or a run-time value (docs/dynamic-shapes.md, "Data-dependent shapes"): then the depth is
a count the kernel reads and writes into the symbols table, and the output is planned at the most
its value bounds allow (ops/value_bounds.py; a Min against a constant bounds it). The indices'
shape may be dynamic; every size is a tiling word. The values (off, on) are read at run time.
A run-time depth below 1, which the spec does not allow, gives an empty output. OneHot-9 gives an all-off row to an index outside [0, depth); OneHot-11
counts negative indices from the end, so its range is [-depth, depth). Float indices are cast to
int64 (truncated toward zero) as the spec says, as ONNX Runtime does; NaN, infinities and values
outside the range give all-off rows, and nothing is written outside the output.
"""
from __future__ import annotations

from ..advice import value_option
from ..errors import NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import KernelCall
from . import common, value_bounds
from .registry import Op, register
from .slice_runtime import is_run_time

_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOAT = ("float32", "float64")


@register("OneHot", since=9)
class OneHot(Op):
    attrs = {"axis": -1}
    negative_indices = False    # OneHot-9: only [0, depth) is on

    dynamic_shapes = True

    def depth(self, node, ins):
        """The depth: an int, an Expr (from the input shapes), or None (a run-time value)."""
        depth = ins[1]
        if depth.size != 1:
            raise ShapeError(f"node {node.name!r} (OneHot): depth {depth.name!r} has shape {list(depth.shape)}; it "
                             "must be a scalar or hold one value")
        if is_run_time(depth):
            return None
        got = common.const_ints(node, depth, "depth")[0]
        if not isinstance(got, symbolic.Expr) and got < 1:
            raise ShapeError(f"node {node.name!r} (OneHot): depth {depth.name!r} is {got}; it must be at least 1")
        return got

    def most(self, node, depth) -> int:
        """The largest a run-time depth can be, from its value bounds."""
        b = value_bounds.of(depth)
        if b is None or b[1] == float("inf"):
            raise NeedsConstantError(f"node {node.name!r} (OneHot): its depth ({depth.name!r}) is a run-time value "
                                     "and nothing bounds it (ops/value_bounds.py follows constants, input shapes, "
                                     "casts, + - *, Min/Max), so there is no size to plan the output at: clamp it "
                                     f"with Min against a constant, or freeze it with {value_option(depth.name)}",
                                     depth.name)
        return max(int(b[1]), 0)

    def plan(self, node, ins) -> tuple[object, int]:
        """(depth: its dim in the output, the output axis it lies along)."""
        indices, depth, values = ins
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
        d = self.depth(node, ins)
        if d is None:
            if depth.dtype.name not in _SIGNED + _UNSIGNED + _FLOAT:
                raise UnsupportedOpError(f"node {node.name!r} (OneHot): depth {depth.name!r} is {depth.dtype.name}")
            d = common.count_dim(node, self.most(node, depth))
        return d, common.axis(node, int(self.attr(node, "axis")), len(indices.shape) + 1)

    def infer(self, node, ins):
        indices, _, values = ins
        depth, a = self.plan(node, ins)
        return [common.out(values.dtype, indices.shape[:a] + (depth,) + indices.shape[a:])]

    def lower(self, node, ins, outs, ctx):
        indices, depth_in, values = ins
        dst = outs[0]
        depth, a = self.plan(node, ins)
        outer = _product(indices.shape[:a])
        inner = _product(indices.shape[a:])
        kind = indices.dtype.name
        run_time = is_run_time(depth_in)
        most = symbolic.upper_bound(depth) if run_time else depth
        params = {
            "summary": f"OneHot axis={a} depth={symbolic.text(depth)}: {indices.describe()}, {values.describe()} -> "
                       f"{dst.describe()}",
            "ctype": values.dtype.c_type, "index_ctype": indices.dtype.c_type,
            "float_indices": kind in _FLOAT, "wrap": self.negative_indices and kind not in _UNSIGNED,
            # axis last: one work item per index, its row of depth; else one per output row of inner
            "by_index": inner == 1,
            "depth_ctype": depth_in.dtype.c_type if run_time else None,
        }
        inputs = [indices.name] + ([depth_in.name] if run_time else []) + [values.name]
        items, work = (outer, most) if inner == 1 else (outer * most, inner)
        return KernelCall("kernels/onehot.c.j2", "OneHot", params, inputs, [dst.name],
                          block_dim=common.block_dim_for(items, work),
                          tiling={"outer": outer, "depth": most, "inner": inner},
                          count_symbol=symbolic.symbols(depth).pop().name if run_time else "")


def _product(dims):
    out = 1
    for d in dims:
        out = out * d
    return out if isinstance(out, symbolic.Expr) else int(out)


@register("OneHot", since=11)
class OneHot11(OneHot):
    negative_indices = True
