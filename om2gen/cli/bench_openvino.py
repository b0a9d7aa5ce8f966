"""OpenVINO as the third engine of `om2gen bench` (om2gen/cli/bench.py), next to om2gen and ONNX
Runtime in the same process and the same alternating rounds. It is an optional benchmark
dependency (`pip install 'om2gen[bench]'`): without it, or when its CPU plugin cannot compile or
run the model, the bench says why in the OpenVINO column and measures the other two.

The settings are the issue's: the CPU device, PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS =
the thread count of the other engines and INFERENCE_PRECISION_HINT f32 (on an AVX-512 BF16 or AMX
machine OpenVINO would otherwise run bf16). The .onnx is reshaped to the run's input shapes before
compiling, as `benchmark_app -shape` does: om2gen compiles for fixed shapes too, and OpenVINO's
plugin picks its kernels per static shape (one compiled model per input-shape set, kept)."""
from __future__ import annotations

import numpy as np

INSTALL_HINT = "pip install 'om2gen[bench]'"


def _openvino():
    """The openvino module, or None when it is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    return openvino


def version() -> str | None:
    ov = _openvino()
    return ov.get_version() if ov is not None else None


def config(threads: int) -> dict:
    """compile_model's properties: the issue's comparison settings."""
    return {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}


def _short(exc: Exception) -> str:
    """One line of an OpenVINO error: its conversion summary when it has one (the first lines
    only say where in OpenVINO's sources the check failed)."""
    text = str(exc)
    if "Summary:" in text:
        text = text.split("Summary:", 1)[1]
    text = " ".join(text.split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class Engine:
    """OpenVINO's CPU plugin on one .onnx at one thread count. `status` is "measured" while it
    works, else why it is not (not installed, cannot compile or run the model)."""

    def __init__(self, onnx_path, threads: int, enabled: bool = True):
        self.onnx_path, self.threads = str(onnx_path), threads
        self._compiled: dict[tuple, object] = {}
        ov = _openvino() if enabled else None
        self.version = ov.get_version() if ov is not None else None
        self.status = ("measured" if ov is not None else
                       f"not installed ({INSTALL_HINT})" if enabled else "not measured (--no-openvino)")
        self._core = ov.Core() if ov is not None else None

    @property
    def active(self) -> bool:
        return self.status == "measured"

    def info(self) -> dict:
        return {"version": self.version, "status": self.status, "config": config(self.threads),
                "shapes": "static: reshaped to the run's input shapes"}

    def _compile(self, feeds: dict):
        import openvino as ov
        key = tuple((name, tuple(np.shape(a))) for name, a in sorted(feeds.items()))
        if key not in self._compiled:
            model = self._core.read_model(self.onnx_path)
            shapes = {}
            for port in model.inputs:
                names = port.get_names() & set(feeds)
                if names:
                    shapes[port] = ov.PartialShape(list(np.shape(feeds[next(iter(names))])))
            model.reshape(shapes)
            self._compiled[key] = self._core.compile_model(model, "CPU", config(self.threads))
        return self._compiled[key]

    def calls(self, feeds: dict, engine_call: bool = True) -> dict | None:
        """{"run": infer on the feeds, returning copied outputs (as session.run does), "engine": the
        same request on inputs bound once, outputs left in place}; None (and `status` says why)
        when OpenVINO cannot compile or run the model."""
        if not self.active:
            return None
        try:
            compiled = self._compile(feeds)
            inputs = {p.get_any_name(): feeds[next(iter(p.get_names() & set(feeds)))] for p in compiled.inputs
                      if p.get_names() & set(feeds)}
            request = compiled.create_infer_request()
            request.infer(inputs, share_inputs=True)
        except Exception as exc:  # OpenVINO raises its own RuntimeError kinds for unsupported models
            self.status = f"failed: {_short(exc)}"
            return None
        out = {"run": lambda: request.infer(inputs, share_inputs=True)}
        if engine_call:
            bound = compiled.create_infer_request()
            keep = {n: np.ascontiguousarray(a) for n, a in inputs.items()}
            bound.infer(keep, share_inputs=True)

            def engine():
                bound.start_async()
                bound.wait()
            engine.keep = keep
            out["engine"] = engine
        return out

