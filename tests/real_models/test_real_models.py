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
    t0 = time.perf_counter()
    om2gen.compile(path, tmp_path / f"{name}.om2", input_shapes=model.input_shapes, input_values=model.input_values)
    record_property("compile_seconds", round(time.perf_counter() - t0, 2))
    feeds = catalog.inputs_for(model)
    with om2gen.load(tmp_path / f"{name}.om2") as m:
        got = m.run(feeds)
    ref_feeds = dict(feeds)
    for k, v in model.input_values.items():
        declared = next(i for i in onnx.load(str(path), load_external_data=False).graph.input if i.name == k)
        ref_feeds[k] = np.array(v, dtype=onnx.helper.tensor_dtype_to_np_dtype(declared.type.tensor_type.elem_type))
    ref = ort_run(onnx.load(str(path)), ref_feeds)
    names = [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]
    for out_name, r in zip(names, ref):
        assert_close(got[out_name], r, f"{name}:{out_name}")
