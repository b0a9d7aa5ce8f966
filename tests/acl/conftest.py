"""Fixtures for om2gen.acl: the sample CNN and a two-input, two-output model, compiled to both
formats (an .om2 archive and a classic .om file) once per session."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import make_model
from onnx import helper

import om2gen
import om2gen.acl as acl

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
FORMATS = ("om2", "om")


def _compile(model, directory: Path, stem: str, **opts) -> dict[str, Path]:
    paths = {}
    for fmt in FORMATS:
        paths[fmt] = directory / f"{stem}.{fmt}"
        om2gen.compile(model, paths[fmt], format=fmt, **opts)
    return paths


@pytest.fixture(scope="session")
def sample_models(tmp_path_factory) -> dict[str, Path]:
    """{"om2": path, "om": path} of samples/cnn/model.onnx with image 1x3x32x32."""
    return _compile(SAMPLE, tmp_path_factory.mktemp("acl_sample"), "sample", input_shapes={"image": (1, 3, 32, 32)})


def two_io_onnx() -> onnx.ModelProto:
    """x float32[2,3], ids int64[4] -> y = Relu(x) * 2 float32[2,3], s = ids + ids int64[4]."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "two"], ["y"]),
             helper.make_node("Add", ["ids", "ids"], ["s"])]
    return make_model(nodes, {"x": np.zeros((2, 3), np.float32), "ids": np.zeros(4, np.int64)}, ["y", "s"],
                      {"two": np.array(2.0, np.float32)})


@pytest.fixture(scope="session")
def two_io_models(tmp_path_factory) -> dict[str, Path]:
    return _compile(two_io_onnx(), tmp_path_factory.mktemp("acl_two_io"), "two_io")


@pytest.fixture(autouse=True)
def no_stale_messages():
    """Each test starts and ends with no unread error message on its thread."""
    acl.get_recent_err_msg()
    yield
    acl.get_recent_err_msg()
