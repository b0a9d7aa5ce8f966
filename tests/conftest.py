"""Shared fixtures: an isolated kernel cache per test session, and check_op against ONNX Runtime."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "conformance"))


def pytest_configure(config):
    cache = Path(os.environ.get("OM2GEN_TEST_CACHE") or (ROOT / ".pytest_cache" / "om2gen-kernels"))
    os.environ["OM2GEN_CACHE_DIR"] = str(cache)


@pytest.fixture(scope="session")
def sample_cnn_debug(tmp_path_factory):
    """samples/cnn compiled once per session with --debug (read it, never change it)."""
    import om2gen
    path = tmp_path_factory.mktemp("sample_cnn") / "sample_cnn.om2"
    om2gen.compile(ROOT / "samples" / "cnn" / "model.onnx", path, input_shapes={"image": (1, 3, 32, 32)}, debug=True)
    return path


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache for tests that must see real compiles."""
    d = tmp_path / "cache"
    monkeypatch.setenv("OM2GEN_CACHE_DIR", str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)
