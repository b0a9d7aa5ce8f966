"""The graph rewrites between import and lowering (GE's graph fusion and autofuse), in order.

Each pass is a function (graph, ctx) -> number of rewrites; the IR verifier runs after each.
The compile option fusion=off (`--fusion off`, or OM2GEN_FUSION=0 in the environment, which
the pipeline reads) turns them all off, which compiles every node to its own kernel (to compare
against, or to isolate a problem).
"""
from __future__ import annotations

import copy
import dataclasses

from ..ir import symbolic
from ..ir.graph import Graph
from ..ir.program import LowerContext
from . import (conv_act, conv_add, dce, deconv_d2s, fold_bn, fuse_elementwise, gemm_act, gemm_bias, layernorm, qdq,
               qdq_gemm, qdq_types)


def _qdq(graph: Graph, ctx: LowerContext) -> int:
    """Both QDQ passes (qdq.py, qdq_gemm.py), which see the types ORT's selectors compare as the
    graph had them before either folded anything (qdq_types.converted)."""
    unsigned = qdq_types.converted(graph)
    made = qdq.run(graph, ctx, unsigned)
    if made:
        dce.run(graph)
    return made + qdq_gemm.run(graph, ctx, unsigned)


PASSES = [
    ("QDQ around element-wise, pooling, Conv, MatMul and Gemm ops", _qdq),   # first: the others see float ops only
    ("BatchNormalization folding", fold_bn.run),
    ("ConvTranspose (kernel = stride) as Conv + DepthToSpace", deconv_d2s.run),
    ("Conv + Add (residual)", conv_add.run),           # before conv_act: Conv, Add, Relu all fuse
    ("Conv + Relu / Clip", conv_act.run),
    ("MatMul + Add as Gemm", gemm_bias.run),
    ("Gemm / MatMul + Relu / Clip", gemm_act.run),  # after gemm_bias: the bias Add comes first
    ("LayerNormalization patterns", layernorm.run),
    ("element-wise fusion", fuse_elementwise.run),   # last: it sees what the others left
]


def run(graph: Graph, ctx: LowerContext) -> dict[str, int]:
    """Runs every pass on the graph (in place) unless ctx.fusion is off; returns {pass: rewrites
    made}. The passes ask ops how they would lower, never render a kernel."""
    if not ctx.fusion:
        return {}
    graph.note_source_ops()
    ctx = dataclasses.replace(ctx, render_kernel=None)
    stats = {}
    dynamic = not all(v.is_static for v in graph.values.values())
    for name, fn in PASSES:
        if dynamic:
            stats[name] = _if_decidable(graph, fn, ctx)
        else:
            stats[name] = fn(graph, ctx)
        if stats[name]:
            dce.run(graph)
        graph.verify(name)
    return stats


def _if_decidable(graph: Graph, fn, ctx) -> int:
    """A pass over a dynamic model's graph (docs/dynamic-shapes.md): a pass whose code asks what
    only the run can answer (symbolic.Undecidable) leaves the graph as it was, so that a rewrite
    is made only where it holds at every size. The constants are shared with the copy kept."""
    memo = {id(v.const): v.const for v in graph.values.values() if v.const is not None}
    kept = copy.deepcopy(graph.__dict__, memo)
    try:
        return fn(graph, ctx)
    except symbolic.Undecidable:
        graph.__dict__.update(kept)
        return 0
