"""BatchNormalization (inference): folded at compile time into a per-channel scale and shift."""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Value
from . import common
from .elementwise import elementwise_call
from .registry import Op, register


@register("BatchNormalization", since=7)
class BatchNormalization(Op):
    dynamic_shapes = True
    attrs = {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1}

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        if self.attr(node, "training_mode"):
            raise UnsupportedOpError(f"node {node.name!r} (BatchNormalization): training_mode=1 is not supported; "
                                     "export the model in eval mode")
        if len([o for o in node.outputs if o]) > 1:
            raise UnsupportedOpError(f"node {node.name!r} (BatchNormalization): running mean/var outputs are "
                                     "training-only and not supported")
        x = ins[0]
        if len(x.shape) < 2:
            raise ShapeError(f"node {node.name!r} (BatchNormalization): input must have a channel dim")
        for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
            if ins[i] is None or ins[i].shape != (x.shape[1],):
                raise ShapeError(f"node {node.name!r} (BatchNormalization): {what} must have shape [{x.shape[1]}]")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        eps = float(self.attr(node, "epsilon"))
        bshape = (x.shape[1],) + (1,) * (len(x.shape) - 2)
        if not all(v.is_const for v in ins[1:5]):
            # statistics given at run time: normalise with them in one element-wise kernel
            params = [Value(v.name, v.dtype, bshape, v.const) for v in ins[1:5]]
            expr = f"(x0 - x3) / sqrtf(x4 + {c_float(eps)}) * x1 + x2"
            return elementwise_call(node, "BatchNormalization", [x] + params, outs[0], expr)
        scale, bias, mean, var = (np.asarray(v.const, dtype=np.float64) for v in ins[1:5])
        s = scale / np.sqrt(var + eps)
        shift = bias - mean * s
        s32 = s.astype(np.float32).reshape(bshape)
        b32 = shift.astype(np.float32).reshape(bshape)
        sv = Value(f"{node.name}::scale", dtypes.FLOAT32, bshape, s32)
        bv = Value(f"{node.name}::shift", dtypes.FLOAT32, bshape, b32)
        call = elementwise_call(node, "BatchNormalization", [x, sv, bv], outs[0], "x0 * x1 + x2")
        call.inputs = [x.name, s32, b32]
        return call


@register("BatchNormalization", since=1)
class BatchNormalizationLegacy(BatchNormalization):
    """Opsets 1-6: is_test and spatial attributes; only the inference, spatial form compiles."""
    attrs = {"epsilon": 1e-5, "momentum": 0.9, "is_test": 0, "spatial": 1, "consumed_inputs": None, "training_mode": 0}

    def infer(self, node, ins):
        if not self.attr(node, "spatial"):
            raise UnsupportedOpError(f"node {node.name!r} (BatchNormalization-{node.opset}): spatial=0 is not "
                                     "supported")
        return super().infer(node, ins)
