"""Running a dynamic model (docs/dynamic-shapes.md): each run's input shapes, checked against
the ranges the model was compiled for, go to the model with the inputs (GertTensor dims); the
model binds its symbols from them, replays its one captured task list and reports the outputs'
dims, and the outputs come back at those shapes.

What is checked here, before the model's own check, is what gives the clearest error: the rank,
the fixed dims, each dynamic dim in its range, and the dims that the model says are one symbol
(input_ids and attention_mask sharing a sequence length) being equal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ArchiveError, InputError


@dataclass(frozen=True)
class SymbolDim:
    name: str
    lo: int
    hi: int | None
    input: int
    axis: int
    multiple: int = 1       # the input dim is multiple * the symbol (a lo~hi%m dim)
    producer: str = ""      # a data-dependent count: the node writing it (input, axis -1)

    def rule(self) -> str:
        """The sizes the dim takes, as the user wrote them: 32~960, a multiple of 32."""
        m = self.multiple
        rng = f"{m * self.lo}~{m * self.hi}" if self.hi is not None else f"{m * self.lo} or more"
        return rng + (f", a multiple of {m}" if m > 1 else "")


@dataclass(frozen=True)
class Dynamic:
    """A dynamic model's symbols and its inputs' and outputs' dims (texts, e.g. "N", "H // 2")."""
    symbols: tuple[SymbolDim, ...]
    input_dims: tuple[tuple[str, ...], ...]
    output_dims: tuple[tuple[str, ...], ...]
    tiling_library: str

    def check(self, inputs, shapes: list[tuple[int, ...]]) -> None:
        """InputError naming the input, the dim and what the model takes, for fed shapes that the
        model cannot run: `inputs` the model's TensorInfos, `shapes` the fed arrays' shapes."""
        for i, (t, shape) in enumerate(zip(inputs, shapes)):
            if len(shape) != len(t.shape):
                raise InputError(f"input {t.name!r} has shape {list(shape)}, the model takes rank {len(t.shape)}: "
                                 f"{t.name}{_text(self.input_dims[i])}")
            for axis, (want, got) in enumerate(zip(t.shape, shape)):
                if want >= 0 and got != want:
                    raise InputError(f"input {t.name!r} has shape {list(shape)}; dim {axis} must be {want} "
                                     f"({t.name}{_text(self.input_dims[i])})")
        bound: dict[str, tuple[int, str]] = {}   # the text of a symbol's input dim -> (its size, whose)
        for s in self.symbols:
            if s.producer:      # the run's data decides it
                continue
            v = shapes[s.input][s.axis]
            dim = self.input_dims[s.input][s.axis]
            if v % s.multiple:
                raise InputError(f"input {inputs[s.input].name!r} has shape {list(shapes[s.input])}; dim {s.axis} "
                                 f"({dim}) must be {s.rule()}, as the model was compiled for, and {v} is not a "
                                 f"multiple of {s.multiple}: resize the input to one")
            if v // s.multiple < s.lo or (s.hi is not None and v // s.multiple > s.hi):
                raise InputError(f"input {inputs[s.input].name!r} has shape {list(shapes[s.input])}; dim {s.axis} "
                                 f"({dim}) must be in {s.rule()}, the range the model was compiled for: recompile "
                                 "with a wider range to run it")
            bound[dim] = (v, inputs[s.input].name)
        for i, dims in enumerate(self.input_dims):   # a dim two inputs share (same symbol) must agree
            for axis, text in enumerate(dims):
                if text in bound and shapes[i][axis] != bound[text][0]:
                    raise InputError(f"input {inputs[i].name!r} has dim {axis} = {shapes[i][axis]}, but the model "
                                     f"takes it as {text}, which input {bound[text][1]!r} sets to {bound[text][0]}: "
                                     "they must be equal")


def _text(dims) -> str:
    return "[" + ",".join(dims) + "]"


def from_meta(meta: dict, where: str) -> Dynamic | None:
    """model_meta.json's dynamic_shapes (None: a static model, or one with gears)."""
    d = meta.get("dynamic_shapes")
    if d is None:
        return None
    try:
        symbols = tuple(SymbolDim(str(s["name"]), int(s["range"][0]), None if int(s["range"][1]) < 0
                                  else int(s["range"][1]), int(s["input"]), int(s["axis"]),
                                  multiple=int(s.get("multiple", 1)), producer=str(s.get("producer", "")))
                        for s in d["symbols"])
        dyn = Dynamic(symbols, tuple(tuple(map(str, x)) for x in d["inputs"]),
                      tuple(tuple(map(str, x)) for x in d["outputs"]), str(d["tiling_library"]))
    except (KeyError, TypeError, ValueError, IndexError):
        raise ArchiveError(f"{where}: model_meta.json's dynamic_shapes is malformed; the archive is corrupt: "
                           "recompile it") from None
    for s in symbols:
        if s.multiple < 1:
            raise ArchiveError(f"{where}: symbol {s.name} has the multiple {s.multiple}; the archive is corrupt: "
                               "recompile it")
        if s.producer and s.hi is not None:
            continue
        if not 0 <= s.input < len(meta["inputs"]) or not 0 <= s.axis < len(meta["inputs"][s.input]["shape"]):
            raise ArchiveError(f"{where}: symbol {s.name} is bound to a dim the model does not have; the archive "
                               "is corrupt: recompile it")
    return dyn


def max_shape(described: dict) -> tuple[int, ...] | None:
    """The largest shape of an input or output whose shape has -1 dims (GE's shape_range)."""
    shape = [int(d) for d in described["shape"]]
    if -1 not in shape:
        return None
    ranges = described.get("shape_range")
    if not isinstance(ranges, list) or len(ranges) != len(shape):
        return None
    return tuple(int(hi) if d < 0 else d for d, (_, hi) in zip(shape, ranges))


def elements(shape) -> int:
    return math.prod(shape)
