"""Gears on a real model: PaddleOCR v4's text recogniser (samples/real_models/catalog.py) over its
natural dynamic dim, the text line's width (input x is [?, 3, 48, ?]), compiled once with gears
of the width (dynamic_dims) and compared with ONNX Runtime at every gear, switching gears between
runs. About 35 s on 2 cores with an empty kernel cache: one compile of three gears, then six runs."""
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import assert_close, ort_run

import om2gen

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))
import catalog  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = catalog.BY_NAME["ppocr_v4_rec"]
WIDTHS = (160, 320, 480)   # the catalog's static compile is 320
CLASSES = 6625             # the recogniser's character set (with the blank)


@pytest.fixture(scope="module")
def geared(tmp_path_factory):
    path = tmp_path_factory.mktemp("real_gears") / "ppocr_v4_rec.om2"
    om2gen.compile(catalog.fetch(MODEL), path, input_shapes={"x": (1, 3, 48, -1)},
                   dynamic_dims=[(w,) for w in WIDTHS])
    return path


def test_ppocr_rec_every_width_gear_matches_onnxruntime(geared):
    proto = onnx.load(str(catalog.fetch(MODEL)))
    out = proto.graph.output[0].name
    rng = np.random.default_rng(0)
    with om2gen.load(geared) as m:
        assert m.gears == [{"x": (1, 3, 48, w)} for w in WIDTHS]
        assert m.inputs[0].shape == (1, 3, 48, -1)
        for w in (480, 160, 320, 160, 480, 320):   # every gear, each after another
            x = rng.uniform(-1, 1, (1, 3, 48, w)).astype(np.float32)
            got = m.run({"x": x})[out]
            assert got.shape == (1, w // 8, CLASSES)   # one column of character scores per 8 pixels
            assert_close(got, ort_run(proto, {"x": x})[0], f"ppocr_v4_rec at width {w}")
