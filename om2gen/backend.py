"""om2gen as an ONNX backend (onnx.backend.base.Backend): prepare compiles to OM2, run executes it.

    from om2gen.backend import Om2Backend
    rep = Om2Backend.prepare(model)          # compiles when the first inputs fix every shape
    outputs = rep.run([x, y])

This lets onnx.backend.test.BackendTest (the ONNX conformance suite) run against om2gen.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from . import pipeline
from .errors import NeedsConstantError, UnsupportedOpError
from .runtime.model import Model


class Om2BackendRep(BackendRep):
    """Compiles on first run, when the inputs fix every shape. Inputs whose values the compiler
    needs (a Reshape target shape, Slice bounds, ...) are frozen as constants, as a user would
    with --input-value; a later run with other values for them compiles again."""

    def __init__(self, model: onnx.ModelProto, **options):
        self._model = model
        self._options = options
        self._compiled: dict[tuple, tuple[Model, frozenset]] = {}
        self._frozen_names: set[str] = set()
        initializers = {i.name for i in model.graph.initializer}
        self._inputs = [i.name for i in model.graph.input if i.name not in initializers]

    def _key(self, feeds: dict) -> tuple:
        return tuple(sorted((k, v.shape, v.dtype.str, v.tobytes() if k in self._frozen_names else b"")
                            for k, v in feeds.items()))

    def _compile(self, feeds: dict) -> tuple[Model, frozenset]:
        while True:
            key = self._key(feeds)
            if key in self._compiled:
                return self._compiled[key]
            frozen = {k: v for k, v in feeds.items() if k in self._frozen_names}
            shapes = {k: tuple(v.shape) for k, v in feeds.items() if k not in frozen}
            tmp = Path(tempfile.mkdtemp(prefix="om2gen-backend-"))
            try:
                path = pipeline.compile(self._model, tmp / "model.om2", input_shapes=shapes, input_values=frozen,
                                     **self._options)
                self._compiled[key] = (Model(path), frozenset(frozen))  # mapped: the file may go now
            except NeedsConstantError as exc:
                more = self._inputs_behind(exc.value_name, feeds) - self._frozen_names
                if not more:
                    raise
                self._frozen_names |= more
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def _inputs_behind(self, name: str, feeds: dict) -> set[str]:
        """The model inputs a value is computed from: the input itself, or the inputs among its
        ancestors. A value made inside an inlined subgraph is traced to every integer or bool
        input (shape-like inputs are what such values are computed from)."""
        if name in feeds:
            return {name}
        producers = {o: n for n in self._model.graph.node for o in n.output}
        if name not in producers:
            return {k for k, v in feeds.items() if v.dtype.kind in "biu"}
        found, stack, seen = set(), [name], set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in feeds:
                found.add(v)
            elif v in producers:
                stack.extend(i for i in producers[v].input if i)
        return found

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self._inputs, inputs))
        for k, v in feeds.items():
            if isinstance(v, (list, tuple, dict)):
                raise UnsupportedOpError(f"input {k!r} is a sequence or map; om2gen compiles tensor inputs only")
        feeds = {k: np.asarray(v) for k, v in feeds.items()}
        model, frozen = self._compile(feeds)
        results = model.run({k: v for k, v in feeds.items() if k not in frozen})
        return tuple(results[t.name] for t in model.outputs)

    def close(self) -> None:
        for m, _ in self._compiled.values():
            m.close()
        self._compiled.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Om2Backend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> Om2BackendRep:
        if not cls.supports_device(device):
            raise ValueError(f"om2gen runs on the CPU, not {device}")
        if isinstance(model, (str, Path)):
            model = onnx.load(str(model))
        return Om2BackendRep(model, **kwargs)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        rep = cls.prepare(model, device, **kwargs)
        try:
            return rep.run(inputs)
        finally:
            rep.close()

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = Om2Backend.prepare
run_model = Om2Backend.run_model
supports_device = Om2Backend.supports_device
