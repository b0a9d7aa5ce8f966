"""Dynamic shapes on real models (issue 15), each as its own package feeds it: PaddleOCR v4's text
recogniser (samples/real_models/catalog.py) with the batch of lines and their width dynamic,
its direction classifier over a batch of lines, its text detector with the page dynamic (multiples
of 32, as PaddleOCR resizes pages), Silero VAD with its chunk length dynamic (both
its forms), and the torch.onnx BERT encoder with its batch and sequence dynamic. One archive
each, captured once, compared with ONNX Runtime at several sizes in an order that revisits sizes
and reaches the ranges' edges."""
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import assert_close, ort_run

import om2gen
from om2gen.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))
import catalog  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = catalog.BY_NAME["ppocr_v4_rec"]
CLASSES = 6625             # the recogniser's character set (with the blank)


def test_ppocr_rec_at_any_line_width_matches_onnxruntime(tmp_path):
    """As PaddleOCR feeds its recogniser: batches of up to 6 lines (its rec_batch_num), each batch
    padded to its widest line, so both the batch and the width vary from call to call."""
    path = tmp_path / "ppocr_v4_rec.om2"
    om2gen.compile(catalog.fetch(MODEL), path, input_shapes={"x": ("1~6", 3, 48, "16~1024")})
    proto = onnx.load(str(catalog.fetch(MODEL)))
    out = proto.graph.output[0].name
    rng = np.random.default_rng(0)
    with om2gen.load(path) as m:
        assert m.inputs[0].shape == (-1, 3, 48, -1) and m.inputs[0].max_shape == (6, 3, 48, 1024)
        for n, w in ((6, 320), (1, 160), (2, 1024), (6, 480), (1, 16), (3, 320)):
            x = rng.uniform(-1, 1, (n, 3, 48, w)).astype(np.float32)
            got = m.run({"x": x})[out]
            assert got.shape == (n, -(-w // 8), CLASSES)   # a column of character scores per 8 pixels
            assert_close(got, ort_run(proto, {"x": x})[0], f"ppocr_v4_rec at {n} lines of width {w}")


def test_ppocr_det_at_three_page_sizes_matches_onnxruntime(tmp_path):
    """The detector (its FPN adds 2x-upsampled maps to lateral ones, which holds where H and W
    divide by 32) with the page dynamic as multiples of 32 up to 960 (PaddleOCR's
    DetResizeForTest limit_side_len): one archive at three pages of different aspect; a page
    that is not a multiple of 32 is an InputError naming the dim and the rule."""
    model = catalog.fetch(catalog.BY_NAME["ppocr_v4_det"])
    path = tmp_path / "ppocr_v4_det.om2"
    om2gen.compile(model, path, input_shapes={"x": (1, 3, "32~960%32", "32~960%32")})
    proto = onnx.load(str(model))
    rng = np.random.default_rng(3)
    with om2gen.load(path) as m:
        assert m.inputs[0].shape == (1, 3, -1, -1) and m.inputs[0].max_shape == (1, 3, 960, 960)
        for h, w in ((960, 704), (480, 640), (320, 960), (480, 640)):
            x = rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
            got, = m.run({"x": x}).values()
            assert got.shape == (1, 1, h, w)   # the text probability map, at the page's size
            assert_close(got, ort_run(proto, {"x": x})[0], f"ppocr_v4_det at {h}x{w}")
        with pytest.raises(InputError, match=r"dim 2 \(32\*\w+_div32\) must be 32~960, a multiple of 32.* 500 is "
                                             "not a multiple of 32"):
            m.run({"x": np.zeros((1, 3, 500, 640), np.float32)})


def test_silero_vad_at_several_chunk_lengths_matches_onnxruntime(tmp_path):
    """Silero VAD v6 (the model silero-vad's own package runs) at 16 kHz with the chunk length
    dynamic over what its encoder reads as one frame (192~703 samples): one archive at four
    lengths, its 512 and the range's ends, with a running state."""
    model = catalog.fetch(catalog.BY_NAME["silero_vad"])
    path = tmp_path / "silero_vad.om2"
    om2gen.compile(model, path, input_shapes={"input": (1, "192~703"), "state": (2, 1, 128)},
                   input_values={"sr": 16000})
    proto = onnx.load(str(model))
    rng = np.random.default_rng(1)
    with om2gen.load(path) as m:
        state = np.zeros((2, 1, 128), np.float32)
        for n in (512, 256, 703, 192, 512):
            x = rng.uniform(-0.5, 0.5, (1, n)).astype(np.float32)
            got = m.run({"input": x, "state": state})
            want = ort_run(proto, {"input": x, "state": state, "sr": np.array(16000, np.int64)})
            for g, w, name in zip(got.values(), want, ("output", "stateN")):
                assert_close(g, w, f"silero_vad {name} at {n} samples")
            state = want[1]


def test_silero_vad_sequence_form_at_several_lengths_matches_onnxruntime(tmp_path):
    """The sequence form (an ONNX LSTM over the frames): the frame count dynamic in 1~64."""
    model = catalog.fetch(catalog.BY_NAME["silero_vad_lstm"])
    path = tmp_path / "silero_vad_lstm.om2"
    om2gen.compile(model, path, input_shapes={"input": ("1~64", 576)})
    proto = onnx.load(str(model))
    rng = np.random.default_rng(2)
    with om2gen.load(path) as m:
        for n in (4, 1, 64, 17):
            feeds = {"input": rng.uniform(-0.5, 0.5, (n, 576)).astype(np.float32),
                     "h": rng.uniform(-0.5, 0.5, (1, 1, 128)).astype(np.float32),
                     "c": rng.uniform(-0.5, 0.5, (1, 1, 128)).astype(np.float32)}
            got = m.run(feeds)
            for g, w, name in zip(got.values(), ort_run(proto, feeds), ("speech_probs", "hn", "cn")):
                assert g.shape == w.shape
                assert_close(g, w, f"silero_vad_lstm {name} at {n} frames")


def test_bert_tiny_at_several_batches_and_sequence_lengths_matches_onnxruntime(tmp_path):
    """bert_tiny (torch.onnx's dynamo export, its batch and sequence axes named) with both dynamic:
    one archive at three sequence lengths and batches, padded tails masked, then the largest."""
    model = catalog.fetch(catalog.BY_NAME["bert_tiny"])
    path = tmp_path / "bert_tiny.om2"
    names = ("input_ids", "attention_mask", "token_type_ids")
    om2gen.compile(model, path, input_shapes={k: ("1~4", "1~128") for k in names})
    proto = onnx.load(str(model))
    rng = np.random.default_rng(3)
    with om2gen.load(path) as m:
        assert [t.shape for t in m.inputs] == [(-1, -1)] * 3
        for batch, seq in ((1, 16), (3, 77), (2, 1), (4, 128)):
            mask = np.ones((batch, seq), np.int64)
            mask[:, seq * 3 // 4 + 1:] = 0
            feeds = {"input_ids": rng.integers(0, 1024, (batch, seq)).astype(np.int64), "attention_mask": mask,
                     "token_type_ids": (rng.uniform(size=(batch, seq)) < 0.3).astype(np.int64)}
            got = m.run(feeds)
            for (name, g), w in zip(got.items(), ort_run(proto, feeds)):
                assert g.shape == w.shape
                assert_close(g, w, f"bert_tiny {name} at batch {batch}, sequence {seq}")


def test_ppocr_cls_at_several_batches_matches_onnxruntime(tmp_path):
    """PaddleOCR's text-direction classifier takes the detected lines in batches (its cls_batch_num
    is 6, the last batch smaller): the batch dynamic in 1~6, one archive at four batch sizes."""
    model = catalog.fetch(catalog.BY_NAME["ppocr_mobile_cls"])
    path = tmp_path / "ppocr_mobile_cls.om2"
    om2gen.compile(model, path, input_shapes={"x": ("1~6", 3, 48, 192)})
    proto = onnx.load(str(model))
    rng = np.random.default_rng(4)
    with om2gen.load(path) as m:
        for n in (6, 1, 4, 6):
            x = rng.uniform(-1, 1, (n, 3, 48, 192)).astype(np.float32)
            got = m.run({"x": x})
            for (name, g), w in zip(got.items(), ort_run(proto, {"x": x})):
                assert g.shape == w.shape == (n, 2)
                assert_close(g, w, f"ppocr_mobile_cls {name} at batch {n}")
