"""How an error tells the user to pin an input's shape, freeze an input or pick a format: in the
words of the interface they called. om2gen.compile(...) speaks of input_shapes= / input_values= /
format=; the command line (om2gen/cli/compile_model.py runs compile inside `cli_words()`) speaks of
--input-shape / --input-value / --format."""
from __future__ import annotations

import contextlib
import contextvars

_CLI = contextvars.ContextVar("om2gen_cli_words", default=False)


@contextlib.contextmanager
def cli_words():
    """Within this block, advice names the command line's flags."""
    token = _CLI.set(True)
    try:
        yield
    finally:
        _CLI.reset(token)


def in_cli() -> bool:
    """Whether advice now names the command line's flags (inside `cli_words()`)."""
    return _CLI.get()


def _dims(dims) -> list[str] | None:
    """Each dim as the user writes it: an int, or a range's `lo~hi` (pins.DimRange)."""
    return None if dims is None else [str(int(d)) if isinstance(d, int) or hasattr(d, "__index__") else str(d)
                                      for d in dims]


def shape_option(name: str | None = None, dims=None) -> str:
    """`--input-shape NAME:D0,D1` or `input_shapes={'NAME': (D0, D1)}`; without a name, the
    option's own name; without dims, placeholders."""
    d = _dims(dims)
    if _CLI.get():
        return "--input-shape" if name is None else f"--input-shape {name}:{','.join(d) if d is not None else 'D0,D1,...'}"
    if name is None:
        return "input_shapes="
    d = None if d is None else [x if x.lstrip("-").isdigit() else repr(x) for x in d]   # a range: '1~16'
    shape = ("(" + ", ".join(d) + ("," if len(d) == 1 else "") + ")") if d is not None else "(D0, D1, ...)"
    return f"input_shapes={{{name!r}: {shape}}}"


def value_option(name: str | None = None, value=None) -> str:
    """`--input-value NAME=V` or `input_values={'NAME': V}` (V: the value given, else a placeholder)."""
    if _CLI.get():
        if name is None:
            return "--input-value"
        shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else ("V" if value is None else value)
        return f"--input-value {name}={shown}"
    if name is None:
        return "input_values="
    return f"input_values={{{name!r}: {'V' if value is None else repr(value)}}}"


def format_option(fmt: str | None = None) -> str:
    """`--format om` or `format='om'` (without a format: the option's own name)."""
    if _CLI.get():
        return "--format" if fmt is None else f"--format {fmt}"
    return "format=" if fmt is None else f"format={fmt!r}"


def custom_lib_option() -> str:
    """`--custom-op-lib LIB.so` or `custom_op_libs=[...]`."""
    return "--custom-op-lib LIB.so" if _CLI.get() else "custom_op_libs=['LIB.so']"


def gear_option(option: str, gears=None) -> str:
    """A gear option (option: dynamic_batch_size, dynamic_image_size or dynamic_dims) in the words
    of the interface: `--dynamic-batch-size 1,2,4,8` or `dynamic_batch_size=[1, 2, 4, 8]`; without
    gears, the option's own name."""
    if _CLI.get():
        flag = "--" + option.replace("_", "-")
        if gears is None:
            return flag
        groups = [",".join(map(str, (g,) if isinstance(g, int) else g)) for g in gears]
        joined = ",".join(groups) if option == "dynamic_batch_size" else ";".join(groups)
        return f"{flag} {joined!r}" if ";" in joined else f"{flag} {joined}"
    if gears is None:
        return option
    return f"{option}={[g if isinstance(g, int) else tuple(g) for g in gears]!r}"


def target_option(names: str) -> str:
    """`--target a,b` or `target='a,b'`."""
    return f"--target {names}" if _CLI.get() else f"target={names!r}"
