"""The user's input_shapes / input_values (--input-shape / --input-value), checked against the
model's inputs before anything is inferred: a name the model does not have is an error that
lists the inputs it does have, with their dims."""
from __future__ import annotations

import difflib
import operator
from dataclasses import dataclass

from ..advice import shape_option, value_option
from ..errors import ShapeError


@dataclass(frozen=True)
class DimRange:
    """A dynamic dim of an input shape: ATC's `lo~hi` (hi None: `-1`, any size from 1 up)."""
    lo: int
    hi: int | None

    def __str__(self) -> str:
        return "-1" if self.hi is None and self.lo == 1 else f"{self.lo}~{'' if self.hi is None else self.hi}"


ANY = DimRange(1, None)


def shapes(input_shapes) -> dict[str, tuple]:
    """{name: dims}, a dim an int (-1: dynamic, a gear's or any size) or a DimRange for ATC's
    `lo~hi` (given as the string "lo~hi"); anything else is refused in the words of the
    interface used."""
    out = {}
    for name, dims in dict(input_shapes or {}).items():
        try:
            if isinstance(dims, (str, bytes)):
                raise TypeError
            out[str(name)] = tuple(parse_dim(d) for d in ([dims] if isinstance(dims, int) else dims))
        except (TypeError, ValueError) as exc:
            why = f" ({exc})" if isinstance(exc, ValueError) and str(exc) else ""
            raise ShapeError(f"{shape_option()} gives {name!r} the shape {dims!r}{why}; a shape is a sequence of "
                             f"dims: integers, -1 for a dynamic dim or 'lo~hi' for a range, e.g. "
                             f"{shape_option(name, (1, 3, 224, 224))}") from None
    return out


def parse_dim(d):
    """An int (-1 kept: gears or any size decide), or a DimRange from "lo~hi" / "-1"."""
    if isinstance(d, DimRange):
        return d
    if isinstance(d, str):
        text = d.strip()
        if "~" not in text:
            return int(text)
        lo, _, hi = text.partition("~")
        lo, hi = int(lo), (int(hi) if hi.strip() else None)
        if lo < 0 or (hi is not None and hi < lo):
            raise ValueError(f"range {d!r} is empty or negative")
        return lo if hi == lo else DimRange(lo, hi)
    return operator.index(d)


def is_dynamic(dims) -> bool:
    """Whether a user shape marks any dim dynamic (-1 or a range)."""
    return any(isinstance(d, DimRange) or d == -1 for d in dims)


def check_names(pins: dict, frozen: dict, inputs: list[tuple[str, str]], what: str = "the model") -> None:
    """inputs: [(name, dims as text, e.g. '[1,?,128]')] of the model's run-time inputs."""
    names = [n for n, _ in inputs]
    listing = ", ".join(f"{n}{d}" for n, d in inputs) or "(none)"
    for option, given in ((shape_option(), pins), (value_option(), frozen)):
        unknown = [n for n in given if n not in names]
        if not unknown:
            continue
        close = {n: difflib.get_close_matches(n, names, 1) for n in unknown}
        hints = "; ".join(f"did you mean {c[0]!r} for {n!r}?" for n, c in close.items() if c)
        raise ShapeError(f"{option} names {', '.join(map(repr, unknown))}, which {what} does not have as "
                         f"{'an input' if len(unknown) == 1 else 'inputs'}; its inputs are: {listing}"
                         f"{'; ' + hints if hints else ''}")


def dims_text(dims) -> str:
    """[1,?,128] from dims that are ints (>= 0), names (symbolic) or None (unknown); '(no shape)'
    for None."""
    if dims is None:
        return " (no shape)"
    return "[" + ",".join("?" if d is None or (isinstance(d, int) and d < 0) else str(d) for d in dims) + "]"
