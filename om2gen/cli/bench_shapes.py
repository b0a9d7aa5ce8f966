"""om2gen bench of a dynamic-shape model (docs/dynamic-shapes.md): which shapes it is timed at,
and its first run at each. --input-shape names the run shapes (ATC's syntax, one use per shape:
`--input-shape "x:4,3,224,224"`); by default the --input arrays' shapes, and the largest the
model takes for the other inputs. bench.measure_shape times each next to ONNX Runtime at the
same shapes, after each engine's first run at it (for an .om2 no costlier than a later one: its
memory is planned for the largest sizes and its task list captured once)."""
from __future__ import annotations

import time
from types import SimpleNamespace

from ..errors import InputError


def is_dynamic(model) -> bool:
    """A model whose run shapes vary within ranges (not gears)."""
    return model._gears is None and any(t.max_shape is not None for t in model.inputs)


def shape_sets(model, requested: list[dict], given: dict) -> list[dict]:
    """{input: shape} per shape to measure: those requested (each must give every dynamic input
    a full shape), else the given arrays' shapes and the largest the model takes for the others.
    The model's run checks each shape against its ranges."""
    dynamic = [t for t in model.inputs if t.max_shape is not None]
    if not requested:
        return [{t.name: tuple(given[t.name].shape) if t.name in given else tuple(t.max_shape) for t in dynamic}]
    fed = [t.name for t in dynamic if t.name in given]
    if fed:
        raise InputError(f"--input gives {', '.join(fed)}, whose shape is then the run shape: give either --input "
                         "or --input-shape for a dynamic input")
    out = []
    for shapes in requested:
        unknown = set(shapes) - {t.name for t in model.inputs}
        if unknown:
            raise InputError(f"--input-shape names {', '.join(sorted(unknown))}, which the model has not; its "
                             f"inputs are {', '.join(t.name for t in model.inputs)}")
        missing = [t.name for t in dynamic if t.name not in shapes]
        if missing:
            raise InputError(f"--input-shape {_text(shapes)} gives no shape for the dynamic input(s) "
                             f"{', '.join(missing)}; each use of --input-shape is one run shape and names every "
                             "dynamic input (\"a:1,128;b:1,128\")")
        for name, dims in shapes.items():
            if any(not isinstance(d, int) or d < 0 for d in dims):
                raise InputError(f"--input-shape {name}:{','.join(map(str, dims))}: a run shape has sizes, not "
                                 "ranges or -1")
        out.append(dict(shapes))
    return out


def _text(shapes: dict) -> str:
    return ";".join(f"{n}:{','.join(map(str, s))}" for n, s in shapes.items())


def inputs_at(model, shapes: dict) -> list:
    """The model's inputs (name, dtype, shape) with the dynamic ones at `shapes`."""
    return [SimpleNamespace(name=t.name, dtype=t.dtype, shape=shapes.get(t.name, t.shape)) for t in model.inputs]


def first_runs(blocks: dict) -> dict:
    """Each engine's first run at a shape: its run call (bench._blocks) timed once, in ms."""
    return {engine: _once(series["run"]) for engine, series in blocks.items()}


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3
