"""The command line's --input-shape and --input-value: repeated per input, or ATC's one flag with
';' between inputs (--input-shape "a:1,3,224,224;b:1,10"), or both."""
from __future__ import annotations

import argparse

from ..errors import ShapeError
from ..frontend import pins


def _one_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--input-shape {text!r}: expected NAME:D0,D1,... (e.g. x:1,3,224,224; "
                                         "several inputs: \"x:1,3,224,224;y:1,10\")")
    try:
        shape = tuple(pins.parse_dim(d) for d in dims.split(",")) if dims.strip() else ()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--input-shape {text!r} ({exc}): dims must be integers, -1 (dynamic), "
                                         "ranges lo~hi or multiples of m in a range lo~hi%m (e.g. "
                                         "x:1~16,3,32~1024%32,32~1024%32)") from None
    return name.strip(), shape


def _one_value(text: str) -> tuple[str, object]:
    name, sep, values = text.partition("=")
    if not sep or not name or not values:
        raise argparse.ArgumentTypeError(f"--input-value {text!r}: expected NAME=V or NAME=V0,V1,... "
                                         "(several inputs: \"sr=16000;k=1,2\")")
    try:
        parsed = [float(v) if any(c in v for c in ".eEn") else int(v) for v in values.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-value {text!r}: values must be numbers") from None
    return name.strip(), parsed[0] if len(parsed) == 1 else parsed


def _split(text: str, one, flag: str) -> list:
    items = [t.strip() for t in text.split(";") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{flag} {text!r}: names no input")
    return [one(t) for t in items]


def shape_arg(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """One --input-shape: NAME:D0,D1,... or NAME:DIMS;NAME:DIMS;..."""
    return _split(text, _one_shape, "--input-shape")


def value_arg(text: str) -> list[tuple[str, object]]:
    """One --input-value: NAME=V[,V...] or NAME=V;NAME=V;..."""
    return _split(text, _one_value, "--input-value")


def merged(groups, flag: str) -> dict:
    """The pairs of every use of `flag`, as one dict; a name given twice must mean the same."""
    out: dict = {}
    for name, value in (pair for group in groups or [] for pair in group):
        if name in out and out[name] != value:
            raise ShapeError(f"{flag} gives {name!r} twice, as {_show(out[name])} and as {_show(value)}; give it once")
        out[name] = value
    return out


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def input_file_arg(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--input {text!r}: expected NAME=FILE.npy")
    return name, path
