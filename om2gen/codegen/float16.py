"""float16 in C: the expressions that spell a half's conversions and bit tests.

Kernels keep a float16 value as its uint16_t bits (C has no portable half type), so every
operation on one is spelled here: the ops say what they compute (load a half as float, store a
float as half, test for NaN) and this module writes the C. The conversions are plain C11
expressions (union punning) rather than functions of a helper header, so that an element-wise
kernel's one expression stays self-contained.

The argument of each function is evaluated several times: pass a parameter name (x0) or a pure
expression.
"""
from __future__ import annotations


def f32_from_bits(u: str) -> str:
    return f"((union {{ uint32_t u; float f; }}){{ .u = (uint32_t)({u}) }}).f"


def f32_bits(f: str) -> str:
    return f"((union {{ float f; uint32_t u; }}){{ .f = (float)({f}) }}).u"


def to_f32(h: str) -> str:
    """Exact: the half's magnitude bits shifted into a float are the value times 2^-112 (normal
    and subnormal alike); exponent 31 (Inf/NaN) maps to float's 255, keeping the NaN payload."""
    sign = f"((uint32_t)({h} & 0x8000u) << 16)"
    special = f32_from_bits(f"{sign} | ((uint32_t)({h} & 0x3ffu) << 13) | 0x7f800000u")
    finite = f32_from_bits(f"{sign} | ((uint32_t)({h} & 0x7fffu) << 13)")
    return f"((({h} & 0x7c00u) == 0x7c00u) ? {special} : {finite} * 0x1p112f)"


def from_f32(v: str) -> str:
    """Round to nearest even (M. Dukhan's FP16 algorithm, as in PyTorch's c10::Half): scaling
    saturates overflow to Inf and the addition of a power of two rounds at half precision;
    NaN becomes the quiet NaN 0x7e00 with the sign kept."""
    w = f32_bits(v)
    shl1 = f"({w} << 1)"
    bias = f"(({shl1} & 0xff000000u) < 0x71000000u ? 0x71000000u : ({shl1} & 0xff000000u))"
    base = f"({f32_from_bits(f'({bias} >> 1) + 0x07800000u')} + (fabsf({v}) * 0x1p112f) * 0x1p-110f)"
    bits = f32_bits(base)
    nonsign = f"((({bits} >> 13) & 0x7c00u) + ({bits} & 0x0fffu))"
    return f"((uint16_t)((({w} >> 16) & 0x8000u) | ({shl1} > 0xff000000u ? 0x7e00u : {nonsign})))"


def from_f64(d: str) -> str:
    """double -> half with one rounding: round to odd into float (24 bits, enough guard bits),
    then float -> half to nearest even."""
    t = f"((float)({d}))"
    tb = f32_bits(t)
    toward_zero = f"(fabs((double){t}) > fabs({d}) ? {tb} - 1u : {tb})"
    odd = f"((double){t} != ({d}) ? ({toward_zero} | 1u) : {toward_zero})"
    return from_f32(f32_from_bits(odd))


def from_bool(b: str) -> str:
    """1.0 (0x3c00) for true, +0 for false."""
    return f"((uint16_t)({b} ? 0x3c00u : 0u))"


# Bit tests and sign operations: exact on the bits, with no conversion (NaN payloads kept).

def abs_bits(h: str) -> str:
    return f"((uint16_t)({h} & 0x7fffu))"


def neg_bits(h: str) -> str:
    return f"((uint16_t)({h} ^ 0x8000u))"


def nonzero(h: str) -> str:
    """Anything but +0 and -0 (NaN included)."""
    return f"(({h} & 0x7fffu) != 0)"


def is_nan(h: str) -> str:
    return f"(({h} & 0x7fffu) > 0x7c00u)"


def is_inf(h: str, negative: bool = True, positive: bool = True) -> str:
    """Infinity of the signs asked for (at least one)."""
    assert negative or positive, "is_inf of no sign"
    if negative and positive:
        return f"(({h} & 0x7fffu) == 0x7c00u)"
    return f"({h} == 0xfc00u)" if negative else f"({h} == 0x7c00u)"
