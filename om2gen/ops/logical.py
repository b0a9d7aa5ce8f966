"""Logical and comparison operators (bool outputs), Where, IsNaN/IsInf and BitShift.

bool is uint8_t holding 0 or 1. float16 operands compare through float (their bit patterns do
not order like the values, and +0/-0 and NaN need the float rules).
"""
from __future__ import annotations

from ..codegen import float16
from ..errors import UnsupportedOpError
from ..ir.dtypes import BY_NAME
from . import common
from .elementwise import elementwise_call
from .math import BITS, FLOATS, INTS, NUMERIC, SIGNED, require_dtype, require_same_dtype, to_float
from .registry import Op, register

BOOL = BY_NAME["bool"]


def _broadcast_out(node, ins, dtype):
    return [common.out(dtype, common.broadcast_shape(node, *(v.shape for v in ins)))]


@register("Not", since=1)
class Not(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        require_dtype(node, ins[0], ("bool",))
        return [common.out(BOOL, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        return elementwise_call(node, "Not", ins, outs[0], "((uint8_t)!x0)")


_LOGIC = {"And": "(x0 && x1)", "Or": "(x0 || x1)", "Xor": "(!x0 != !x1)"}


@register("And", "Or", "Xor", since=7)
class Logic(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        for v in ins:
            require_dtype(node, v, ("bool",))
        return _broadcast_out(node, ins, BOOL)

    def lower(self, node, ins, outs, ctx):
        return elementwise_call(node, node.op_type, ins, outs[0], f"((uint8_t){_LOGIC[node.op_type]})")


_COMPARE = {"Equal": "==", "Less": "<", "LessOrEqual": "<=", "Greater": ">", "GreaterOrEqual": ">="}


@register("Equal", "Less", "Greater", since=7)
@register("LessOrEqual", "GreaterOrEqual", since=12)
class Compare(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        require_dtype(node, ins[0], NUMERIC + (("bool",) if node.op_type == "Equal" else ()))
        require_same_dtype(node, ins)
        return _broadcast_out(node, ins, BOOL)

    def lower(self, node, ins, outs, ctx):
        a, b = (to_float(v, f"x{i}") for i, v in enumerate(ins))
        return elementwise_call(node, node.op_type, ins, outs[0], f"((uint8_t)(({a}) {_COMPARE[node.op_type]} ({b})))")


@register("Where", since=9)
class Where(Op):
    """Selects bytes, so every dtype works (float16 included) with no conversion."""
    dynamic_shapes = True

    def infer(self, node, ins):
        cond, x, y = ins
        require_dtype(node, cond, ("bool",), "condition")
        require_same_dtype(node, [x, y])
        return _broadcast_out(node, ins, x.dtype)

    def lower(self, node, ins, outs, ctx):
        return elementwise_call(node, "Where", ins, outs[0], "(x0 ? x1 : x2)")


@register("IsNaN", since=9)
class IsNaN(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        require_dtype(node, ins[0], FLOATS)
        return [common.out(BOOL, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        expr = float16.is_nan("x0") if ins[0].dtype.name == "float16" else "(isnan(x0) != 0)"
        return elementwise_call(node, "IsNaN", ins, outs[0], f"((uint8_t){expr})")


@register("IsInf", since=10)
class IsInf(Op):
    dynamic_shapes = True
    attrs = {"detect_negative": 1, "detect_positive": 1}

    def infer(self, node, ins):
        require_dtype(node, ins[0], FLOATS)
        return [common.out(BOOL, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        neg, pos = bool(self.attr(node, "detect_negative")), bool(self.attr(node, "detect_positive"))
        if ins[0].dtype.name == "float16" and (neg or pos):
            test = float16.is_inf("x0", neg, pos)
        else:
            test = "(%s)" % {(True, True): "isinf(x0) != 0", (True, False): "(isinf(x0) && x0 < 0)",
                             (False, True): "(isinf(x0) && x0 > 0)", (False, False): "((void)x0, 0)"}[neg, pos]
        return elementwise_call(node, "IsInf", ins, outs[0], f"((uint8_t){test})")


@register("BitShift", since=11)
class BitShift(Op):
    """Shifts of any integer type (opset 11 defines unsigned ones; signed from opset 28): a shift
    amount that is negative or at least the bit width gives the sign fill (0, or -1 for a right
    shift of a negative value), where C would be undefined."""
    dynamic_shapes = True
    attrs = {"direction": ""}

    def infer(self, node, ins):
        require_dtype(node, ins[0], INTS)
        require_same_dtype(node, ins)
        return _broadcast_out(node, ins, ins[0].dtype)

    def lower(self, node, ins, outs, ctx):
        direction = self.attr(node, "direction")
        if direction not in ("LEFT", "RIGHT"):
            raise UnsupportedOpError(f"node {node.name!r} (BitShift): direction must be 'LEFT' or 'RIGHT', "
                                     f"got {direction!r}")
        t = ins[0].dtype
        signed = t.name in SIGNED
        out_of_range = f"(x1 < 0 || x1 >= {BITS[t.name]})" if signed else f"(x1 >= {BITS[t.name]})"
        if direction == "LEFT":
            shifted = f"({t.c_type})((uint64_t)x0 << x1)"   # bits past the top (and the sign) drop out
            fill = "0"
        else:
            shifted = f"({t.c_type})(x0 >> x1)"             # arithmetic for signed types (gcc, clang)
            fill = "(x0 < 0 ? -1 : 0)" if signed else "0"
        return elementwise_call(node, "BitShift", ins, outs[0], f"({out_of_range} ? {fill} : {shifted})")
