"""Benchmark models built here with onnx.helper and seeded weights (nothing large is committed):
the same seed gives the same file, written once into the cache and reused.

    python -m benchmarks.models [NAME ...]      # build (or find) them, print where they are
"""
from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

import onnx

from om2gen.toolchain.compiler import cache_dir

from . import add, bert_base, mlp, mobilenet_v2, resnet50_batch, resnet50_seeded

# name -> (module, what it is[, keyword arguments of its build()])
BUILDERS = {
    "add": (add, add.WHAT),
    "mlp": (mlp, mlp.WHAT),
    "mobilenet_v2": (mobilenet_v2, mobilenet_v2.WHAT),
    "bert_base_4l": (bert_base, bert_base.WHAT),
    "bert_base_4l_seq": (bert_base, bert_base.WHAT_SEQ, {"dynamic_seq": True}),
    "resnet50_batch": (resnet50_batch, resnet50_batch.WHAT),
    "resnet50_seeded": (resnet50_seeded, resnet50_seeded.WHAT),
}


def cache_root() -> Path:
    return cache_dir() / "bench" / "models"


def path(name: str) -> Path:
    """The model's .onnx, built on first use; the file name carries a digest of the builder's
    source, so changing a builder builds a new file."""
    module, _, *kwargs = BUILDERS[name]
    kwargs = kwargs[0] if kwargs else {}
    source = inspect.getsource(module) + inspect.getsource(_graph_helpers())
    if kwargs:
        source += f"\0{sorted(kwargs.items())}"
    digest = hashlib.sha256(f"{source}\0onnx {onnx.__version__}".encode()).hexdigest()[:12]
    out = cache_root() / f"{name}-{digest}.onnx"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    model = module.build(**kwargs)
    onnx.checker.check_model(model)
    partial = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    onnx.save(model, str(partial))
    os.replace(partial, out)
    return out


def _graph_helpers():
    from . import graph
    return graph

