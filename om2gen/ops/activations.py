"""Element-wise activations with attributes: one C expression each, computed in the input's float
type (float16 through float, float64 in double). NaN inputs give what ONNX Runtime gives."""
from __future__ import annotations

import math

from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir.graph import Value
from ..ir.program import Alias
from . import common
from .elementwise import elementwise_call
from .math import FLOATS, INTS, UNSIGNED, Arith, float_call, require_dtype, require_same_dtype
from .registry import Op, register


def _softplus(a: Arith, x: str) -> str:
    """log(1 + exp(x)) without overflow for large x."""
    return (f"(({x}) > 0 ? ({x}) + {a.fn('log1p')}({a.fn('exp')}(-({x}))) "
            f": {a.fn('log1p')}({a.fn('exp')}({x})))")


def _hard_sigmoid(a: Arith, x: str, alpha: float, beta: float) -> str:
    t = f"({a.lit(alpha)} * ({x}) + {a.lit(beta)})"
    return f"({t} > {a.lit(1.0)} ? {a.lit(1.0)} : {t} < 0 ? {a.lit(0.0)} : {t})"


class Activation(Op):
    """Float-only activations: body(a, x) is the result given the loaded input."""
    dynamic_shapes = True

    def infer(self, node, ins):
        require_dtype(node, ins[0], FLOATS)
        return [common.out(ins[0].dtype, ins[0].shape)]

    def body(self, node, a: Arith, x: str) -> str:
        raise NotImplementedError

    def lower(self, node, ins, outs, ctx):
        return float_call(node, ins[:1], outs[0], lambda a, x: self.body(node, a, x))


@register("HardSigmoid", since=6)
class HardSigmoid(Activation):
    attrs = {"alpha": 0.2, "beta": 0.5}

    def body(self, node, a, x):
        return _hard_sigmoid(a, x, self.attr(node, "alpha"), self.attr(node, "beta"))


@register("HardSwish", since=14)
class HardSwish(Activation):
    def body(self, node, a, x):
        return f"(({x}) * {_hard_sigmoid(a, x, 1.0 / 6.0, 0.5)})"


@register("LeakyRelu", since=6)
class LeakyRelu(Activation):
    attrs = {"alpha": 0.01}

    def body(self, node, a, x):
        return f"(({x}) >= 0 ? ({x}) : {a.lit(self.attr(node, 'alpha'))} * ({x}))"


@register("Elu", since=6)
class Elu(Activation):
    attrs = {"alpha": 1.0}

    def body(self, node, a, x):
        return f"(({x}) >= 0 ? ({x}) : {a.lit(self.attr(node, 'alpha'))} * {a.fn('expm1')}({x}))"


@register("Selu", since=6)
class Selu(Activation):
    attrs = {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}

    def body(self, node, a, x):
        alpha, gamma = a.lit(self.attr(node, "alpha")), a.lit(self.attr(node, "gamma"))
        return f"(({x}) > 0 ? {gamma} * ({x}) : {gamma} * ({alpha} * {a.fn('exp')}({x}) - {alpha}))"


@register("Celu", since=12)
class Celu(Activation):
    attrs = {"alpha": 1.0}

    def body(self, node, a, x):
        # max(0,x) + min(0, alpha*(exp(x/alpha)-1)) is x for x > 0 and the second term otherwise,
        # whatever alpha's sign; the ternary keeps NaN
        alpha = a.lit(self.attr(node, "alpha"))
        return f"(({x}) > 0 ? ({x}) : {alpha} * {a.fn('expm1')}(({x}) / {alpha}))"


@register("Gelu", since=20)
class Gelu(Activation):
    attrs = {"approximate": "none"}

    def body(self, node, a, x):
        approx = self.attr(node, "approximate")
        half, one = a.lit(0.5), a.lit(1.0)
        if approx == "none":
            return f"({half} * ({x}) * ({one} + {a.fn('erf')}(({x}) * {a.lit(math.sqrt(0.5))})))"
        if approx == "tanh":
            inner = f"{a.lit(math.sqrt(2.0 / math.pi))} * (({x}) + {a.lit(0.044715)} * ({x}) * ({x}) * ({x}))"
            return f"({half} * ({x}) * ({one} + {a.fn('tanh')}({inner})))"
        raise UnsupportedOpError(f"node {node.name!r} (Gelu): approximate={approx!r}; ONNX defines 'none' and 'tanh'")


@register("Softplus", since=1)
class Softplus(Activation):
    def body(self, node, a, x):
        return _softplus(a, x)


@register("Softsign", since=1)
class Softsign(Activation):
    def body(self, node, a, x):
        return f"(({x}) / ({a.lit(1.0)} + {a.fn('fabs')}({x})))"


@register("Mish", since=18)
class Mish(Activation):
    def body(self, node, a, x):
        return f"(({x}) * {a.fn('tanh')}({_softplus(a, x)}))"


@register("ThresholdedRelu", since=10)
class ThresholdedRelu(Activation):
    attrs = {"alpha": 1.0}

    def body(self, node, a, x):
        return f"(({x}) > {a.lit(self.attr(node, 'alpha'))} ? ({x}) : {a.lit(0.0)})"


@register("Shrink", since=9)
class Shrink(Op):
    """x < -lambd: x + bias; x > lambd: x - bias; else 0. Integers compute in double and convert back."""
    dynamic_shapes = True
    attrs = {"bias": 0.0, "lambd": 0.5}

    def infer(self, node, ins):
        require_dtype(node, ins[0], FLOATS + INTS)
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        bias, lambd = self.attr(node, "bias"), self.attr(node, "lambd")
        t = ins[0].dtype
        if t.name in FLOATS:
            def body(a, x):
                b, lo, hi = a.lit(bias), a.lit(-lambd), a.lit(lambd)
                return f"(({x}) < {lo} ? ({x}) + {b} : ({x}) > {hi} ? ({x}) - {b} : {a.lit(0.0)})"
            return float_call(node, ins[:1], outs[0], body)
        b, lo, hi = (c_float(v, double=True) for v in (bias, -lambd, lambd))
        expr = (f"(({t.c_type})((double)x0 < {lo} ? (double)x0 + {b} : (double)x0 > {hi} ? (double)x0 - {b} "
                f": 0.0))")
        return elementwise_call(node, "Shrink", ins[:1], outs[0], expr)


@register("PRelu", since=7)
class PRelu(Op):
    """y = x < 0 ? slope * x : x; slope broadcasts to X (unidirectionally)."""
    dynamic_shapes = True

    def slope_shape(self, node, x, slope) -> tuple[int, ...]:
        return slope.shape

    def infer(self, node, ins):
        x, slope = ins
        require_dtype(node, x, FLOATS + INTS)
        require_same_dtype(node, ins)
        shape = common.broadcast_shape(node, x.shape, self.slope_shape(node, x, slope))
        if shape != x.shape:
            raise ShapeError(f"node {node.name!r} (PRelu): slope shape {list(slope.shape)} does not broadcast "
                             f"to X's shape {list(x.shape)}")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x, slope = ins
        t = x.dtype
        if t.name in UNSIGNED:
            return Alias(x.name)   # never negative
        slope = Value(slope.name, slope.dtype, self.slope_shape(node, x, slope), slope.const)
        if t.name in FLOATS:
            return float_call(node, [x, slope], outs[0], lambda a, v, s: f"(({v}) < 0 ? ({s}) * ({v}) : ({v}))")
        return elementwise_call(node, "PRelu", [x, slope], outs[0], f"(x0 < 0 ? ({t.c_type})(x1 * x0) : x0)")


@register("PRelu", since=6)
class PReluChannels(PRelu):
    """PRelu-6 (Caffe2 semantics): a 1-D slope of X.shape[1] values is one slope per channel."""

    def slope_shape(self, node, x, slope):
        if len(slope.shape) == 1 and len(x.shape) >= 2 and slope.shape[0] == x.shape[1] != 1:
            return (slope.shape[0],) + (1,) * (len(x.shape) - 2)
        return slope.shape
