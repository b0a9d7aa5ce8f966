"""The real-model tier: exported models nobody on the team wrote (samples/real_models/catalog.py),
compiled by om2gen and compared with ONNX Runtime on seeded inputs."""
import sys
import time
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


KNOWN: dict[str, str] = {}   # name -> reason, for a model that is expected to fail (strict xfail)


@pytest.mark.parametrize("name", [pytest.param(m.name, marks=pytest.mark.xfail(reason=KNOWN[m.name], strict=True))
                                  if m.name in KNOWN else m.name for m in catalog.MODELS])
def test_real_model_matches_onnxruntime(name, tmp_path, record_property):
    model = catalog.BY_NAME[name]
    path = catalog.fetch(model)
    proto = with_outputs(onnx.load(str(path)), model.extra_outputs)
    t0 = time.perf_counter()
    om2gen.compile(proto, tmp_path / f"{name}.om2", input_shapes=model.input_shapes, input_values=model.input_values)
    record_property("compile_seconds", round(time.perf_counter() - t0, 2))
    feeds = catalog.inputs_for(model)
    with om2gen.load(tmp_path / f"{name}.om2") as m:
        got = m.run(feeds)
    ref_feeds = dict(feeds)
    for k, v in model.input_values.items():
        declared = next(i for i in onnx.load(str(path), load_external_data=False).graph.input if i.name == k)
        ref_feeds[k] = np.array(v, dtype=onnx.helper.tensor_dtype_to_np_dtype(declared.type.tensor_type.elem_type))
    ref = ort_run(proto, ref_feeds)
    for out_name, r in zip([o.name for o in proto.graph.output], ref):
        if model.compare.get(out_name) == "distribution":
            g = got[out_name]
            assert g.shape == r.shape and g.dtype == r.dtype, f"{name}:{out_name}: {g.dtype}{g.shape} != {r.dtype}{r.shape}"
            assert np.all((g >= 0) & (g <= 1)), f"{name}:{out_name}: values outside [0, 1]"
            np.testing.assert_allclose(g.sum(-1), 1.0, atol=1e-5, err_msg=f"{name}:{out_name}: rows do not sum to 1")
        else:
            assert_close(got[out_name], r, f"{name}:{out_name}")


def with_outputs(proto: onnx.ModelProto, names) -> onnx.ModelProto:
    """The model with intermediate tensors `names` added as graph outputs (types from ONNX's shape
    inference)."""
    if names:
        known = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(proto).graph.value_info}
        proto.graph.output.extend(known[tensor] for tensor in names)
    return proto
