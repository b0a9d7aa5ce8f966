"""A compile whose kernel cache is warm runs no C compiler at all (issue 16: warm compile time),
even in a new process (the linker probe's answer and the compiled templates are cached too),
and gives the same bytes as the cold compile."""
from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import make_model, rand
from onnx import helper

import om2gen
from om2gen.codegen import render
from om2gen.resources import prebuilt_dir
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


SAMPLE_CNN = Path(__file__).resolve().parents[2] / "samples" / "cnn" / "model.onnx"


def _compiled(path, monkeypatch) -> list[str]:
    """Compiles the sample CNN (Conv and Gemm kernels: both kernel libraries) into path; returns
    what the C compiler was run for."""
    built = []
    real = compiler._run

    def recording(cmd, cwd, what):
        built.append(what)
        return real(cmd, cwd, what)
    monkeypatch.setattr(compiler, "_run", recording)
    _as_a_new_process()
    om2gen.compile(SAMPLE_CNN, path, input_shapes={"image": (1, 3, 32, 32)})
    monkeypatch.setattr(compiler, "_run", real)
    return built


def test_cold_compile_builds_only_the_models_own_code(tmp_path, fresh_cache, monkeypatch):
    """With an empty kernel cache the kernel library and the load-and-run object come from the
    objects prebuilt at install (om2gen/prebuild.py): the compile builds the model's kernels and
    tables only, and gives the bytes a compile with nothing prebuilt gives."""
    assert (prebuilt_dir() / "prebuilt.json").is_file(), (
        f"{prebuilt_dir()} is missing: reinstall om2gen (pip install -e .) or run python -m om2gen.prebuild")
    built = _compiled(tmp_path / "prebuilt.om2", monkeypatch)
    assert any(w.startswith("kernel Conv") for w in built) and any(w.startswith("kernel Gemm") for w in built)
    assert [w for w in built if "kernel library" in w or "load_and_run" in w] == [], built

    monkeypatch.setenv("OM2GEN_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("OM2GEN_NO_PREBUILT", "1")
    built = _compiled(tmp_path / "built.om2", monkeypatch)
    assert {w for w in built if "kernel library" in w} == {"the kernel library om2_gemm_lib",
                                                           "the kernel library om2_gemv_lib"}
    assert any("om2_load_and_run" in w for w in built), built
    assert (tmp_path / "built.om2").read_bytes() == (tmp_path / "prebuilt.om2").read_bytes()
