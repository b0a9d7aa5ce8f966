"""A weight read by several nodes is stored once (issue 16): an RNN cell unrolled over its
time steps, as exporters write a fixed-length LSTM or a Loop unrolled, reads the same few
weight matrices at every step; each packed form of a matrix is one place in the constants
blob of the .om2 (data/constants/) and in the .om's WEIGHTS_DATA, whatever the number of nodes
reading it (and an initializer that repeats another's bytes under a new name shares its place)."""
import json
import zipfile

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run
from onnx import helper

import om2gen
from om2gen.cli import entry
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.lower import memplan

STEPS, INPUT, HIDDEN = 24, 64, 128


def _unrolled_rnn(batch):
    """h_t = tanh(x_t W^T + h_{t-1} R^T + b) for STEPS steps, then y = h W_out: 2 * STEPS - 1 Gemms
    and a MatMul over four weight initializers, one of them (R2) a copy of R's bytes that the even
    steps read."""
    rng = np.random.default_rng(16)
    w = (rng.standard_normal((HIDDEN, INPUT)) * 0.1).astype(np.float32)
    r = (rng.standard_normal((HIDDEN, HIDDEN)) * 0.1).astype(np.float32)
    inits = {"W": w, "R": r, "R2": r.copy(), "b": (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32),
             "W_out": (rng.standard_normal((HIDDEN, 32)) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("Split", ["x"], [f"x{t}" for t in range(STEPS)], axis=0, num_outputs=STEPS),
             helper.make_node("Gemm", ["x0", "W", "b"], ["h0"], transB=1)]
    for t in range(1, STEPS):
        nodes += [helper.make_node("Squeeze", [f"x{t}", "axis0"], [f"xs{t}"]),
                  helper.make_node("Gemm", [f"xs{t}", "W", "b"], [f"xw{t}"], transB=1),
                  helper.make_node("Gemm", [f"h{t - 1}", "R" if t % 2 else "R2", f"xw{t}"], [f"g{t}"], transB=1),
                  helper.make_node("Tanh", [f"g{t}"], [f"h{t}"])]
    nodes[1].input[0] = "xs0"
    nodes.insert(1, helper.make_node("Squeeze", ["x0", "axis0"], ["xs0"]))
    nodes.append(helper.make_node("MatMul", [f"h{STEPS - 1}", "W_out"], ["y"]))
    inits["axis0"] = np.array([0], np.int64)
    model = make_model(nodes, {"x": np.zeros((STEPS, 1 if isinstance(batch, str) else batch, INPUT), np.float32)},
                       ["y"], inits, opset=18)
    if isinstance(batch, str):   # a symbolic batch, for dynamic shapes and gears
        dim = model.graph.input[0].type.tensor_type.shape.dim[1]
        dim.Clear()
        dim.dim_param = batch
        model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = batch
    return model, inits


# (compile options, batch run): 1 takes the GEMV path (om2/om2_gemv.h), 8 the packed GEMM; a
# dynamic batch (one capture for 1~8) and gears of it derive the packed weights per shape plan
CASES = {"batch 1": ({}, 1), "batch 8": ({}, 8),
         "dynamic batch": ({"input_shapes": {"x": (STEPS, "1~8", INPUT)}}, 3),
         "gears": ({"input_shapes": {"x": (STEPS, -1, INPUT)}, "dynamic_dims": "1;2;4"}, 2)}


@pytest.mark.parametrize("case", list(CASES))
def test_each_packed_weight_is_stored_once(case, tmp_path):
    options, batch = CASES[case]
    model, inits = _unrolled_rnn(batch if not options else "N")
    om2 = om2gen.compile(model, tmp_path / "rnn.om2", **options)
    om = om2gen.compile(model, tmp_path / "rnn.om", **options)
    with zipfile.ZipFile(om2) as z:
        config = json.loads(z.read("data/constants/model_0_constants_config.json"))
    consts = config["consts"]
    weights = {"W", "R", "R2", "b", "W_out"}
    # every Gemm got its own constant name, and the names of one packed weight share one place
    # (R2's bytes are R's, so its packed form is R's too)
    places: dict[tuple, set[int]] = {}
    for c in consts.values():
        if c["transforms"] and weights & set(c["sources"]):
            sources = tuple("R" if s == "R2" else s for s in c["sources"])
            places.setdefault((sources, tuple(c["transforms"])), set()).add(c["offset"])
    assert len([c for c in consts.values() if c["transforms"]]) >= 2 * STEPS
    assert {s for s, _ in places} == {("W",), ("R",), ("W_out",)}, places
    assert all(len(p) == 1 for p in places.values()), places
    # so the blob holds the model's weights once (a packed copy of W, R and W_out, the bias), and
    # what is no weight of the model (a gear model's gear table)
    other = {c["offset"]: c["size"] for c in consts.values() if not weights & set(c["sources"])}
    once = sum(memplan.align(a.nbytes) for k, a in inits.items() if k in weights - {"R2"}) + \
        sum(memplan.align(n) for n in other.values())
    assert config["internal_weight_size"] <= once, (config["internal_weight_size"], once)
    assert len(read_om(om).partition(PT.WEIGHTS_DATA)) <= once

    feeds = {"x": np.random.default_rng(1).standard_normal((STEPS, batch, INPUT)).astype(np.float32)}
    ref = ort_run(model, feeds)[0]
    for path in (om2, om):
        with om2gen.load(path) as m:
            assert_close(m.run(feeds)["y"], ref, f"{path.suffix} y")


def test_the_same_model_compiles_to_the_same_bytes(tmp_path):
    model, _ = _unrolled_rnn(1)
    for ext in ("om2", "om"):
        a = om2gen.compile(model, tmp_path / f"a.{ext}").read_bytes()
        b = om2gen.compile(model, tmp_path / f"b.{ext}").read_bytes()
        assert a == b, ext


def test_inspect_shows_the_size_next_to_the_onnx_file(tmp_path, capsys):
    model, _ = _unrolled_rnn(1)
    onnx_path = tmp_path / "rnn.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    for ext in ("om2", "om"):
        path = om2gen.compile(model, tmp_path / f"rnn.{ext}")
        assert entry.main(["inspect", str(path), "--onnx", str(onnx_path), "--json"]) == 0
        sizes = json.loads(capsys.readouterr().out)["sizes"]
        assert sizes["bytes"] == path.stat().st_size and sizes["onnx_bytes"] == onnx_path.stat().st_size
        assert 0 < sizes["constants_bytes"] < sizes["bytes"]
        assert entry.main(["inspect", str(path), "--onnx", str(onnx_path)]) == 0
        ratio = path.stat().st_size / onnx_path.stat().st_size
        assert f"the ONNX file {onnx_path.stat().st_size / 1e6:.2f} MB: {ratio:.2f}x" in capsys.readouterr().out
    assert entry.main(["inspect", str(path), "--onnx", str(tmp_path / "missing.onnx")]) != 0
    assert "no such ONNX file" in capsys.readouterr().err
