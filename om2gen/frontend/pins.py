"""The user's input_shapes / input_values (--input-shape / --input-value), checked against the
model's inputs before anything is inferred: a name the model does not have is an error that
lists the inputs it does have, with their dims."""
from __future__ import annotations

import difflib
import operator

from ..advice import shape_option, value_option
from ..errors import ShapeError


def shapes(input_shapes) -> dict[str, tuple[int, ...]]:
    """{name: tuple of ints}; anything else is refused in the words of the interface used."""
    out = {}
    for name, dims in dict(input_shapes or {}).items():
        try:
            if isinstance(dims, (str, bytes)):
                raise TypeError
            out[str(name)] = tuple(operator.index(d) for d in ([dims] if isinstance(dims, int) else dims))
        except TypeError:
            raise ShapeError(f"{shape_option()} gives {name!r} the shape {dims!r}; a shape is a sequence of "
                             f"integers, e.g. {shape_option(name, (1, 3, 224, 224))}") from None
    return out


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
