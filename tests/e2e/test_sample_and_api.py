"""End to end: the sample model, the Python API, the CLI, capture/replay."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run, rand
from onnx import helper

import om2gen
from om2gen.native import lib

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"


@pytest.fixture(scope="module")
def sample_om2(sample_cnn_debug):
    return sample_cnn_debug


def test_sample_matches_onnxruntime(sample_om2):
    import onnx
    image = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with om2gen.load(sample_om2) as m:
        assert [(t.name, t.dtype, t.shape) for t in m.inputs] == [("image", np.float32, (1, 3, 32, 32))]
        assert [(t.name, t.shape) for t in m.outputs] == [("probs", (1, 10))]
        got = m.run({"image": image})["probs"]
    assert_close(got, ort_run(onnx.load(SAMPLE), {"image": image})[0])


def test_load_captures_once_and_run_replays(sample_om2):
    with om2gen.load(sample_om2) as m:
        tasks = m.meta["stats"]["tasks"]
        image = np.zeros((1, 3, 32, 32), np.float32)
        before = lib.om2rtGetLaunchCount()
        m.run({"image": image})
        m.run({"image": image})
        assert lib.om2rtGetLaunchCount() - before == 2 * tasks


def test_load_does_not_execute_kernels(sample_om2):
    before = lib.om2rtGetLaunchCount()
    with om2gen.load(sample_om2):
        assert lib.om2rtGetLaunchCount() == before


def test_runs_with_new_buffers_each_time(sample_om2):
    """Each run passes new input/output addresses; results must follow the inputs."""
    with om2gen.load(sample_om2) as m:
        outs = [m.run({"image": np.full((1, 3, 32, 32), v, np.float32)})["probs"] for v in (0.0, 1.0, 0.0)]
    assert np.array_equal(outs[0], outs[2])
    assert not np.array_equal(outs[0], outs[1])


def test_non_contiguous_input_is_accepted(sample_om2):
    image = np.random.default_rng(2).standard_normal((1, 32, 32, 3)).astype(np.float32).transpose(0, 3, 1, 2)
    with om2gen.load(sample_om2) as m:
        a = m.run({"image": image})["probs"]
        b = m.run({"image": np.ascontiguousarray(image)})["probs"]
    assert np.array_equal(a, b)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_give_identical_results(sample_om2, threads):
    image = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with om2gen.load(sample_om2, threads=1) as m:
        ref = m.run({"image": image})["probs"]
    with om2gen.load(sample_om2, threads=threads) as m:
        assert np.array_equal(m.run({"image": image})["probs"], ref)


def test_two_models_share_kernel_binaries(sample_om2):
    from om2gen.native import lib as native
    with om2gen.load(sample_om2):
        n1 = native.om2x_bin_store_size()
        with om2gen.load(sample_om2):
            assert native.om2x_bin_store_size() == n1
    assert native.om2x_bin_store_size() == 0


def test_close_is_idempotent_and_run_after_close_fails(sample_om2):
    m = om2gen.load(sample_om2)
    m.close()
    m.close()
    with pytest.raises(om2gen.RuntimeFailure):
        m.run({"image": np.zeros((1, 3, 32, 32), np.float32)})


def test_no_runtime_memory_leaks_across_load_unload(sample_om2):
    base = lib.om2rtGetLiveAllocationCount()
    for _ in range(3):
        with om2gen.load(sample_om2) as m:
            m.run({"image": np.zeros((1, 3, 32, 32), np.float32)})
    assert lib.om2rtGetLiveAllocationCount() == base


def test_graph_outputs_that_alias_inputs_and_constants(tmp_path):
    """Outputs that are a graph input, a constant, a reshape of an input, or listed twice."""
    x = rand(2, 3)
    nodes = [helper.make_node("Identity", ["x"], ["same"]),
             helper.make_node("Reshape", ["x", "shape"], ["flat"]),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["r2"]),
             helper.make_node("Identity", ["k"], ["kout"])]
    model = make_model(nodes, {"x": x}, ["same", "flat", "r", "r2", "kout"],
                       {"shape": np.array([6], np.int64), "k": rand(4, seed=5)})
    om2gen.compile(model, tmp_path / "m.om2")
    with om2gen.load(tmp_path / "m.om2") as m:
        got = m.run({"x": x})
    for name, ref in zip(["same", "flat", "r", "r2", "kout"], ort_run(model, {"x": x})):
        assert_close(got[name], ref, name)


def test_multiple_inputs_and_outputs_mlp(tmp_path):
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "bias"], ["hb"]),
             helper.make_node("Tanh", ["hb"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["y"]),
             helper.make_node("Sigmoid", ["y"], ["p"])]
    feeds = {"x": rand(8, 16), "bias": rand(32, seed=4)}
    model = make_model(nodes, feeds, ["y", "p"], {"w1": w1, "w2": w2})
    om2gen.compile(model, tmp_path / "mlp.om2")
    with om2gen.load(tmp_path / "mlp.om2") as m:
        got = m.run(feeds)
    for name, ref in zip(["y", "p"], ort_run(model, feeds)):
        assert_close(got[name], ref, name)


def run_cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "om2gen", *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_compile_run_inspect(tmp_path):
    out = tmp_path / "s.om2"
    run_cli("compile", SAMPLE, "-o", out, "--input-shape", "image:1,3,32,32", "--debug")
    image = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    proc = run_cli("run", out, "--input", f"image={tmp_path / 'image.npy'}", "--output-dir", tmp_path / "o")
    assert "probs: float32[1, 10]" in proc.stdout
    import onnx
    assert_close(np.load(tmp_path / "o" / "probs.npy"), ort_run(onnx.load(SAMPLE), {"image": image})[0])

    text = run_cli("inspect", out).stdout
    for needle in ("image", "probs", "Conv", "Softmax", "kernels_", "manifest.json", "k000_Conv"):
        assert needle in text, needle
    info = json.loads(run_cli("inspect", out, "--json").stdout)
    model = info["models"][0]
    assert model["inputs"][0]["shape"] == [1, 3, 32, 32]
    assert {"Conv", "Gemm", "Softmax"} <= set(model["ops"])
    assert len(model["tasks"]) == model["stats"]["tasks"]
    assert all(e["size"] >= 0 for e in info["entries"])


def test_inspect_without_debug_lists_tasks(tmp_path):
    out = tmp_path / "s.om2"
    om2gen.compile(SAMPLE, out, input_shapes={"image": (1, 3, 32, 32)})
    info = json.loads(run_cli("inspect", out, "--json").stdout)
    assert len(info["models"][0]["tasks"]) == info["models"][0]["stats"]["tasks"] > 0


def test_scalar_zero_size_and_int_passthrough(tmp_path):
    from helpers import check_model
    cases = [
        ([helper.make_node("Add", ["a", "b"], ["y"])],
         {"a": np.array(1.5, np.float32), "b": np.array(2.0, np.float32)}),
        ([helper.make_node("Relu", ["a"], ["y"])], {"a": np.zeros((0, 3), np.float32)}),
        ([helper.make_node("Identity", ["a"], ["y"])], {"a": np.arange(5)}),
        ([helper.make_node("Relu", ["a"], ["y"])], {"a": rand(3), "unused": rand(2)}),
    ]
    for i, (nodes, feeds) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        check_model(make_model(nodes, feeds, ["y"]), feeds, d)


def test_run_async_on_a_stream(sample_om2):
    """GertModelRunAsync: replays are queued on a user stream; back-to-back runs with different
    buffers each get their own results (a queued replay is not overwritten by the next run)."""
    from om2gen.native import ffi
    rng = np.random.default_rng(7)
    images = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(3)]
    with om2gen.load(sample_om2) as m:
        refs = [m.run({"image": im})["probs"] for im in images]
        outs = [np.zeros((1, 10), np.float32) for _ in images]
        stream = ffi.new("aclrtStream *")
        assert lib.aclrtCreateStream(stream) == 0
        keep = []
        try:
            for im, out in zip(images, outs):
                keep += [ffi.from_buffer(im), ffi.from_buffer(out)]
                run = m._runs[0]
                run.in_t[0].data, run.out_t[0].data = keep[-2:]
                assert lib.om2x_model_run_async(m._ep, m._handle, stream[0], run.cfg) == 0
            assert lib.aclrtSynchronizeStream(stream[0]) == 0
        finally:
            lib.aclrtDestroyStream(stream[0])
    for out, ref in zip(outs, refs):
        assert np.array_equal(out, ref)


def test_different_models_loaded_one_after_another_and_together(tmp_path, sample_om2):
    """Each model library is its own object even when memfd numbers are reused."""
    paths = []
    for i, op in enumerate(["Relu", "Sigmoid", "Tanh"]):
        model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": rand(4)}, ["y"])
        paths.append((tmp_path / f"{op}.om2", model))
        om2gen.compile(model, paths[-1][0])
    x = rand(4, low=-3, high=3)
    for path, model in paths:  # sequential: load, run, close
        with om2gen.load(path) as m:
            assert_close(m.run({"x": x})["y"], ort_run(model, {"x": x})[0])
    loaded = [om2gen.load(p) for p, _ in paths]  # together
    try:
        for m, (_, model) in zip(loaded, paths):
            assert_close(m.run({"x": x})["y"], ort_run(model, {"x": x})[0])
    finally:
        for m in loaded:
            m.close()


def test_in_memory_loader_never_aliases_libraries(sample_om2):
    """Two different shared objects loaded back to back (same memfd number) are two objects."""
    import zipfile

    from om2gen.native import ffi
    with zipfile.ZipFile(sample_om2) as z:
        blobs = [z.read(n) for n in sorted(z.namelist()) if n.endswith(".o")][:2]
    handles = []
    err = ffi.new("char[]", 256)
    for i, blob in enumerate(blobs):
        h = ffi.new("void **")
        assert lib.om2x_dlopen_from_memory(blob, len(blob), f"k{i}".encode(), 0, h, err, 256) == 0, ffi.string(err)
        handles.append(h[0])
    try:
        assert handles[0] != handles[1]
    finally:
        for h in handles:
            lib.om2x_dlclose(h)


def test_input_value_freezes_a_shape_input(tmp_path):
    """A Reshape whose target shape is a model input compiles once that input is frozen."""
    x = rand(2, 6)
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       {"x": x, "shape": np.array([3, 4], np.int64)}, ["y"])
    with pytest.raises(om2gen.ShapeError, match=r"input_values=\{'shape': V\}"):
        om2gen.compile(model, tmp_path / "a.om2")
    om2gen.compile(model, tmp_path / "a.om2", input_values={"shape": [3, 4]})
    with om2gen.load(tmp_path / "a.om2") as m:
        assert [t.name for t in m.inputs] == ["x"]
        assert_close(m.run({"x": x})["y"], x.reshape(3, 4))
    import onnx
    onnx.save(model, tmp_path / "a.onnx")
    run_cli("compile", tmp_path / "a.onnx", "-o", tmp_path / "b.om2", "--input-value", "shape=4,3", "-q")
    with om2gen.load(tmp_path / "b.om2") as m:
        assert m.outputs[0].shape == (4, 3)


def test_cli_input_shape_in_atcs_form_and_repeated(tmp_path):
    """--input-shape "a:2,3;b:2,3" (ATC's form: one flag, ';' between inputs) pins both inputs, as
    repeated flags do, and both forms mix; so does --input-value "k=2;j=1"."""
    import onnx
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "k"], ["t"]),
             helper.make_node("Sub", ["t", "j"], ["y"])]
    model = make_model(nodes, {"a": rand(2, 3), "b": rand(2, 3), "k": np.array(2, np.float32),
                               "j": np.array(1, np.float32)}, ["y"])
    for vi in [*model.graph.input[:2], model.graph.output[0]]:
        vi.type.tensor_type.shape.dim[0].dim_param = "n"
    onnx.save(model, tmp_path / "ab.onnx")
    feeds = {"a": rand(2, 3, seed=1), "b": rand(2, 3, seed=2)}
    ref = ort_run(model, {**feeds, "k": np.array(2, np.float32), "j": np.array(1, np.float32)})[0]
    for i, flags in enumerate([["--input-shape", "a:2,3;b:2,3", "--input-value", "k=2;j=1"],
                               ["--input-shape", "a:2,3", "--input-shape", "b:2,3;", "--input-value", "k=2",
                                "--input-value", "j=1"]]):
        run_cli("compile", tmp_path / "ab.onnx", "-o", tmp_path / f"ab{i}.om2", *flags, "-q")
        with om2gen.load(tmp_path / f"ab{i}.om2") as m:
            assert [t.name for t in m.inputs] == ["a", "b"], m.inputs
            assert_close(m.run(feeds)["y"], ref, " ".join(flags))


def test_output_format_follows_the_extension(tmp_path):
    """-o x.om without --format writes a classic OM file, .om2 (and any other name) an OM2 archive."""
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = ort_run(__import__("onnx").load(str(SAMPLE)), {"image": x})[0]
    for name, fmt in (("m.om", "om"), ("m.OM2", "om2"), ("m.bin", "om2")):
        run_cli("compile", SAMPLE, "-o", tmp_path / name, "--input-shape", "image:1,3,32,32", "-q")
        with om2gen.load(tmp_path / name) as m:
            assert m.format == fmt, (name, m.format)
            assert_close(m.run({"image": x})["probs"], ref, name)
    om2gen.compile(SAMPLE, tmp_path / "api.om", input_shapes={"image": (1, 3, 32, 32)})
    with om2gen.load(tmp_path / "api.om") as m:
        assert m.format == "om"


def test_backend_runs_and_freezes_inputs_it_must():
    from om2gen.backend import Om2Backend
    x = rand(2, 6)
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       {"x": x, "shape": np.array([3, 4], np.int64)}, ["y"])
    assert Om2Backend.supports_device("CPU") and not Om2Backend.supports_device("CUDA")
    rep = Om2Backend.prepare(model)
    try:
        (y,) = rep.run([x, np.array([3, 4], np.int64)])
        assert y.shape == (3, 4)
        (y,) = rep.run([x, np.array([4, 3], np.int64)])  # another frozen value: compiled again
        assert y.shape == (4, 3)
    finally:
        rep.close()
