"""Range whose start or limit is a run-time value: a data-dependent op (docs/dynamic-shapes.md,
"Data-dependent shapes"), as ops/slice_runtime.py is for Slice.

Its length, max(ceil((limit - start) / delta), 0), is a count its kernel
(templates/kernels/range_runtime.c.j2) computes and writes into the symbols table. The output is
planned at the most the value bounds allow (ops/value_bounds.py: the most limit less the least
start, over delta); a Range they do not bound is refused, naming what to bound. delta must be a
known non-zero constant: its sign decides which bounds count.
"""
from __future__ import annotations

import math

from ..advice import value_option
from ..errors import NeedsConstantError, ShapeError
from ..ir import symbolic
from ..ir.graph import Node, Value
from ..ir.program import KernelCall
from . import common, value_bounds
from .slice_runtime import is_run_time, known, operands

_TYPES = ("int16", "int32", "int64")


def is_data_dependent(ins: list) -> bool:
    return any(is_run_time(v) for v in ins[:3])


def _most(node: Node, ins: list) -> int:
    """The longest the Range can be: (most limit - least start) / delta for delta > 0."""
    start, limit, delta = ins[:3]
    where = f"node {node.name!r} (Range)"
    if start.dtype.name not in _TYPES:
        name = next(v.name for v in ins[:3] if is_run_time(v))
        raise NeedsConstantError(f"{where}: a {start.dtype.name} Range with run-time bounds is not supported (its "
                                 f"length is a count only the run knows, for {', '.join(_TYPES)}); make its bounds "
                                 f"known at compile time (if {name!r} is a model input, freeze it with "
                                 f"{value_option(name)})", name)
    unbounded = "nothing bounds {} (ops/value_bounds.py follows constants, input shapes, casts, + - *, Min/Max " \
        "and a Loop's counters), so there is no size to plan its output at: clamp the bounds with Min/Max " \
        "against constants, or make them known at compile time"
    for v in (start, limit):
        if value_bounds.of(v) is None:
            raise NeedsConstantError(f"{where}: its length is a count only the run knows, and "
                                     f"{unbounded.format(repr(v.name))} (if {v.name!r} is a model input, freeze "
                                     f"it with {value_option(v.name)})", v.name)
    if is_run_time(delta) or not isinstance(known(delta), int) or known(delta) == 0:
        raise NeedsConstantError(f"{where}: its start or limit is a run-time value and its delta ({delta.name!r}) is "
                                 "not a non-zero constant; om2gen plans such a Range at its longest, which needs "
                                 f"delta's sign and size at compile time (if {delta.name!r} is a model input, freeze "
                                 f"it with {value_option(delta.name)})", delta.name)
    step = known(delta)
    (slo, shi), (llo, lhi) = [value_bounds.of(v) for v in (start, limit)]
    first, last = (slo, lhi) if step > 0 else (shi, llo)
    if math.isinf(first) or math.isinf(last):
        ends = ([f"the {'least' if step > 0 else 'most'} start ({start.name!r})"] if math.isinf(first) else []) \
            + ([f"the {'most' if step > 0 else 'least'} limit ({limit.name!r})"] if math.isinf(last) else [])
        raise ShapeError(f"{where}: its length is a count only the run knows, and "
                         f"{unbounded.format(' or '.join(ends))}")
    return max(-(-(int(last) - int(first)) // step), 0)


def infer(node: Node, ins: list) -> list[Value]:
    return [common.out(ins[0].dtype, (common.count_dim(node, _most(node, ins)),))]


def lower(node: Node, ins: list, outs: list) -> KernelCall:
    dst = outs[0]
    inputs, tiling = [], {"most": symbolic.upper_bound(dst.shape[0])}
    bounds = operands(dict(zip(("start", "limit", "delta"), ins[:3])), inputs, tiling)
    params = {"summary": f"Range by run-time bounds -> {dst.describe()}", "ctype": dst.dtype.c_type,
              "tiling_fields": list(tiling), **bounds}
    return KernelCall("kernels/range_runtime.c.j2", "Range", params, inputs, [dst.name],
                      block_dim=common.block_dim_for(tiling["most"]), tiling=tiling,
                      count_symbol=symbolic.symbols(dst.shape[0]).pop().name)
