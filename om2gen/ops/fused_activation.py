"""The activation a fused op applies as it stores its result (om2gen.FusedConv, FusedGemm, FusedMatMul).

Two attributes, named as ONNX Runtime's com.microsoft.FusedConv names them: `activation`, the op
type of the activation, and `activation_params`, its parameters. Absent, the op applies none.
Every activation om2gen fuses is a clamp to [lo, hi], which is what the kernels apply to their
final store (their `act` parameter): Relu is [0, inf), Clip is [min, max] with an infinite bound
where the Clip had none.
"""
from __future__ import annotations

import math

from ..codegen.literals import c_float
from ..errors import CompileError

ACTIVATION = "activation"
PARAMS = "activation_params"
# the attributes every fused op with an activation declares, with their defaults
ATTRS = {ACTIVATION: None, PARAMS: None}
# activation -> how many activation_params it takes
ARITY = {"Relu": 0, "Clip": 2}
_RELU = (0.0, math.inf)


def attrs_for(lo: float, hi: float) -> dict:
    """The attributes of the clamp [lo, hi] (passes/conv_act.py): Relu when it is one."""
    if (lo, hi) == _RELU:
        return {ACTIVATION: "Relu"}
    return {ACTIVATION: "Clip", PARAMS: [lo, hi]}


def bounds(node) -> tuple[float, float] | None:
    """(lo, hi) of the node's activation, None without one. The node was made by a pass (a model
    cannot hold one: frontend/support.py), so attributes that do not fit are an om2gen bug."""
    name, params = node.attrs.get(ACTIVATION), node.attrs.get(PARAMS)
    if name is None and params is None:
        return None
    if name not in ARITY or len(params or []) != ARITY[name] \
            or not all(isinstance(p, float) for p in params or []):
        raise CompileError(f"node {node.name!r} ({node.domain}.{node.op_type}): activation {name!r} with "
                           f"activation_params {params!r} is not one om2gen fuses (Relu, or Clip with [min, max]); "
                           "an om2gen bug: report it (--fusion off compiles the model without fusion meanwhile)")
    return _RELU if name == "Relu" else (params[0], params[1])


def kernel_params(node) -> dict | None:
    """The kernels' `act` parameter: the clamp's bounds as C float literals, or None."""
    b = bounds(node)
    if b is None:
        return None
    lo, hi = b
    return {"lo": c_float(lo), "hi": c_float(hi), "desc": f"clamped to [{lo}, {hi}]"}


class Activation:
    """Mixin of an op with a fused activation, before the op's class: its attributes are checked
    when a node is inferred, and its lowering applies them (`activation()` of Conv, Gemm, MatMul)."""

    def infer(self, node, ins):
        outs = super().infer(node, ins)
        bounds(node)
        return outs

    def activation(self, node):
        return kernel_params(node)
