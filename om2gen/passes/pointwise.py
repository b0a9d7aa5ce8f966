"""What an element-wise node computes, as its own op lowers it: a C expression over its operands.

Every element-wise op of om2gen lowers through ops.elementwise.elementwise_call to
templates/kernels/elementwise.c.j2 with one C expression over x0, x1, ... (float16 loads and
stores, integer wrap-around, NaN rules and Cast conversions all spelled in it). Fusion reuses that
expression verbatim, so a fused kernel computes bit for bit what the separate kernels did (the
kernels build with -ffp-contract=off). The operands' broadcast shapes are recovered from the
graph and checked against the indexing the op chose; a node whose indexing they do not reproduce
(a legacy broadcast with an axis, for example) is simply not fused.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import Om2Error
from ..ir import symbolic
from ..ir.graph import REGIONS, Graph, Node, Value
from ..ir.program import KernelCall
from ..ops import common, registry

ELEMENTWISE_TEMPLATE = "kernels/elementwise.c.j2"
# The op families that lower through elementwise_call. Only their nodes are lowered to look (the
# lowering of a Conv or MatMul packs weights: too costly to run twice).
FAMILIES = {f"om2gen.ops.{m}" for m in ("elementwise", "math", "activations", "logical", "cast", "norm", "quantize")}

# math.h functions cheap enough to recompute per element of a broadcast (a few cycles each)
_CHEAP_CALLS = {"fabs", "fabsf", "fmin", "fminf", "fmax", "fmaxf", "floor", "floorf", "ceil", "ceilf", "rint",
                "rintf", "sqrt", "sqrtf", "copysign", "copysignf", "isnan", "isinf"}
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_NOT_CALLS = {"uint8_t", "uint16_t", "uint32_t", "uint64_t", "int8_t", "int16_t", "int32_t", "int64_t", "float",
              "double", "union"}


@dataclass
class Pointwise:
    node: Node
    expr: str                       # C expression over x0..x{n-1}
    operands: list                  # value names, or np.ndarray for constants the op derived
    shapes: list[tuple[int, ...]]   # each operand's shape as it broadcasts to the output
    in_ctypes: list[str]
    out_ctype: str
    out: Value

    @property
    def cheap(self) -> bool:
        """No transcendental call: worth recomputing at every element of a broadcast."""
        return all(f in _CHEAP_CALLS or f in _NOT_CALLS for f in _CALL.findall(self.expr))


def describe(node: Node, graph: Graph, ctx) -> Pointwise | None:
    """The node as one element-wise expression, or None if it is anything else."""
    if node.domain or REGIONS in node.attrs or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    out = graph.values[node.outputs[0]]
    try:
        empty = out.size == 0
    except symbolic.Undecidable:    # a data-dependent count that may be 0 (a Loop's Slice): not fused
        return None
    if empty or out.is_const:
        return None
    ins = [graph.values[n] if n else None for n in node.inputs]
    try:
        op = registry.lookup(node)
        if type(op).lower.__module__ not in FAMILIES:   # where its lower() is written
            return None
        call = op.lower(node, ins, [out], ctx)
    except Om2Error:
        return None   # the regular lowering reports it
    if not isinstance(call, KernelCall) or call.template != ELEMENTWISE_TEMPLATE or call.outputs != [out.name]:
        return None
    shapes = [tuple(x.shape) if isinstance(x, np.ndarray) else graph.values[x].shape for x in call.inputs]
    if not all(_broadcasts(s, out.shape) for s in shapes):
        return None
    # a dynamic call's loops are always the canonical ones of its shapes (ops/elementwise.py)
    if all(symbolic.is_static(s) for s in [*shapes, out.shape]) and _layout(shapes, out.shape) != _call_layout(call):
        return None
    return Pointwise(node, call.params["expr"], list(call.inputs), shapes,
                     [x["ctype"] for x in call.params["ins"]], call.params["out_ctype"], out)


def _broadcasts(shape, out_shape) -> bool:
    if not (symbolic.is_static(shape) and symbolic.is_static(out_shape)):
        return _broadcasts_dynamic(tuple(shape), tuple(out_shape))
    try:
        return tuple(np.broadcast_shapes(tuple(shape), tuple(out_shape))) == tuple(out_shape)
    except ValueError:
        return False


def _broadcasts_dynamic(shape, out_shape) -> bool:
    """Whether `shape` broadcasts to `out_shape` at every size in the ranges: each dim is 1 or
    the output's own dim (the same expression)."""
    if len(shape) > len(out_shape):
        return False
    try:
        aligned = out_shape[len(out_shape) - len(shape):]
        return all((isinstance(d, int) and d == 1) or d == o for d, o in zip(shape, aligned))
    except symbolic.Undecidable:
        return False


def _layout(shapes, out_shape):
    """The loop structure elementwise_call derives from these operand shapes."""
    dims, strides = common.collapse(tuple(out_shape), [common.broadcast_strides(s, tuple(out_shape)) for s in shapes])
    outer = [(dims[i], tuple(s[i] for s in strides)) for i in range(len(dims) - 2, -1, -1)]
    return dims[-1], tuple(outer), tuple(s[-1] for s in strides)


def _call_layout(call: KernelCall):
    p = call.params
    outer = tuple((d["size"], tuple(d["strides"])) for d in p["outer"])
    return p["inner"], outer, tuple(x["inner_stride"] for x in p["ins"])
