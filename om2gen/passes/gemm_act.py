"""Gemm / MatMul + Relu / Clip: as passes/conv_act.py does for Conv, an activation that is the only
reader of a float32 Gemm or MatMul output goes into the GEMM kernel's store: the node becomes an
om2gen.FusedGemm or FusedMatMul (ops/fused_gemm.py, which clamps every tile it writes). Runs after
"MatMul + Add as Gemm", so a bias Add between the product and the activation is already inside
the Gemm and the clamp comes after it.

A Gemm before opset 7 loses its `broadcast` attribute on the way (FusedGemm has Gemm-7's): it only
said which shapes of C the model may give, which the import checked; the product is the same."""
from __future__ import annotations

from ..ir.graph import Graph
from ..ops import fused_gemm
from . import conv_act


def run(graph: Graph, ctx=None) -> int:
    return conv_act.fuse(graph, {"Gemm": (fused_gemm.GEMM, fused_gemm.FusedGemm.attrs),
                                 "MatMul": (fused_gemm.MATMUL, fused_gemm.FusedMatMul.attrs)})
