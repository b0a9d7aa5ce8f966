"""Element-wise fusion of dynamic models (docs/dynamic-shapes.md): each group is decided on its
own, so a question the ranges do not decide drops one group, not the pass; one archive per model,
checked against ONNX Runtime at several sizes."""
import json
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import assert_close, ort_run

import om2gen
from om2gen.errors import InputError
from om2gen.formats import op_so_store
from om2gen.formats.om2 import layout
from om2gen.formats.op_so_store import SoBinType


def _model(nodes, inputs: dict, outputs: dict, inits=()):
    return helper.make_model(helper.make_graph(
        nodes, "dynfuse", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs.items()], list(inits)),
        opset_imports=[helper.make_opsetid("", 17)])


def _gated(rows: str):
    """A GELU of x[N, 3, 8] (five element-wise nodes), times a gate g = relu(w) + 1 of shape
    [1, 3, 1] (cheap, recomputed per element if the budget allows: N*24 - 3 extra evaluations),
    and a second output x * col (col[N, 3, 1] broadcast along the rows)."""
    c = {k: numpy_helper.from_array(np.array(v, np.float32), k) for k, v in
         (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"], name="gelu/div"),
             helper.make_node("Erf", ["d"], ["e"], name="gelu/erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="gelu/add"),
             helper.make_node("Mul", ["x", "a"], ["m"], name="gelu/mul"),
             helper.make_node("Mul", ["m", "half"], ["h"], name="gelu/mul_half"),
             helper.make_node("Relu", ["w"], ["rw"], name="gate/relu"),
             helper.make_node("Add", ["rw", "one"], ["g"], name="gate/add"),
             helper.make_node("Mul", ["h", "g"], ["y"], name="gated"),
             helper.make_node("Mul", ["x", "col"], ["z"], name="column")]
    return _model(nodes, {"x": [rows, 3, 8], "col": [rows, 3, 1], "w": [1, 3, 1]},
                  {"y": [rows, 3, 8], "z": [rows, 3, 8]}, c.values())


def _compile(model, path, hi: int):
    shapes = {"x": (f"1~{hi}", 3, 8), "col": (f"1~{hi}", 3, 1), "w": (1, 3, 1)}
    om2gen.compile(model, path, input_shapes=shapes, debug=True)
    with zipfile.ZipFile(path) as z:
        nodes = json.loads(z.read(layout.ge_model_json(0)))["nodes"]
        tasks = json.loads(z.read(layout.task_info_json(0)))["tasks"]
    return {n["name"]: n for n in nodes}, [t for t in tasks if t["type"] == "MODEL_TASK_KERNEL"]


def _check_against_ort(model, path, sizes):
    rng = np.random.default_rng(5)
    with om2gen.load(path) as m:
        for n in sizes:
            feeds = {"x": rng.standard_normal((n, 3, 8)).astype(np.float32),
                     "col": rng.standard_normal((n, 3, 1)).astype(np.float32),
                     "w": rng.standard_normal((1, 3, 1)).astype(np.float32)}
            for name, want in zip(("y", "z"), ort_run(model, feeds)):
                assert_close(m.run(feeds)[name], want, f"{name} at N={n}", 1e-5)


def test_a_dynamic_model_fuses_its_groups(tmp_path):
    """With N in 1~40 the gate's recomputation costs at most 40*24 - 3 evaluations (within the
    budget at every size): the GELU, the gate and the product are one kernel, x * col another."""
    model = _gated("N")
    nodes, tasks = _compile(model, tmp_path / "m.om2", 40)
    fused = [n for n in nodes.values() if n["op_type"] == "FusedElementwise"]
    assert sorted(len(n["fused_from"]) for n in fused) == [8]
    assert [t["op_type"] for t in tasks].count("FusedElementwise") == 1 and len(tasks) == 2
    _check_against_ort(model, tmp_path / "m.om2", (1, 40, 7, 23))


def test_an_undecidable_budget_drops_only_that_member(tmp_path):
    """With N in 1~4000 the ranges do not decide whether recomputing the gate stays within the
    budget (24*N - 3 <= 4096 holds only up to N = 170): the gate is left to its own kernel, and
    the GELU with the product is still fused, as before the whole pass was dropped."""
    model = _gated("N")
    nodes, tasks = _compile(model, tmp_path / "m.om2", 4000)
    fused = sorted(sorted(n["fused_from"]) for n in nodes.values() if n["op_type"] == "FusedElementwise")
    assert fused == [["gate/add", "gate/relu"],
                     ["gated", "gelu/add", "gelu/div", "gelu/erf", "gelu/mul", "gelu/mul_half"]]
    assert len(tasks) == 3      # unfused: 9 kernels
    _check_against_ort(model, tmp_path / "m.om2", (1, 4000, 171, 170, 9))


def _store(path):
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read(layout.model_meta(0)))
        return meta, op_so_store.load(z.read(layout.SO_STORE)), z.read(layout.csrc_dir(0) + "autofuse.c").decode()


def test_the_fused_nodes_name_the_autofuse_library_packed_as_kautofuse(tmp_path):
    """The seed's rule: a node with bin_file_path makes the model need kAutofuse (0x2000), beside
    the device tiling library's kOpMasterDevice (0x4000): GE's 0x6000. No assumption was made,
    so there is no guard_check.so."""
    nodes, _ = _compile(_gated("N"), tmp_path / "m.om2", 40)
    meta, bins, source = _store(tmp_path / "m.om2")
    assert meta["so_bins"]["so_in_om_flag"] == 0x6000
    (lib,) = [b for b in bins if b.bin_type == SoBinType.kAutofuse]
    assert lib.vendor == "vendors/om2gen" and lib.name.startswith("libom2_autofuse_")
    fused = [n for n in nodes.values() if n["op_type"] == "FusedElementwise"]
    assert [n["attrs"]["bin_file_path"] for n in fused] == [f"vendors/om2gen/{lib.name}"]
    assert "Om2AutofuseInferShape_gated__fused8" in source and "Om2AutofuseTiling_gated__fused8" in source


def _equal_dims_model():
    """x[N, S] + m[N, T] (distinct dim names, as torch.onnx often exports two inputs' sequence
    axes), times 2, then Relu: the compile takes S == T, the fused kernel reads m with S's
    strides, and guard_check.so checks S == T before every run."""
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [helper.make_node("Add", ["x", "m"], ["a"], name="add"), helper.make_node("Mul", ["a", "two"], ["b"],
             name="double"), helper.make_node("Relu", ["b"], ["y"], name="relu")]
    return _model(nodes, {"x": ["N", "S"], "m": ["N", "T"]}, {"y": ["N", "S"]}, [two])


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    path = tmp_path_factory.mktemp("guard") / "g.om2"
    om2gen.compile(_equal_dims_model(), path, input_shapes={"x": ("1~4", "1~64"), "m": ("1~4", "1~64")}, debug=True)
    return path


def test_two_dims_taken_equal_run_against_onnx_runtime(guarded):
    model = _equal_dims_model()
    rng = np.random.default_rng(1)
    with om2gen.load(guarded) as m:
        for n, s in ((1, 1), (4, 64), (3, 17), (2, 5)):
            feeds = {"x": rng.standard_normal((n, s)).astype(np.float32),
                     "m": rng.standard_normal((n, s)).astype(np.float32)}
            assert_close(m.run(feeds)["y"], ort_run(model, feeds)[0], f"y at N={n}, S=T={s}", 1e-6)


def test_a_run_violating_the_guard_is_a_clear_error(guarded):
    """S = 5 and T = 7 are each in range (the executor's checks pass); the guard names the fused
    node, the assumption and where each dim comes from. The model still runs afterwards."""
    with om2gen.load(guarded) as m:
        ok = {"x": np.ones((2, 5), np.float32), "m": np.ones((2, 5), np.float32)}
        with pytest.raises(InputError, match=r"fused node 'relu::fused3' \(it fuses add, double, relu\) was compiled "
                                             r"assuming S == T \(S is dim 1 of input x; T is dim 1 of input m\), "
                                             r".*this run has S = 5 and T = 7"):
            m.run(dict(ok, m=np.ones((2, 7), np.float32)))
        np.testing.assert_array_equal(m.run(ok)["y"], np.full((2, 5), 4.0, np.float32))


def test_the_guard_check_so_is_packed_by_the_seeds_rule(guarded):
    meta, bins, source = _store(guarded)
    autofuse = [(b.name, b.vendor) for b in bins if b.bin_type == SoBinType.kAutofuse]
    assert autofuse[1] == ("guard_check.so", "") and autofuse[0][1] == "vendors/om2gen"
    assert meta["so_bins"]["so_in_om_flag"] & 0x2000
    with zipfile.ZipFile(guarded) as z:
        assert b"sym_S != sym_T" in z.read(layout.csrc_dir(0) + "guard_check.c")
        # the same check compiled into the model library: GertModelRun runs it, whoever calls it
        tables = next(n for n in z.namelist() if n.endswith("_tables.cpp"))
        assert b"int32_t GuardCheck(" in z.read(tables) and b"sym_S != sym_T" in z.read(tables)


def test_the_autofuse_library_infers_shapes_and_tiling(guarded):
    """Loaded as the runtime loads packed SOs (from memory, dispatched by type): InferShape
    broadcasts the fused node's input dims (and refuses dims that do not broadcast), Tiling
    writes the fields the kernel reads (the element count in 'inner')."""
    from om2gen.native import ffi
    from om2gen.so_in_om import loading
    meta, bins, source = _store(guarded)
    packed = loading.load_packed(bins, "test")
    try:
        (key,) = packed.autofuse.buffers
        infer = ffi.cast("int32_t (*)(const int64_t *const *, int64_t *const *, char *, uint64_t)",
                         packed.autofuse.function(key, "Om2AutofuseInferShape_relu__fused3"))
        tiling = ffi.cast("int32_t (*)(const int64_t *, uint64_t, int64_t *, char *, uint64_t)",
                          packed.autofuse.function(key, "Om2AutofuseTiling_relu__fused3"))
        err = ffi.new("char[]", 256)
        inner = next(i for i, line in enumerate(line for line in source.splitlines() if "tiling[" in line)
                     if "/* inner */" in line)
        for n, s, t in ((3, 17, 17), (1, 64, 1), (4, 1, 9)):
            dims = [ffi.new("int64_t[]", [n, s]), ffi.new("int64_t[]", [n, t])]
            out = ffi.new("int64_t[]", 2)
            assert infer(ffi.new("int64_t *[]", dims), ffi.new("int64_t *[]", [out]), err, 256) == 0
            assert list(out) == [n, max(s, t)]
            fields = ffi.new("int64_t[]", 8)
            assert tiling(ffi.new("int64_t[]", [n, s, t]), 3, fields, err, 256) == 0
            assert fields[inner] == n * s
        dims = [ffi.new("int64_t[]", [2, 5]), ffi.new("int64_t[]", [2, 7])]
        assert infer(ffi.new("int64_t *[]", dims), ffi.new("int64_t *[]", [ffi.new("int64_t[]", 2)]), err, 256) == 2
        assert ffi.string(err).decode() == "node relu::fused3: dim 1 of input 1 (m) is 7, which does not broadcast " \
                                           "against 5"
    finally:
        packed.close()


@pytest.mark.slow
def test_bert_base_whose_mask_names_its_sequence_apart_runs_with_a_guard(tmp_path):
    """The suite's BERT-base with attention_mask's sequence axis named mask_len (as torch.onnx
    names two inputs' dynamic axes unless told they are one): where the mask meets the hidden
    states the compile takes S == mask_len, which used to refuse the model; the fused node built
    on it is named when a run breaks it, and equal lengths match ONNX Runtime."""
    import onnx
    from benchmarks import models
    m = onnx.load(str(models.path("bert_base_4l_seq")))
    m.graph.input[1].type.tensor_type.shape.dim[1].dim_param = "mask_len"
    path = tmp_path / "bert.om2"
    om2gen.compile(m, path, input_shapes={"input_ids": (1, "1~256"), "attention_mask": (1, "1~256")})
    meta, bins, _ = _store(path)
    assert [b.name for b in bins if b.bin_type == SoBinType.kAutofuse][1:] == ["guard_check.so"]
    rng = np.random.default_rng(3)
    with om2gen.load(path) as model:
        for s in (7, 256, 1):
            mask = np.ones((1, s), np.int64)
            mask[0, s // 2:] = 0 if s > 1 else 1
            feeds = {"input_ids": rng.integers(0, 1000, (1, s)).astype(np.int64), "attention_mask": mask}
            for got, want in zip(model.run(feeds).values(), ort_run(m, feeds)):
                assert_close(got, want, f"sequence {s}", 1e-4)
        with pytest.raises(InputError, match=r"fused node .* was compiled assuming S == mask_len \(S is dim 1 of "
                                             r"input input_ids; mask_len is dim 1 of input attention_mask\).*"
                                             r"S = 9 and mask_len = 8"):
            model.run({"input_ids": np.zeros((1, 9), np.int64), "attention_mask": np.ones((1, 8), np.int64)})


def test_a_data_dependent_count_keeps_only_its_own_nodes_unfused(tmp_path):
    """NonZero's count may be 0, which no range decides: the element-wise nodes over it stay
    unfused, the static chain next to them is still fused (SLANet's Loop body has such Slices;
    rolling the whole pass back left its backbone's HardSwish chains and a [1,256,256] Tanh as
    separate scalar-libm kernels, 4.6x ONNX Runtime's time)."""
    nodes = [helper.make_node("Add", ["x", "x"], ["s"], name="chain/add"),
             helper.make_node("Tanh", ["s"], ["t"], name="chain/tanh"),
             helper.make_node("Mul", ["t", "x"], ["y"], name="chain/mul"),
             helper.make_node("NonZero", ["x"], ["nz"], name="count"),
             helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT, name="count/cast"),
             helper.make_node("Add", ["nzf", "nzf"], ["n2"], name="count/add"),
             helper.make_node("Neg", ["n2"], ["z"], name="count/neg")]
    model = helper.make_model(helper.make_graph(
        nodes, "countfuse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, None])]),
        opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "count.om2"
    om2gen.compile(model, path, debug=True)
    with zipfile.ZipFile(path) as z:
        nodes_out = json.loads(z.read(layout.ge_model_json(0)))["nodes"]
    fused = [n for n in nodes_out if n["op_type"] == "FusedElementwise"]
    assert len(fused) == 1 and {"chain/add", "chain/tanh", "chain/mul"} <= set(json.dumps(fused[0]).split('"'))
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    x[x < 0.3] = 0.0
    with om2gen.load(path) as m:
        got = m.run({"x": x})
    ref = dict(zip(("y", "z"), ort_run(model, {"x": x})))
    for name in ("y", "z"):
        assert_close(got[name], ref[name], name, 1e-5)
