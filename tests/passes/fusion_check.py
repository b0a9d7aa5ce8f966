"""Helpers of the graph-pass tests: compile a model with and without the rewrites, run both, read
the task lists, compare with ONNX Runtime."""
from __future__ import annotations

import json
import os
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from helpers import assert_close, ort_run

import om2gen
from om2gen import pipeline
from om2gen.formats.om2 import layout


@contextmanager
def fusion(enabled: bool):
    old = os.environ.get(pipeline.FUSION_ENV)
    os.environ[pipeline.FUSION_ENV] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[pipeline.FUSION_ENV]
        else:
            os.environ[pipeline.FUSION_ENV] = old


@dataclass
class Compiled:
    outputs: dict
    tasks: list[dict]          # task_info.json's tasks
    path: object
    vmath: bool = False        # some kernel uses om2/om2_vmath.h (not bit-identical to libm)
    nodes: list[dict] = field(default_factory=list)   # ge_model.json's nodes: the graph compiled

    def op_types(self) -> list[str]:
        return [t["op_type"] for t in self.tasks]

    def attrs_of(self, op_type: str) -> list[str]:
        return [t["attrs"] for t in self.tasks if t["op_type"] == op_type]

    def fused_from(self, op_type: str) -> list[list[str]]:
        """The source nodes each node of `op_type` computes (its fused_from in the debug graph)."""
        return [n["fused_from"] for n in self.nodes if n["op_type"] == op_type]


def compile_run(model, feeds, tmp_path, *, fused: bool = True, name: str = "model", **opts) -> Compiled:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}_{'fused' if fused else 'plain'}.om2"
    with fusion(fused):
        om2gen.compile(model, path, debug=True, **opts)
    with om2gen.load(path) as m:
        outputs = m.run(feeds)
    with zipfile.ZipFile(path) as z:
        tasks = json.loads(z.read(layout.task_info_json(0)))["tasks"]
        nodes = json.loads(z.read(layout.ge_model_json(0)))["nodes"]
        vmath = any(b"om2/om2_vmath.h" in z.read(n) for n in z.namelist() if n.endswith(".c"))
    return Compiled(outputs, tasks, path, vmath, nodes)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def check_fusion(model, feeds, tmp_path, *, exact: bool = True, tol: float = 1e-4, ref_feeds=None,
                 **opts) -> tuple[Compiled, Compiled]:
    """Compiles with and without the rewrites; both must match ONNX Runtime, and (exact) the
    fused outputs must equal the unfused ones bit for bit, or within a few float32 ulps where a
    fused kernel uses om2_vmath.h's expf/erff/tanhf instead of the C library's. Returns
    (fused, plain)."""
    fused = compile_run(model, feeds, tmp_path, fused=True, **opts)
    plain = compile_run(model, feeds, tmp_path, fused=False, **opts)
    ref = ort_run(model, ref_feeds or feeds)
    for out, r in zip(model.graph.output, ref):
        assert_close(fused.outputs[out.name], r, f"fused {out.name}", tol)
        assert_close(plain.outputs[out.name], r, f"plain {out.name}", tol)
        if exact and fused.vmath:
            assert_close(fused.outputs[out.name], plain.outputs[out.name], f"{out.name}: fused vs unfused", 2e-6)
        elif exact:
            assert same_bits(fused.outputs[out.name], plain.outputs[out.name]), \
                f"{out.name}: fused and unfused results differ"
    return fused, plain
