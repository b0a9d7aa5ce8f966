"""Odd run() inputs, as recipes: the parent draws a recipe and computes ONNX Runtime's reference for
what the input means (None: it must be refused), the child builds the very object from the recipe
(a memmap, a misaligned view, a dict subclass...) and hands it to run()."""
from __future__ import annotations

import collections
import mmap
import os
from pathlib import Path

import numpy as np

_DTYPES = ("float64", "float16", "int32", "int64", "uint8", "bool", "complex64", ">f4", "object", "U3")
_LAYOUTS = ("fortran", "strided", "reversed", "broadcast", "readonly", "matrix", "masked", "memmap-r", "memmap-r+",
            "memmap-c", "mmap-buffer", "misaligned-1", "misaligned-2", "misaligned-4", "misaligned-8",
            "misaligned-16", "misaligned-32", "subclass", "zero-strides")
_VALUES = ("nan", "inf", "-inf", "mixed", "huge", "denormal", "-0", "zeros")
_SHAPES = ("zero-size", "extra-dim", "missing-dim", "scalar", "transposed", "bigger", "smaller")
_NAMES = ("extra", "missing", "wrong", "int-key", "none-key", "bytes-key", "empty", "list", "tuple", "none",
          "ordered", "dict-subclass", "mapping", "weird-keys-subclass")
_TYPES = ("list", "tuple", "scalar", "none", "str", "bytes", "memoryview", "nested-objects")


def draw(rng) -> dict:
    kind = rng.choice(("dtype", "layout", "layout", "values", "shape", "names", "types"))
    what = rng.choice({"dtype": _DTYPES, "layout": _LAYOUTS, "values": _VALUES, "shape": _SHAPES, "names": _NAMES,
                       "types": _TYPES}[kind])
    return {"kind": kind, "what": what, "seed": rng.randrange(1 << 30)}


def describe(recipe: dict) -> str:
    return f"{recipe['kind']}: {recipe['what']}"


class _Sub(np.ndarray):
    pass


class _WeirdDict(dict):
    def keys(self):   # keys() that disagrees with iteration
        return ["nope"]


def _values(what: str, base: np.ndarray, rng) -> np.ndarray:
    a = base.copy()
    flat = a.reshape(-1)
    idx = rng.choice(flat.size, max(1, flat.size // 4), replace=False)
    if what == "nan":
        flat[idx] = np.nan
    elif what == "inf":
        flat[idx] = np.inf
    elif what == "-inf":
        flat[idx] = -np.inf
    elif what == "mixed":
        flat[idx] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0], np.float32), idx.size)
    elif what == "huge":
        flat[idx] = np.float32(3e38)
    elif what == "denormal":
        flat[idx] = np.float32(1e-40)
    elif what == "-0":
        a = np.where(a == a, np.float32(-0.0), a).astype(np.float32)
    else:
        a[:] = 0
    return a


def _aligned_view(base: np.ndarray, offset: int) -> np.ndarray:
    raw = np.zeros(base.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    view = np.frombuffer(raw.data, dtype=base.dtype, count=base.size, offset=start).reshape(base.shape)
    view[...] = base
    return view


def _layout(what: str, base: np.ndarray, work: Path):
    if what == "fortran":
        return np.asfortranarray(base)
    if what == "strided":
        big = np.zeros(base.shape[:-1] + (base.shape[-1] * 2,), base.dtype)
        big[..., ::2] = base
        return big[..., ::2]
    if what == "reversed":
        return base[::-1].copy()[::-1]
    if what == "broadcast":
        return np.broadcast_to(base[:1], base.shape)
    if what == "zero-strides":
        return np.lib.stride_tricks.as_strided(base[..., :1], base.shape, (0,) * base.ndim)
    if what == "readonly":
        a = base.copy()
        a.flags.writeable = False
        return a
    if what == "matrix":
        return np.asmatrix(base) if base.ndim == 2 else base.view(_Sub)
    if what == "masked":
        return np.ma.masked_array(base, mask=base < 0)
    if what == "subclass":
        return base.view(_Sub)
    if what.startswith("memmap"):
        path = work / "input.bin"
        base.tofile(path)
        return np.memmap(path, base.dtype, what.split("-", 1)[1], shape=base.shape)
    if what == "mmap-buffer":
        path = work / "input.bin"
        base.tofile(path)
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return np.frombuffer(m, base.dtype).reshape(base.shape)
    return _aligned_view(base, int(what.split("-")[1]))


def build(recipe: dict, inputs: dict, work: Path):
    """The feeds object run() gets."""
    rng = np.random.default_rng(recipe["seed"])
    (name, base), = inputs.items()
    kind, what = recipe["kind"], recipe["what"]
    if kind == "dtype":
        if what == "object":
            return {name: base.astype(object)}
        if what == "U3":
            return {name: base.astype("U3")}
        return {name: base.astype(what)}
    if kind == "layout":
        return {name: _layout(what, base, work)}
    if kind == "values":
        return {name: _values(what, base, rng)}
    if kind == "shape":
        return {name: {"zero-size": np.zeros((0,) + base.shape[1:], base.dtype),
                       "extra-dim": base[None], "missing-dim": base[0], "scalar": np.float32(1.0),
                       "transposed": base.T.copy(), "bigger": np.resize(base, (base.shape[0] + 1,) + base.shape[1:]),
                       "smaller": base[:-1] if base.shape[0] > 1 else base[..., :-1]}[what]}
    if kind == "names":
        if what == "extra":
            return {name: base, "extra": base}
        if what == "missing" or what == "empty":
            return {}
        if what == "wrong":
            return {name + "_": base}
        if what in ("int-key", "none-key", "bytes-key"):
            return {{"int-key": 0, "none-key": None, "bytes-key": name.encode()}[what]: base}
        if what == "list":
            return [base]
        if what == "tuple":
            return (base,)
        if what == "none":
            return None
        if what == "ordered":
            return collections.OrderedDict([(name, base)])
        if what == "dict-subclass":
            return type("Feeds", (dict,), {})({name: base})
        if what == "mapping":
            return collections.ChainMap({name: base})
        return _WeirdDict({name: base})
    value = {"list": base.tolist(), "tuple": tuple(base.tolist()), "scalar": 1.0, "none": None, "str": "1.0",
             "bytes": base.tobytes(), "memoryview": memoryview(base), "nested-objects": [object()] * len(base)}[what]
    return {name: value}


def meaning(recipe: dict, inputs: dict, work: Path):
    """The float32 feeds {name: array} the recipe stands for, if it has an unambiguous meaning that
    a lenient run() could accept; None if run() must refuse it."""
    (name, base), = inputs.items()
    kind, what = recipe["kind"], recipe["what"]
    try:
        feeds = build(recipe, inputs, work)
    except Exception:
        return None
    if kind == "layout":
        return {name: np.ascontiguousarray(np.asarray(feeds[name]), np.float32)}
    if kind == "values":
        return {name: feeds[name]}
    if kind == "names" and what in ("ordered", "dict-subclass"):
        return {name: base}
    if kind == "dtype" and what in ("float64", ">f4"):
        return {name: base.astype(what).astype(np.float32)}
    if kind == "types" and what in ("list", "memoryview"):
        return {name: base}
    return None


def cleanup(work: Path) -> None:
    try:
        os.unlink(work / "input.bin")
    except OSError:
        pass
