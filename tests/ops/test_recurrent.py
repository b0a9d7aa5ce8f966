"""RNN, GRU and LSTM against ONNX Runtime: directions, layouts, optional inputs and outputs,
constant and runtime weights, peepholes, activations, clip, input_forget, linear_before_reset."""
import numpy as np
import pytest
import om2gen
from helpers import assert_close, check_model, check_op, make_model, ort_run, rand
from onnx import helper

COVERS = {"RNN", "GRU", "LSTM"}

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}


def operands(cell, *, seq=5, batch=3, size=4, hidden=6, dirs=1, layout=0, seed=0):
    g = GATES[cell] * hidden
    x = rand(*((batch, seq, size) if layout else (seq, batch, size)), seed=seed)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    return {
        "X": x,
        "W": rand(dirs, g, size, seed=seed + 1),
        "R": rand(dirs, g, hidden, seed=seed + 2),
        "B": rand(dirs, 2 * g, seed=seed + 3),
        "initial_h": rand(*state, seed=seed + 4),
        "initial_c": rand(*state, seed=seed + 5),
        "P": rand(dirs, 3 * hidden, seed=seed + 6),
    }


def node_inputs(ops):
    """The node's input names in ONNX order, '' for absent ones, trailing absent ones dropped."""
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    while order[-1] not in ops:
        order.pop()
    return [n if n in ops else "" for n in order]


def run(cell, ops, attrs, tmp_path, *, const=("W", "R", "B"), opset=17, n_outputs=None):
    """One node; inputs named in `const` are initializers, the others graph inputs."""
    names = node_inputs(ops)
    inputs = {n: ops[n] for n in names if n and n not in const}
    consts = {n: ops[n] for n in names if n and n in const}
    return check_op(cell, inputs, attrs, consts=consts, n_outputs=n_outputs or N_OUT[cell], opset=opset,
                    input_names=names, tmp_path=tmp_path)


def run_batchwise(cell, ops, attrs, tmp_path, *, const=("W", "R", "B")):
    """layout=1 (opset 14+): ONNX Runtime's CPU provider has no batchwise RNNs, so the reference
    is the same node at layout=0 on transposed inputs, its outputs transposed back."""
    names = node_inputs(ops)
    n_out = N_OUT[cell]
    outs = [f"y{i}" for i in range(n_out)]
    inputs = {n: ops[n] for n in names if n and n not in const}
    consts = {n: ops[n] for n in names if n and n in const}
    model = make_model([helper.make_node(cell, names, outs, layout=1, **attrs)], inputs, outs, consts, 17)
    path = tmp_path / "model.om2"
    om2gen.compile(model, path)
    with om2gen.load(path) as m:
        got = m.run(inputs)
    seq_major = {n: (a.transpose(1, 0, 2) if n in ("X", "initial_h", "initial_c") else a) for n, a in ops.items()}
    ref_inputs = {n: seq_major[n] for n in inputs}
    ref_model = make_model([helper.make_node(cell, names, outs, **attrs)], ref_inputs, outs,
                           {n: seq_major[n] for n in consts}, 17)
    ref = ort_run(ref_model, ref_inputs)
    assert_close(got["y0"], ref[0].transpose(2, 0, 1, 3), "Y")
    for i in range(1, n_out):
        assert_close(got[f"y{i}"], ref[i].transpose(1, 0, 2), outs[i])


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_layouts_all_inputs(cell, direction, layout, tmp_path):
    dirs = 2 if direction == "bidirectional" else 1
    ops = operands(cell, dirs=dirs, layout=layout)
    ops["sequence_lens"] = np.array([5, 3, 1], np.int32)
    if cell != "LSTM":
        del ops["initial_c"], ops["P"]
    attrs = {"hidden_size": 6, "direction": direction}
    if layout:
        run_batchwise(cell, ops, attrs, tmp_path)
    else:
        run(cell, ops, attrs, tmp_path)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_runtime_weights_no_optional_inputs(cell, direction, tmp_path):
    dirs = 2 if direction == "bidirectional" else 1
    ops = operands(cell, dirs=dirs, seed=10)
    ops = {n: ops[n] for n in ("X", "W", "R")}
    run(cell, ops, {"hidden_size": 6, "direction": direction}, tmp_path, const=())


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_opset7(cell, tmp_path):
    ops = operands(cell, seed=20)
    ops = {n: ops[n] for n in ("X", "W", "R", "B")}
    run(cell, ops, {"hidden_size": 6}, tmp_path, opset=7)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_initial_state_without_bias(cell, tmp_path):
    ops = operands(cell, seed=30)
    keep = ("X", "W", "R", "initial_h") + (("initial_c",) if cell == "LSTM" else ())
    ops = {n: ops[n] for n in keep}
    run(cell, ops, {"hidden_size": 6}, tmp_path)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_peepholes(direction, input_forget, tmp_path):
    dirs = 2 if direction == "bidirectional" else 1
    ops = operands("LSTM", dirs=dirs, seed=40)
    ops["sequence_lens"] = np.array([4, 5, 2], np.int32)
    run("LSTM", ops, {"hidden_size": 6, "direction": direction, "input_forget": input_forget}, tmp_path,
        const=("W", "R", "B", "P"))


def test_lstm_peepholes_without_state(tmp_path):
    ops = operands("LSTM", seed=45)
    ops = {n: ops[n] for n in ("X", "W", "R", "B", "P")}
    run("LSTM", ops, {"hidden_size": 6}, tmp_path, const=("W", "R", "B", "P"))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("const", [True, False])
def test_gru_linear_before_reset(direction, lbr, const, tmp_path):
    dirs = 2 if direction == "bidirectional" else 1
    ops = operands("GRU", dirs=dirs, seed=50)
    del ops["initial_c"], ops["P"]
    run("GRU", ops, {"hidden_size": 6, "direction": direction, "linear_before_reset": lbr}, tmp_path,
        const=("W", "R", "B") if const else ())


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_clip(cell, tmp_path):
    ops = operands(cell, seed=60)
    ops = {n: ops[n] * 3 if n in ("W", "R") else ops[n] for n in ("X", "W", "R", "B")}
    run(cell, ops, {"hidden_size": 6, "clip": 0.75}, tmp_path)


ACTIVATION_SETS = [
    (["Relu", "Tanh", "Sigmoid"], [], []),
    (["HardSigmoid", "Softsign", "Softplus"], [0.3], [0.4]),
    (["LeakyRelu", "Elu", "ThresholdedRelu"], [0.05, 0.8, 0.2], []),
    (["Affine", "ScaledTanh", "Tanh"], [0.5, 1.5], [0.1, 0.7]),
]


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("acts,alpha,beta", ACTIVATION_SETS, ids=lambda v: "-".join(map(str, v)) or "none")
def test_activations(cell, acts, alpha, beta, tmp_path):
    ops = operands(cell, seed=70)
    ops = {n: ops[n] for n in ("X", "W", "R", "B")}
    attrs = {"hidden_size": 6, "activations": acts[:{"RNN": 1, "GRU": 2, "LSTM": 3}[cell]]}
    n_alpha = sum(a in ("HardSigmoid", "LeakyRelu", "Elu", "ThresholdedRelu", "Affine", "ScaledTanh")
                  for a in attrs["activations"])
    n_beta = sum(a in ("HardSigmoid", "Affine", "ScaledTanh") for a in attrs["activations"])
    if alpha[:n_alpha]:
        attrs["activation_alpha"] = alpha[:n_alpha]
    if beta[:n_beta]:
        attrs["activation_beta"] = beta[:n_beta]
    run(cell, ops, attrs, tmp_path)


def test_bidirectional_activations_per_direction(tmp_path):
    ops = operands("GRU", dirs=2, seed=80)
    ops = {n: ops[n] for n in ("X", "W", "R", "B")}
    run("GRU", ops, {"hidden_size": 6, "direction": "bidirectional",
                     "activations": ["Sigmoid", "Tanh", "HardSigmoid", "Softsign"]}, tmp_path)


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_only_y_output(cell, tmp_path):
    ops = operands(cell, seed=90)
    ops = {n: ops[n] for n in ("X", "W", "R", "B")}
    run(cell, ops, {"hidden_size": 6}, tmp_path, n_outputs=1)


@pytest.mark.parametrize("cell", ["RNN", "LSTM"])
def test_absent_y_output(cell, tmp_path):
    """Exporters often drop Y and keep Y_h: outputs ['', 'Y_h'(, 'Y_c')]."""
    ops = operands(cell, seed=95)
    names = ["X", "W", "R", "B"]
    outs = ["", "y_h"] + (["y_c"] if cell == "LSTM" else [])
    node = helper.make_node(cell, names, outs, hidden_size=6)
    model = make_model([node], {"X": ops["X"]}, [o for o in outs if o], {n: ops[n] for n in names[1:]})
    check_model(model, {"X": ops["X"]}, tmp_path)


def test_many_sequences_multiblock(tmp_path):
    """Enough (direction, batch) items and work to split the launch across several blocks."""
    ops = operands("LSTM", seq=10, batch=4, size=16, hidden=32, dirs=2, seed=100)
    ops["sequence_lens"] = np.array([10, 7, 1, 4], np.int32)
    run("LSTM", ops, {"hidden_size": 32, "direction": "bidirectional"}, tmp_path, const=("W", "R", "B", "P"))


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_runtime_sequence_lens_with_empty_sequence(cell, direction, tmp_path):
    """sequence_lens as a graph input; a zero length gives zero Y and zero final states."""
    dirs = 2 if direction == "bidirectional" else 1
    ops = operands(cell, dirs=dirs, seed=110)
    ops["sequence_lens"] = np.array([0, 3, 5], np.int32)
    if cell != "LSTM":
        del ops["initial_c"], ops["P"]
    run(cell, ops, {"hidden_size": 6, "direction": direction}, tmp_path, const=("W", "R", "B", "P"))
