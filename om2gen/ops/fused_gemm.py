"""om2gen.FusedGemm and om2gen.FusedMatMul: a Gemm or MatMul that applies an activation to every
tile it stores, in registers on the few-row path (om2/om2_gemv.h), over the tile just stored on
the packed GEMM (passes/gemm_act.py makes them; a model cannot hold one).

FusedGemm is ONNX Runtime's com.microsoft.FusedGemm: Gemm's inputs and attributes (opset 7 on:
C broadcasts to the product's shape) plus the activation. FusedMatMul is a MatMul with the
activation; it is not com.microsoft.FusedMatMul, which folds transposes and a scale instead.
Both take `activation` and `activation_params` as FusedConv does (ops/fused_activation.py).
"""
from __future__ import annotations

from . import fused_activation
from .gemm import Gemm, MatMul
from .registry import OM2GEN_DOMAIN, register

GEMM = "FusedGemm"
MATMUL = "FusedMatMul"


@register(GEMM, since=1, domain=OM2GEN_DOMAIN)
class FusedGemm(fused_activation.Activation, Gemm):
    attrs = {**Gemm.attrs, **fused_activation.ATTRS}


@register(MATMUL, since=1, domain=OM2GEN_DOMAIN)
class FusedMatMul(fused_activation.Activation, MatMul):
    attrs = {**MatMul.attrs, **fused_activation.ATTRS}
