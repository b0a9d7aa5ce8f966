"""MapIndex (ops/control.py): the gear of a run, as the LABEL_SWITCH_BY_INDEX of a gear model
reads it. Each gear's output differs in shape, so a wrong index shows as a wrong result."""
import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run
from onnx import helper

import om2gen

COVERS = {"MapIndex"}


@pytest.mark.parametrize("order", [(1, 2, 3), (3, 1, 2)])
def test_every_gear_picks_its_own_branch(tmp_path, order):
    """Gears listed in any order: the table row equal to the shape data wins."""
    model = make_model([helper.make_node("Mul", ["x", "k"], ["y"])], {"x": np.zeros((1, 4), np.float32)}, ["y"],
                       {"k": np.arange(4, dtype=np.float32)})
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "m.om2"
    om2gen.compile(model, path, input_shapes={"x": (-1, 4)}, dynamic_batch_size=list(order))
    rng = np.random.default_rng(0)
    with om2gen.load(path) as m:
        for batch in (2, 3, 1, 3):
            x = rng.standard_normal((batch, 4)).astype(np.float32)
            assert_close(m.run({"x": x})["y"], ort_run(model, {"x": x})[0], f"batch {batch}")
