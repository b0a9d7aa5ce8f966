"""The least and most a run-time number can hold, where the graph says: intervals carried on
Value.bounds through the few ops that compute indices (casts, + - *, min/max, reshapes), set as
the frontend infers each node (frontend/onnx_import.py).

A data-dependent op needs a bound to plan its output at (docs/dynamic-shapes.md, "Data-dependent
shapes"): a Range whose start or limit the run gives is as long as (limit - start) / delta, at
most (most limit - least start) / delta. Paddle's loops count with a carried int (SLANet's
`x[:, i:i+1]`: Range(i, Min(501, i + 1), 1)), so a Loop's carried numbers are bounded by running
these rules over the body once per iteration the trip count allows (carried_bounds): the hull of
what iterations 0..M-1 can see. Anything else is unbounded (None), and the op that needs a bound
says so.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import symbolic
from ..ir.graph import Node, Value

Bounds = tuple  # (lo, hi): ints or floats, inclusive; one end may be infinite

# the same values, in another shape or type
_VIEWS = {"Identity", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Expand", "Tile", "Cast", "Gather", "Slice",
          "Concat"}
# past this many iterations the carried bounds are not followed (the body's rules run once per iteration)
MAX_ITERATIONS = 1 << 12


def of(v: Value | None) -> Bounds | None:
    """A value's bounds: computed (Value.bounds), its constant's range, or its dims' over the ranges."""
    if v is None:
        return None
    if v.bounds is not None:
        return v.bounds
    if v.is_const:
        arr = np.asarray(v.const)
        if arr.size == 0 or arr.dtype.kind not in "iuf" or not np.isfinite(arr).all():
            return None
        return (arr.min().item(), arr.max().item())
    if v.dims is not None:
        bs = [symbolic.bounds(d) if isinstance(d, symbolic.Expr) else (int(d), int(d)) for d in v.dims.reshape(-1)]
        if not bs or any(math.isinf(b[1]) for b in bs):
            return None
        return (min(b[0] for b in bs), max(b[1] for b in bs))
    return None


def follows(node: Node) -> bool:
    """Whether `rule` knows the op."""
    return node.op_type in _VIEWS or node.op_type in ("Neg", "Min", "Max", "Add", "Sub", "Mul")


def rule(node: Node, ins: list) -> Bounds | None:
    """The first output's bounds from the inputs' (None: unknown). An unknown input is
    (-inf, inf), so that Min(x, 501) is at most 501 whatever x is."""
    op = node.op_type
    ins = [(-math.inf, math.inf) if b is None else b for b in ins]
    if not ins:
        return None
    if op == "Concat":
        out = (min(b[0] for b in ins), max(b[1] for b in ins))
    elif op == "Cast":
        to = node.attrs.get("to")
        if to in (1, 10, 11, 16):      # to a float: the same numbers
            out = ins[0]
        elif to in (2, 3, 4, 5, 6, 7, 12, 13):   # to an int: truncated toward zero
            out = tuple(x if math.isinf(x) else f(x) for x, f in zip(ins[0], (math.floor, math.ceil)))
        else:
            return None
    elif op in _VIEWS:
        out = ins[0]
    elif op == "Neg":
        out = (-ins[0][1], -ins[0][0])
    elif op == "Min":
        out = (min(b[0] for b in ins), min(b[1] for b in ins))
    elif op == "Max":
        out = (max(b[0] for b in ins), max(b[1] for b in ins))
    elif len(ins) == 2:
        (alo, ahi), (blo, bhi) = ins
        if op == "Add":
            out = (alo + blo, ahi + bhi)
        elif op == "Sub":
            out = (alo - bhi, ahi - blo)
        else:
            products = [a * b for a in (alo, ahi) for b in (blo, bhi)]
            if any(math.isnan(p) for p in products):   # inf * 0
                return None
            out = (min(products), max(products))
    else:
        return None
    return None if math.isinf(out[0]) and math.isinf(out[1]) else out


def propagate(node: Node, ins: list, outs: list) -> None:
    """Sets Value.bounds on a node's run-time numeric output from its inputs' bounds."""
    if not outs or outs[0].is_const or outs[0].dims is not None or outs[0].dtype.name == "bool":
        return
    b = rule(node, [of(v) for v in ins]) if follows(node) else None
    if b is not None:
        outs[0].bounds = b


def carried_bounds(nodes: list[Node], carried: list[str], outs: list[str], initial: list[Bounds | None],
                   values: dict, fixed: dict, trips: int | None) -> list[Bounds | None]:
    """The bounds of a Loop's carried inputs over every iteration: from `initial`, the body's
    rules run on the hull of what the iterations before can see, once per iteration (at most
    `trips`; without a trip count only to a fixed point). fixed: the bounds of the body's
    other inputs (iteration_num's). A carried value the rules cannot follow is None."""
    current = list(initial)
    limit = MAX_ITERATIONS if trips is None else min(trips, MAX_ITERATIONS)
    if trips is not None and trips > MAX_ITERATIONS:
        return [None] * len(current)
    outer: dict = {}    # the bounds of the values from outside the body (weights among them), once each

    def bounds_in(name: str):
        if name in env:
            return env[name]
        if name not in outer:
            outer[name] = of(values.get(name))
        return outer[name]
    consts = {n.outputs[0]: of(Value("", None, (), n.attrs["value"])) for n in nodes
              if n.op_type == "Constant" and isinstance(n.attrs.get("value"), np.ndarray)}
    followed = [n for n in nodes if follows(n)]
    for _ in range(max(limit - 1, 0)):
        env = {**fixed, **consts, **dict(zip(carried, current))}
        for node in followed:
            env[node.outputs[0]] = rule(node, [bounds_in(i) for i in node.inputs if i])
        grown = [None if c is None or env.get(o) is None else (min(c[0], env[o][0]), max(c[1], env[o][1]))
                 for c, o in zip(current, outs)]
        if grown == current:
            break
        current = grown
    else:
        if trips is None:
            return [None] * len(current)
    return current
