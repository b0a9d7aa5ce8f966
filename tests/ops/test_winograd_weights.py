"""Winograd's transformed weights made at load (a load task, docs/performance.md) against stored ones:
the same bytes (so the same outputs, bit for bit), a smaller archive, a typed error when the model
buffer cannot be allocated, and the per-layer choice."""
from __future__ import annotations

import json
import struct
import zipfile

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run, rand, refresh_digests
from onnx import helper

import om2gen
from om2gen.formats.om2 import layout
from om2gen.ops import winograd
from om2gen.toolchain import targets
from om2gen.toolchain.blocking import blocking


def conv_net(c: int, k: int, hw: int, seed: int = 0):
    """Two 3x3 stride-1 convolutions (the first with a bias, then a ReLU): both Winograd-eligible."""
    w1 = rand(k, c, 3, 3, seed=seed) * 0.3
    w2 = rand(k, k, 3, 3, seed=seed + 1) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["y1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    return make_model(nodes, {"x": np.zeros((1, c, hw, hw), np.float32)}, ["y"],
                      {"w1": w1, "b1": rand(k, seed=seed + 2), "w2": w2})


def _meta(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read(layout.model_meta(0)))


def _run(path, x) -> np.ndarray:
    with om2gen.load(path) as m:
        return m.run({"x": x})["y"]


@pytest.mark.parametrize("m, c, k, hw", [(4, 16, 24, 20), (2, 80, 40, 12), (4, 70, 17, 9)])
def test_weights_made_at_load_are_the_stored_bytes(tmp_path, m, c, k, hw):
    """Output channels that fill no whole panel, input channels over several work items: the load
    task's U gives the very outputs of the stored U, and both ORT's."""
    model = conv_net(c, k, hw)
    x = rand(1, c, hw, hw, seed=7)
    outs = {}
    for mode in ("stored", "load"):
        path = om2gen.compile(model, tmp_path / f"{mode}.om2", winograd=m, winograd_weights=mode)
        outs[mode] = _run(path, x)
        loads = _meta(path).get("load_tasks", [])
        assert [t["node"] for t in loads] == ([] if mode == "stored" else [n.name for n in model.graph.node
                                                                           if n.op_type == "Conv"])
    assert np.array_equal(outs["stored"], outs["load"])
    assert_close(outs["load"], ort_run(model, {"x": x})[0], "load-time Winograd weights")


def test_the_load_form_is_smaller_and_deterministic(tmp_path):
    model = conv_net(64, 64, 16)
    stored = om2gen.compile(model, tmp_path / "stored.om2", winograd=4, winograd_weights="stored")
    load = om2gen.compile(model, tmp_path / "load.om2", winograd=4, winograd_weights="load")
    again = om2gen.compile(model, tmp_path / "again.om2", winograd=4, winograd_weights="load")
    # U of F(4x4, 3x3) is 36/9 = 4 times the raw filters: the two layers' 3 x 147 KiB less
    assert stored.stat().st_size - load.stat().st_size > 2 * 64 * 64 * 9 * 4 * 2
    assert load.read_bytes() == again.read_bytes()
    manifest = json.loads(zipfile.ZipFile(load).read(layout.MANIFEST))
    assert manifest["options"]["winograd_weights"] == "load"


def test_inspect_names_the_layers_transformed_at_load(tmp_path, capsys):
    from om2gen.cli.entry import main
    path = om2gen.compile(conv_net(16, 24, 12), tmp_path / "m.om2", winograd=4, winograd_weights="load")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "load tasks" in out and "WinogradWeights" in out, out


def test_a_model_buffer_that_cannot_be_allocated_is_a_runtime_failure(tmp_path):
    """The model library's size of a model buffer raised past what any allocation can give: the
    load fails with a typed error naming the buffer and the node, and nothing crashes."""
    path = om2gen.compile(conv_net(16, 24, 12), tmp_path / "m.om2", winograd=4, winograd_weights="load")
    sizes = [b["size"] for b in _meta(path)["model_buffers"]]
    with zipfile.ZipFile(path) as z:
        entries = {i.filename: z.read(i) for i in z.infolist()}
    lib_name = next(n for n in entries if n.endswith("_om2.so"))
    lib = entries[lib_name]
    # kModelBufferSizes: the buffers' sizes back to back, as uint64
    table = struct.pack(f"<{len(sizes)}Q", *sizes)
    assert lib.count(table) == 1, "the sizes table is not in the library's data once"
    entries[lib_name] = lib.replace(table, struct.pack(f"<{len(sizes)}Q", 1 << 62, *sizes[1:]))
    entries[layout.MANIFEST] = json.dumps(refresh_digests(json.loads(entries[layout.MANIFEST]), entries)).encode()
    edited = tmp_path / "edited.om2"
    with zipfile.ZipFile(edited, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    with pytest.raises(om2gen.RuntimeFailure, match=r"allocating model buffer 0 \(4611686018427387904 bytes, "
                                                    r"written by load task \"conv1\"\) failed"):
        om2gen.load(edited)


def test_a_classic_om_stores_the_transformed_weights(tmp_path):
    with pytest.raises(om2gen.Om2Error, match="a classic .om has no load tasks"):
        om2gen.compile(conv_net(16, 24, 12), tmp_path / "m.om", winograd=4, winograd_weights="load")
    path = om2gen.compile(conv_net(16, 24, 12), tmp_path / "m.om", winograd=4)
    x = rand(1, 16, 12, 12, seed=3)
    assert_close(_run(path, x), ort_run(conv_net(16, 24, 12), {"x": x})[0], "an .om's Winograd convolutions")


def test_the_cost_model_makes_big_layers_at_load_and_keeps_small_ones():
    bl = blocking(targets.get_target(None))
    assert winograd.weights_at_load(256, 256, 4, bl)          # 9 MiB of U from 2.25 MiB of filters
    assert winograd.weights_at_load(256, 256, 2, bl)          # 4 MiB from 2.25
    assert not winograd.weights_at_load(64, 64, 2, bl)        # 256 KiB from 144: not worth a task
    assert not winograd.weights_at_load(16, 3, 4, bl)         # 7 KiB: the task's fixed cost outweighs it
    assert winograd.weights_at_load(16, 3, 4, bl, "load") and not winograd.weights_at_load(256, 256, 4, bl, "stored")


def test_a_setting_that_is_none_is_refused(tmp_path):
    with pytest.raises(om2gen.Om2Error, match="winograd_weights='later' is not a setting"):
        om2gen.compile(conv_net(16, 24, 12), tmp_path / "m.om2", winograd_weights="later")


def test_gears_share_one_load_task_per_layer(tmp_path):
    """Each gear's graph holds its own copy of the filters: equal ones make one load task and one
    model buffer, which every gear's Winograd kernel reads."""
    model = conv_net(16, 24, 12)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    path = om2gen.compile(model, tmp_path / "g.om2", input_shapes={"x": (-1, 16, 12, 12)}, dynamic_batch_size=[1, 2],
                          winograd=4, winograd_weights="load")
    meta = _meta(path)
    assert len(meta["load_tasks"]) == 2 and len(meta["model_buffers"]) == 2
    for n in (1, 2):
        x = rand(n, 16, 12, 12, seed=n)
        assert_close(_run(path, x), ort_run(model, {"x": x})[0], f"gear of batch {n}")


def test_every_kernel_set_transforms_at_load(tmp_path):
    """Two kernel sets: the raw filters are the same bytes for both (stored once), each set's load
    task packs them for its own GEMM blocking."""
    model = conv_net(16, 24, 12)
    path = om2gen.compile(model, tmp_path / "ks.om2", target="x86_64-avx2,x86_64-avx512", winograd=4,
                          winograd_weights="load")
    x = rand(1, 16, 12, 12, seed=5)
    ref = ort_run(model, {"x": x})[0]
    for isa in ("x86_64-avx2", "x86_64-avx512"):
        if isa == "x86_64-avx512" and "avx512f" not in open("/proc/cpuinfo").read():
            continue
        with om2gen.load(path, isa=isa) as m:
            assert_close(m.run({"x": x})["y"], ref, f"kernel set {isa}")


def test_the_command_line_option(tmp_path, capsys):
    import onnx

    from om2gen.cli.entry import main
    src = tmp_path / "m.onnx"
    onnx.save(conv_net(16, 24, 12), str(src))
    out = tmp_path / "m.om2"
    assert main(["compile", str(src), "-o", str(out), "--winograd", "4", "--winograd-weights", "load", "-q"]) == 0
    assert len(_meta(out)["load_tasks"]) == 2
    assert json.loads(zipfile.ZipFile(out).read(layout.MANIFEST))["options"]["winograd_weights"] == "load"
