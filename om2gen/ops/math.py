"""Element-wise arithmetic: unary math, Pow, Mod, variadic Min/Max/Sum/Mean.

Every op is one C expression for elementwise.c.j2. This module also holds the vocabulary the
other element-wise families share: which dtypes an op accepts and how a float dtype computes
(`Arith`: float16 loads and stores through float, float64 computes in double). How a float16
conversion or bit test is spelled in C is codegen/float16.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..codegen import float16
from ..codegen.literals import c_float
from ..errors import UnsupportedOpError
from ..ir.dtypes import DType
from ..ir.graph import Node, Value
from ..ir.program import Alias
from . import common
from .elementwise import elementwise_call
from .registry import Op, register

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def require_dtype(node: Node, v: Value, allowed, what: str = "input") -> None:
    if v.dtype.name not in allowed:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {v.name!r} is {v.dtype.name}; "
                                 f"om2gen compiles this operator for {', '.join(allowed)}")


def require_same_dtype(node: Node, ins: list[Value]) -> None:
    names = {v.dtype.name for v in ins}
    if len(names) > 1:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): inputs have different dtypes "
                                 f"{', '.join(v.dtype.name for v in ins)}; ONNX requires one")


@dataclass(frozen=True)
class Arith:
    """How values of a float dtype compute in C."""
    dtype: DType

    @property
    def double(self) -> bool:
        return self.dtype.name == "float64"

    @property
    def ctype(self) -> str:
        return "double" if self.double else "float"

    def fn(self, name: str) -> str:
        """The math.h function for the compute type: fn('exp') is expf or exp."""
        return name if self.double else name + "f"

    def lit(self, v) -> str:
        return c_float(v, double=self.double)

    def load(self, x: str) -> str:
        return float16.to_f32(x) if self.dtype.name == "float16" else x

    def store(self, e: str) -> str:
        return float16.from_f32(e) if self.dtype.name == "float16" else e


def float_call(node: Node, ins: list[Value], out: Value, body: Callable[..., str]):
    """An element-wise kernel over float inputs of one dtype: body(a, x0, x1, ...) is the result
    in the compute type, given the loaded inputs."""
    a = Arith(ins[0].dtype)
    expr = a.store(body(a, *(a.load(f"x{i}") for i in range(len(ins)))))
    return elementwise_call(node, node.op_type, ins, out, expr)


def to_float(v: Value, x: str) -> str:
    """Input `x` of value `v` as a C float/double/integer fit for comparisons and arithmetic."""
    return float16.to_f32(x) if v.dtype.name == "float16" else x


def tree(xs: list[str], combine: Callable[[str, str], str]) -> str:
    """Combines operands as a balanced tree, so expressions that repeat an operand stay polynomial."""
    if len(xs) == 1:
        return xs[0]
    mid = len(xs) // 2
    return combine(tree(xs[:mid], combine), tree(xs[mid:], combine))


# --- unary ---------------------------------------------------------------------------------------

def _f(name):
    return lambda a, x: f"{a.fn(name)}({x})"


_UNARY_FLOAT = {
    "Abs": _f("fabs"),
    "Neg": lambda a, x: f"(-({x}))",
    "Exp": _f("exp"),
    "Log": _f("log"),
    "Sqrt": _f("sqrt"),
    "Reciprocal": lambda a, x: f"({a.lit(1.0)} / ({x}))",
    "Erf": _f("erf"),
    "Floor": _f("floor"),
    "Ceil": _f("ceil"),
    "Round": _f("rint"),   # the default rounding mode: half to even, like ONNX
    # NaN stays NaN; -0 and +0 give +0, as ONNX Runtime
    "Sign": lambda a, x: f"(({x}) != ({x}) ? ({x}) : ({a.ctype})((({x}) > 0) - (({x}) < 0)))",
    **{op: _f(op.lower()) for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                                     "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")},
}

# Integer forms: t is the C type. Negation goes through uint64_t so that INT_MIN wraps, as numpy.
_UNARY_SIGNED = {
    "Abs": lambda t, x: f"({x} < 0 ? ({t})(0 - (uint64_t){x}) : {x})",
    "Neg": lambda t, x: f"(({t})(0 - (uint64_t){x}))",
    "Sign": lambda t, x: f"(({t})(({x} > 0) - ({x} < 0)))",
}
_UNARY_UNSIGNED = {
    "Abs": None,   # identity: a view
    "Sign": lambda t, x: f"(({t})({x} > 0))",
}


@register("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", since=6)
@register("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", since=7)
@register("Erf", "Sign", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", since=9)
@register("Round", since=11)
class Unary(Op):
    dynamic_shapes = True

    def allowed(self) -> tuple[str, ...]:
        t = self.op_type
        return FLOATS + (SIGNED if t in _UNARY_SIGNED else ()) + (UNSIGNED if t in _UNARY_UNSIGNED else ())

    def infer(self, node, ins):
        require_dtype(node, ins[0], self.allowed())
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        x, t = ins[0], ins[0].dtype
        if t.name == "float16" and node.op_type in ("Abs", "Neg"):   # on the bits: exact, NaN payload kept
            bits = float16.abs_bits if node.op_type == "Abs" else float16.neg_bits
            return elementwise_call(node, node.op_type, [x], outs[0], bits("x0"))
        if t.name in FLOATS:
            return float_call(node, [x], outs[0], _UNARY_FLOAT[node.op_type])
        form = (_UNARY_SIGNED if t.name in SIGNED else _UNARY_UNSIGNED)[node.op_type]
        if form is None:
            return Alias(x.name)
        return elementwise_call(node, node.op_type, [x], outs[0], form(t.c_type, "x0"))


# --- Pow -----------------------------------------------------------------------------------------

@register("Pow", since=7)
class Pow(Op):
    """Y = X ^ E; the result has X's dtype. float/float16 pairs use powf; any other pair goes
    through double pow (as ONNX Runtime's std::pow), integer results truncate toward zero."""
    dynamic_shapes = True

    def infer(self, node, ins):
        x, e = ins
        require_dtype(node, x, FLOATS + ("int32", "int64"), "base")
        require_dtype(node, e, NUMERIC, "exponent")
        return [common.out(x.dtype, common.broadcast_shape(node, x.shape, e.shape))]

    def lower(self, node, ins, outs, ctx):
        x, e = ins
        exponent = to_float(e, "x1")
        if x.dtype.name in FLOATS:
            a = Arith(x.dtype)
            base = a.load("x0")
            if x.dtype.name != "float64" and e.dtype.name in ("float16", "float32"):
                body = f"powf({base}, {exponent})"
            else:
                body = f"(({a.ctype})pow((double)({base}), (double)({exponent})))"
            expr = a.store(body)
        else:
            expr = f"(({x.dtype.c_type})pow((double)x0, (double)({exponent})))"
        return elementwise_call(node, "Pow", ins, outs[0], expr)


# --- Mod -----------------------------------------------------------------------------------------

@register("Mod", since=10)
class Mod(Op):
    """fmod=1: the remainder has the dividend's sign (C fmod / %); fmod=0: the divisor's sign
    (Python/numpy mod). An integer divisor of 0 gives 0 (numpy's choice; ONNX leaves it undefined)."""
    dynamic_shapes = True
    attrs = {"fmod": 0}

    def infer(self, node, ins):
        require_dtype(node, ins[0], NUMERIC)
        require_same_dtype(node, ins)
        return [common.out(ins[0].dtype, common.broadcast_shape(node, ins[0].shape, ins[1].shape))]

    def lower(self, node, ins, outs, ctx):
        fmod = int(self.attr(node, "fmod"))
        if fmod not in (0, 1):
            raise UnsupportedOpError(f"node {node.name!r} (Mod): fmod must be 0 or 1, got {fmod}")
        t = ins[0].dtype
        if t.name in FLOATS:
            def body(a, x, y):
                r = f"{a.fn('fmod')}({x}, {y})"
                if fmod:
                    return r
                # numpy mod: move a remainder of the wrong sign by one divisor; zero takes y's sign
                return (f"({r} != 0 ? ((({r} < 0) != ({y} < 0)) ? {r} + ({y}) : {r}) "
                        f": {a.fn('copysign')}({r}, {y}))")
            return float_call(node, ins, outs[0], body)
        if t.name in UNSIGNED:
            expr = f"(x1 == 0 ? 0 : ({t.c_type})(x0 % x1))"
        elif fmod:
            expr = f"((x1 == 0 || x1 == -1) ? 0 : ({t.c_type})(x0 % x1))"
        else:
            r = "(x0 % x1)"
            expr = (f"((x1 == 0 || x1 == -1) ? 0 : ({t.c_type})(({r} != 0 && (({r} < 0) != (x1 < 0))) "
                    f"? {r} + x1 : {r}))")
        return elementwise_call(node, "Mod", ins, outs[0], expr)


# --- variadic Min / Max / Sum / Mean -------------------------------------------------------------

class Variadic(Op):
    dynamic_shapes = True
    allowed: tuple[str, ...] = NUMERIC

    def infer(self, node, ins):
        if not ins or any(v is None for v in ins):
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): needs at least one input, "
                                     "none may be omitted")
        require_dtype(node, ins[0], self.allowed)
        require_same_dtype(node, ins)
        return [common.out(ins[0].dtype, common.broadcast_shape(node, *(v.shape for v in ins)))]

    def combine(self, node, dtype: DType, xs: list[str], a: Arith | None) -> str:
        raise NotImplementedError

    def lower(self, node, ins, outs, ctx):
        if len(ins) == 1 and ins[0].shape == outs[0].shape:
            return Alias(ins[0].name)
        t = ins[0].dtype
        if t.name in FLOATS:
            return float_call(node, ins, outs[0], lambda a, *xs: self.combine(node, t, list(xs), a))
        return elementwise_call(node, node.op_type, ins, outs[0],
                                self.combine(node, t, [f"x{i}" for i in range(len(ins))], None))


@register("Min", "Max", since=6)
class MinMax(Variadic):
    """NaN propagates and ties keep the earlier operand, as ONNX Runtime."""

    def combine(self, node, dtype, xs, a):
        cmp = ">" if node.op_type == "Max" else "<"
        if a is None:
            return tree(xs, lambda p, q: f"({q} {cmp} {p} ? {q} : {p})")
        return tree(xs, lambda p, q: f"((({q} {cmp} {p}) || ({q} != {q})) ? {q} : {p})")


@register("Sum", "Mean", since=6)
class SumMean(Variadic):
    allowed = FLOATS

    def combine(self, node, dtype, xs, a):
        total = tree(xs, lambda p, q: f"({p} + {q})")
        return total if node.op_type == "Sum" else f"({total} / {a.lit(len(xs))})"
