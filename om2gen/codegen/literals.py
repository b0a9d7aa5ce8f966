"""Exact C literals and legal C identifiers: the only place om2gen spells either."""
from __future__ import annotations

import math
import re

import numpy as np


def c_float(x, double: bool = False) -> str:
    """A float32 literal (double: a double one) that parses back to exactly the same value: the
    shortest round-trip digits, NAN and INFINITY spelled out, never %f. The only float formatter."""
    v = float(x) if double else np.float32(x)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    s = repr(v) if double else str(v)  # Python's / numpy's shortest round-trip spelling
    if "." not in s and "e" not in s:
        s += ".0"
    return s if double else s + "f"


class TilingRef(str):
    """A kernel parameter that a dynamic model's run decides: the C expression reading its
    tiling field (tiling->name, ops/common.py tiling_field), printed as it is."""


def c_int(x) -> str:
    if isinstance(x, TilingRef):
        return str(x)
    v = int(x)
    if v == -(1 << 63):
        return "INT64_MIN"
    return f"{v}LL" if abs(v) > 0x7FFFFFFF else str(v)


def c_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127 and ch != "?":
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def c_comment(s: str) -> str:
    """Text safe inside a /* */ or // comment."""
    s = s.replace("\\", "/").replace("*/", "* /")   # backslashes first: "*\\" is no "*/"
    return _CONTROL.sub(" ", s)   # newlines end // comments; NUL and the rest are compiler warnings


_ILLEGAL = re.compile(r"[^A-Za-z0-9_]")


class Identifiers:
    """Turns any ONNX name into a unique legal C identifier; same name → same identifier."""

    def __init__(self):
        self._by_name: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, name: str, prefix: str = "") -> str:
        key = prefix + "\0" + name
        if key in self._by_name:
            return self._by_name[key]
        base = prefix + _ILLEGAL.sub("_", name)
        if not base or base[0].isdigit():
            base = "_" + base
        ident, n = base, 1
        while ident in self._taken:
            n += 1
            ident = f"{base}_{n}"
        self._taken.add(ident)
        self._by_name[key] = ident
        return ident


def c_identifier(name: str) -> str:
    base = _ILLEGAL.sub("_", name)
    return base if base and not base[0].isdigit() else "_" + base
