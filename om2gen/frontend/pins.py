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
    """A dynamic dim of an input shape: ATC's `lo~hi` (hi None: `-1`, any size from 1 up), and
    om2gen's `lo~hi%m`: a multiple of m in lo~hi (a detector that halves its input five times and
    adds the maps back takes sizes that 32 divides; a range alone cannot say that)."""
    lo: int
    hi: int | None
    multiple: int = 1

    def __str__(self) -> str:
        if self.hi is None and self.lo == 1 and self.multiple == 1:
            return "-1"
        return f"{self.lo}~{'' if self.hi is None else self.hi}" + (f"%{self.multiple}" if self.multiple > 1 else "")


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
                             f"dims: integers, -1 for a dynamic dim, 'lo~hi' for a range or 'lo~hi%m' for the "
                             f"multiples of m in it, e.g. {shape_option(name, (1, 3, 224, 224))}") from None
    return out


def parse_dim(d):
    """An int (-1 kept: gears or any size decide), or a DimRange from "lo~hi" / "lo~hi%m" / "-1".
    A multiple's bounds must be multiples of it, so that GE's shape_range [lo, hi] is the
    smallest and the largest size the model takes."""
    if isinstance(d, DimRange):
        return d
    if isinstance(d, str):
        text, pct, multiple = d.strip().partition("%")
        if "~" not in text:
            if pct:
                raise ValueError(f"{d!r}: '%m' follows a range, lo~hi%m")
            return _int(text, d)
        lo, _, hi = text.partition("~")
        lo, hi, m = _int(lo, d), (_int(hi, d) if hi.strip() else None), (_int(multiple, d) if pct else 1)
        if lo < 0 or (hi is not None and hi < lo):
            raise ValueError(f"range {d!r} is empty or negative")
        if m < 1:
            raise ValueError(f"{d!r}: the multiple must be 1 or more")
        if lo % m or (hi is not None and hi % m):
            up, down = -(-lo // m) * m, None if hi is None else hi // m * m
            raise ValueError(f"{d!r}: the range's bounds must be multiples of {m}"
                             + (f" ({DimRange(up, down, m)}?)" if down is None or down >= up else ""))
        return lo if hi == lo else DimRange(lo, hi, m)
    return operator.index(d)


def _int(text: str, dim: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{dim!r} is not a number") from None


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
