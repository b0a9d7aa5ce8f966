"""Dynamic shapes on a real model (issue 15): PaddleOCR v4's text recogniser
(samples/real_models/catalog.py) with the text line's width dynamic in 16~1024, as PaddleOCR
feeds it (every line at its own width): one archive, captured once, compared with ONNX Runtime
at five widths in an order that revisits and ends at the range's edges."""
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
CLASSES = 6625             # the recogniser's character set (with the blank)


def test_ppocr_rec_at_any_line_width_matches_onnxruntime(tmp_path):
    path = tmp_path / "ppocr_v4_rec.om2"
    om2gen.compile(catalog.fetch(MODEL), path, input_shapes={"x": (1, 3, 48, "16~1024")})
    proto = onnx.load(str(catalog.fetch(MODEL)))
    out = proto.graph.output[0].name
    rng = np.random.default_rng(0)
    with om2gen.load(path) as m:
        assert m.inputs[0].shape == (1, 3, 48, -1) and m.inputs[0].max_shape == (1, 3, 48, 1024)
        for w in (320, 160, 1024, 480, 16, 320):
            x = rng.uniform(-1, 1, (1, 3, 48, w)).astype(np.float32)
            got = m.run({"x": x})[out]
            assert got.shape == (1, -(-w // 8), CLASSES)   # a column of character scores per 8 pixels
            assert_close(got, ort_run(proto, {"x": x})[0], f"ppocr_v4_rec at width {w}")
