"""Silero VAD as shipped: its If on the sample rate decided at run time (no input_values), both
branches compiled, the LABEL_SWITCH_BY_INDEX switch choosing one per run, compared with ONNX
Runtime at 8 kHz and 16 kHz."""
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

# 256 samples is the 8 kHz chunk, and a length both branches accept (ONNX Runtime runs either on
# it); at 512 samples, the 16 kHz chunk, the 8 kHz branch fails in ONNX Runtime as well
SHAPES = {"input": (1, 256), "state": (2, 1, 128)}


def silero_path() -> Path:
    try:
        return catalog.fetch(catalog.BY_NAME["silero_vad"])
    except catalog.FetchError as exc:
        pytest.skip(f"silero_vad cannot be fetched: {exc}")


def test_silero_vad_runtime_if_matches_onnxruntime_at_both_sample_rates(tmp_path):
    path = silero_path()
    om2gen.compile(path, tmp_path / "vad.om2", input_shapes=SHAPES)
    proto = onnx.load(str(path))
    rng = np.random.default_rng(0)
    with om2gen.load(tmp_path / "vad.om2") as m:
        assert {t.name for t in m.inputs} == {"input", "state", "sr"}
        state = np.zeros((2, 1, 128), np.float32)
        for sr in (8000, 16000, 8000):   # the switch goes both ways, and back
            feeds = {"input": (rng.standard_normal((1, 256)) * 0.1).astype(np.float32), "state": state,
                     "sr": np.array(sr, np.int64)}
            got = m.run(feeds)
            ref = ort_run(proto, feeds)
            for name, r in zip([o.name for o in proto.graph.output], ref):
                assert_close(got[name], r, f"sr={sr}:{name}")
            state = ref[1]


def test_silero_vad_at_a_length_one_branch_rejects_names_sr(tmp_path):
    """At 512 samples only the 16 kHz branch can run: the error says so and how to get out."""
    with pytest.raises(om2gen.ShapeError) as info:
        om2gen.compile(silero_path(), tmp_path / "vad.om2", input_shapes={"input": (1, 512), "state": (2, 1, 128)})
    msg = str(info.value)
    assert info.value.value_name == "sr" and "the else branch cannot run with these input shapes" in msg, msg
    assert "LSTM" in msg and "input_values={'sr': V}" in msg, msg
