"""A compile whose kernel cache is warm runs no C compiler at all (issue 16: warm compile time),
even in a new process (the linker probe's answer and the compiled templates are cached too),
and gives the same bytes as the cold compile."""
from __future__ import annotations

import subprocess

from helpers import make_model, rand
from onnx import helper

import om2gen
from om2gen.codegen import render
from om2gen.toolchain import compiler


def _model():
    return make_model([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["z"])],
                      {"x": rand(1, 16), "y": rand(1, 16)}, ["z"])


def _as_a_new_process():
    """What a new process would not have: the per-process caches of the toolchain and templates."""
    compiler._library_linker.cache_clear()
    compiler._version.cache_clear()
    render.environment.cache_clear()


def test_warm_compile_runs_no_compiler(tmp_path, fresh_cache, monkeypatch):
    _as_a_new_process()
    om2gen.compile(_model(), tmp_path / "cold.om2")
    assert (fresh_cache / "templates").is_dir() and any((fresh_cache / "templates").iterdir())
    _as_a_new_process()
    ran = []
    real = subprocess.run

    def recording(cmd, *args, **kwargs):
        ran.append(list(cmd))
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(compiler.subprocess, "run", recording)
    om2gen.compile(_model(), tmp_path / "warm.om2")
    assert [c for c in ran if "--version" not in c] == []
    assert (tmp_path / "warm.om2").read_bytes() == (tmp_path / "cold.om2").read_bytes()
