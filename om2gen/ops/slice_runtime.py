"""Slice whose starts or ends are run-time values (a loop-carried counter, a count computed by the
model): a data-dependent op (docs/dynamic-shapes.md, "Data-dependent shapes").

Paddle exports `x[:, i:i+1] = v` inside a Loop as Slice(x, starts=i, ends=Min(dim, i + 1)), and
`x[:, :n]` after one with n the loop's final counter; neither bound is known before the run. The
sliced axis's length is a symbol in 0~ceil(dim/|step|) (the most any bounds can give), planned at
that most: the kernel (templates/kernels/slice_runtime.c.j2) reads the bounds, clamps them as the
spec says, writes the length into the symbols table for the tiling steps after it (inside a Loop
body, every iteration) and copies. One axis per node has run-time bounds: the symbols table has
one count per kernel.
"""
from __future__ import annotations

from ..advice import value_option
from ..errors import NeedsConstantError, ShapeError
from ..ir import symbolic
from ..ir.graph import Node, Value
from ..ir.program import KernelCall
from . import common

_INDEX_TYPES = ("int32", "int64")


def is_run_time(v: Value | None) -> bool:
    """A bound neither constant nor computed from the input shapes (frontend/shape_dims.py)."""
    return v is not None and not v.is_const and v.dims is None


def known(v: Value):
    """The single bound a known starts/ends input holds (an int or an Expr)."""
    d = v.dims.reshape(-1)[0] if v.dims is not None else v.const.reshape(-1)[0]
    return d if isinstance(d, symbolic.Expr) else int(d)


def operands(named: dict, inputs: list[str], tiling: dict) -> dict:
    """The templates' view of each bound: a run-time one is read from the input it is (appended
    to `inputs`: slot), a known one is the tiling field of its name (slot None)."""
    out = {}
    for what, v in named.items():
        if is_run_time(v):
            out[what] = {"slot": len(inputs), "ctype": v.dtype.c_type}
            inputs.append(v.name)
        else:
            tiling[what] = known(v)
            out[what] = {"slot": None}
    return out


def plan(node: Node, ins: list) -> tuple[int, int, object]:
    """(axis, step, dim) of the one axis a Slice with run-time starts or ends cuts."""
    data, starts, ends = ins[0], ins[1], ins[2]
    where = f"node {node.name!r} (Slice)"
    if not data.shape:
        raise ShapeError(f"{where}: input {data.name!r} is a scalar; Slice needs a tensor of rank 1 or more")
    for v, what in ((starts, "starts"), (ends, "ends")):
        if v.dtype.name not in _INDEX_TYPES:
            raise ShapeError(f"{where}: {what} is {v.dtype.name}; ONNX gives Slice's bounds as int32 or int64")
    if starts.size != 1 or ends.size != 1:
        name = next(v.name for v in (starts, ends) if is_run_time(v))
        raise NeedsConstantError(
            f"{where}: its starts or ends are run-time values over {starts.size} axes; om2gen slices one axis by "
            "run-time bounds per node (its length is a count the kernel writes at run time). Write one Slice per "
            f"axis, or make the bounds known at compile time (if {name!r} is a model input, freeze it with "
            f"{value_option(name)})", name)
    axes = common.const_ints(node, ins[3] if len(ins) > 3 else None, "axes") or [0]
    steps = common.const_ints(node, ins[4] if len(ins) > 4 else None, "steps") or [1]
    if len(axes) != 1 or len(steps) != 1:
        raise ShapeError(f"{where}: starts and ends have one value and axes/steps {len(axes)}/{len(steps)}")
    step = steps[0]
    if not isinstance(step, int) or step == 0:
        raise ShapeError(f"{where}: step {symbolic.text(step)}; a Slice with run-time bounds needs a non-zero "
                         "constant step")
    axis = common.axis(node, int(axes[0]), len(data.shape))
    return axis, step, data.shape[axis]


def infer(node: Node, ins: list) -> list[Value]:
    axis, step, dim = plan(node, ins)
    shape = list(ins[0].shape)
    shape[axis] = common.count_dim(node, symbolic.ceildiv(dim, abs(step)))
    return [common.out(ins[0].dtype, shape)]


def lower(node: Node, ins: list, outs: list) -> KernelCall:
    src, starts, ends = ins[0], ins[1], ins[2]
    dst = outs[0]
    axis, step, dim = plan(node, ins)
    count = dst.shape[axis]
    tiling = {"outer": common.prod(src.shape[:axis]), "dim": dim, "inner": common.prod(src.shape[axis + 1:])}
    inputs = [src.name]
    bounds = operands({"start": starts, "end": ends}, inputs, tiling)
    most = symbolic.upper_bound(tiling["outer"] * symbolic.ceildiv(dim, abs(step)))
    params = {"summary": f"Slice axis {axis} step {step} by run-time bounds: {src.describe()} -> {dst.describe()}",
              "ctype": src.dtype.c_type, "step": step, "tiling_fields": list(tiling), **bounds}
    blocks = common.block_dim_for(most, symbolic.upper_bound(tiling["inner"]))
    return KernelCall("kernels/slice_runtime.c.j2", "Slice", params, inputs, [dst.name], block_dim=blocks,
                      tiling=tiling, count_symbol=symbolic.symbols(count).pop().name)
