"""Gemm / MatMul + Relu / Clip: as passes/conv_act.py does for Conv, an activation that is the only
reader of a float32 Gemm or MatMul output goes into the GEMM kernel's store (ops/gemm.py clamps
every tile it writes: in registers on the few-row path, om2/om2_gemv.h, over the tile just stored
on the packed GEMM). Runs after "MatMul + Add as Gemm", so a bias Add between the product and
the activation is already inside the Gemm and the clamp comes after it."""
from __future__ import annotations

from ..ir.graph import Graph
from . import conv_act


def run(graph: Graph, ctx=None) -> int:
    return conv_act.fuse(graph, ("Gemm", "MatMul"))
