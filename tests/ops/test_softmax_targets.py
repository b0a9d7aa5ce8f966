"""Softmax over contiguous rows (softmax.c.j2 with om2_v_* of om2/om2_gemm.h) on every target this
machine runs: rows of whole vectors, a tail, shorter than one vector, a single element, large
values; and a NaN in a row makes that row NaN and leaves the others alone."""
import numpy as np
import pytest
from helpers import check_model, make_model, rand
from onnx import helper

import om2gen
from om2gen.toolchain import targets

COVERS: set = set()   # Softmax is covered by test_pool_norm_softmax.py

RUNNABLE = [name for name, t in targets.TARGETS.items() if not targets.missing_features(t.arch, t.isa_features)]


@pytest.mark.parametrize("target", RUNNABLE)
@pytest.mark.parametrize("shape", [(4, 128), (3, 37), (5, 7), (6, 1), (2, 3, 160)])
def test_softmax_rows(shape, target, tmp_path):
    x = rand(*shape, seed=1, low=-30.0, high=30.0)
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {"x": x}, ["y"])
    check_model(model, {"x": x}, tmp_path, target=target)


@pytest.mark.parametrize("target", RUNNABLE)
def test_softmax_nan_row(target, tmp_path):
    x = rand(3, 40, seed=2)
    x[1, 17] = np.nan
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {"x": x}, ["y"])
    om2gen.compile(model, tmp_path / "m.om2", target=target)
    with om2gen.load(tmp_path / "m.om2") as m:
        y = m.run({"x": x})["y"]
    assert np.isnan(y[1]).all() and not np.isnan(y[[0, 2]]).any()
    e = np.exp(x[[0, 2]] - x[[0, 2]].max(axis=1, keepdims=True))
    np.testing.assert_allclose(y[[0, 2]], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
