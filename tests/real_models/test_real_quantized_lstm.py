"""The DynamicQuantizeLSTM of a real quantized model: ddddocr 1.6.1's common_old.onnx
(samples/real_models/catalog.py; bidirectional, hidden 512, made by quantize_dynamic), cut out
of the model with its inputs as graph inputs and compared with ONNX Runtime. The whole model
also needs int8k's DynamicQuantizeLinear, ConvInteger and MatMulInteger (a strict xfail in
test_real_models.py until then)."""
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.utils
import pytest
from helpers import compile_and_run, ort_run
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "samples" / "real_models"))
import catalog  # noqa: E402

pytestmark = pytest.mark.slow

SEQ, H = 20, 512


def test_ddddocr_dynamic_quantize_lstm_matches_onnxruntime(tmp_path):
    src = catalog.fetch(catalog.BY_NAME["ddddocr_old"])
    onnx.utils.extract_model(str(src), str(tmp_path / "lstm.onnx"), ["227", "237", "244"], ["361", "362", "363"])
    sub = onnx.load(str(tmp_path / "lstm.onnx"))
    assert [n.op_type for n in sub.graph.node] == ["DynamicQuantizeLSTM"]
    states = (2, 1, H)
    del sub.graph.input[:]
    sub.graph.input.extend([helper.make_tensor_value_info("227", TensorProto.FLOAT, (SEQ, 1, 512)),
                            helper.make_tensor_value_info("237", TensorProto.FLOAT, states),
                            helper.make_tensor_value_info("244", TensorProto.FLOAT, states)])
    del sub.graph.output[:]
    sub.graph.output.extend([helper.make_tensor_value_info("361", TensorProto.FLOAT, (SEQ, 2, 1, H))] +
                            [helper.make_tensor_value_info(n, TensorProto.FLOAT, states) for n in ("362", "363")])
    rng = np.random.default_rng(0)
    feeds = {"227": (rng.standard_normal((SEQ, 1, 512)) * 2).astype(np.float32),
             "237": rng.uniform(-0.5, 0.5, states).astype(np.float32),
             "244": rng.uniform(-0.5, 0.5, states).astype(np.float32)}
    got, _ = compile_and_run(sub, feeds, tmp_path)
    for name, ref in zip(("361", "362", "363"), ort_run(sub, feeds)):
        assert np.abs(got[name] - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max()), name
