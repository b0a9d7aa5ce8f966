"""om2gen.FusedConv: a Conv that adds a residual tensor and applies an activation as it stores its
result, so that Conv, Add and Relu are one task (passes/conv_add.py and passes/conv_act.py make
it; a model cannot hold one).

Its contract is ONNX Runtime's com.microsoft.FusedConv: Conv's inputs X, W, optional B, then an
optional Z of the output's shape that is added before the activation; Conv's attributes, plus
`activation` and `activation_params` (ops/fused_activation.py). Every Conv kernel path applies
the activation; only the packed GEMM adds Z, which is why conv_add fuses pointwise convolutions
only (they always take it).
"""
from __future__ import annotations

from ..errors import CompileError, ShapeError
from . import fused_activation
from .conv import Conv
from .registry import OM2GEN_DOMAIN, register

OP_TYPE = "FusedConv"
Z = 3   # the residual's input index


@register(OP_TYPE, since=1, domain=OM2GEN_DOMAIN)
class FusedConv(fused_activation.Activation, Conv):
    attrs = {**Conv.attrs, **fused_activation.ATTRS}

    def infer(self, node, ins):
        (y,) = super().infer(node, ins)
        z = self.residual(node, ins)
        if z is not None and (z.dtype, z.shape) != (y.dtype, y.shape):
            raise ShapeError(f"node {node.name!r} ({OP_TYPE}): the residual Z {z.name!r} is {z.describe()}, the "
                             f"output {y.describe()}; they must be the same")
        return [y]

    def residual(self, node, ins):
        if len(ins) > Z + 1:
            raise CompileError(f"node {node.name!r} ({OP_TYPE}): {len(ins)} inputs, at most {Z + 1} (X, W, B, Z); "
                               "an om2gen bug: report it")
        return ins[Z] if len(ins) > Z else None
