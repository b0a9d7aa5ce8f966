"""om2gen bench of a dynamic-shape model (docs/dynamic-shapes.md): its run figures at each shape
--input-shape names (ATC's syntax, one use per shape: `--input-shape "x:4,3,224,224"`), by default
at the shapes of the --input arrays and the largest the model takes for the other inputs, each next to ONNX Runtime at the same shapes; and the first run at each shape,
the first the loaded model makes at it, which for an .om2 must cost no more than a later one
(its memory is planned for the largest sizes and its task list captured once)."""
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


def measure_shapes(model, session, onnx_path, given: dict, seed: int, timing: dict, requested: list[dict]) -> dict:
    """Per shape: the first run at it of each engine, then the run figures with the engines'
    runs interleaved."""
    from . import bench  # its feeds, timed blocks and figures (bench.measure calls this)
    out = {"shapes": []}
    for shapes in shape_sets(model, requested, given):
        inputs = [SimpleNamespace(name=t.name, dtype=t.dtype, shape=shapes.get(t.name, t.shape))
                  for t in model.inputs]
        feeds = bench.run_feeds(inputs, given, seed)
        blocks = bench._blocks(model, session, onnx_path, feeds, given, engine_calls=False)
        first = {engine: _once(series["run"]) for engine, series in blocks.items()}
        out["shapes"].append({"shapes": {n: list(s) for n, s in shapes.items()}, "first_run_ms": first,
                              **bench.run_figures(bench._timed_blocks(blocks, **timing))})
    return out


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3
