"""Several kernel sets in one archive (--target x86_64-avx2,x86_64-avx512): each set runs and
matches ONNX Runtime, the loader picks the best the CPU supports or the forced one, equal
constants are stored once, and the archive is deterministic (docs/archive-format.md §2, *Several kernel sets*)."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, make_model, ort_run, rand, refresh_digests
from onnx import helper

import om2gen
from om2gen.cli.inspect import inspect_archive, render_text
from om2gen.formats.om2 import layout, writer
from om2gen.toolchain import targets

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
SHAPES = {"image": (1, 3, 32, 32)}
SETS = "x86_64-avx2,x86_64-avx512"
AVX2_ONLY = frozenset({"sse2", "avx", "avx2", "fma", "bmi2"})

pytestmark = pytest.mark.skipif(targets.host_arch() != "x86_64" or targets.missing_features("x86_64", AVX2_ONLY),
                                reason="needs an x86_64 CPU with AVX2")


def runs_here(name: str) -> bool:
    t = targets.TARGETS[name]
    return not targets.missing_features(t.arch, t.isa_features)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The sample CNN with both sets: its convolutions' packed weights differ per set (the register
    tile's rows, MR, are 6 for AVX2 and 16 for AVX-512)."""
    path = tmp_path_factory.mktemp("sets") / "cnn.om2"
    om2gen.compile(SAMPLE, path, input_shapes=SHAPES, target=SETS)
    return path


def matmul_model():
    """A MatMul whose packed constant (B panels of NR = 16 columns) is the same bytes for both sets."""
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                      {"x": rand(4, 256)}, ["z"], {"w": rand(256, 256, seed=1)})


@pytest.fixture(scope="module")
def matmul(tmp_path_factory):
    d = tmp_path_factory.mktemp("mm")
    model = matmul_model()
    om2gen.compile(model, d / "both.om2", target=SETS)
    om2gen.compile(model, d / "both_again.om2", target=["x86_64-avx512", "x86_64-avx2"])   # a list, other order
    for name in SETS.split(","):
        om2gen.compile(model, d / f"{name}.om2", target=name)
    return d, model


def entries(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_layout_and_manifest(cnn):
    files = entries(cnn)
    manifest = json.loads(files["manifest.json"])
    assert manifest["model_num"] == 2
    assert [m["target"]["name"] for m in manifest["models"]] == SETS.split(",")
    assert manifest["target"]["name"] == "x86_64-avx2"   # the baseline: model 0
    assert manifest["options"]["target"] == SETS
    compat = manifest["compatibility"]
    assert compat["used_features"][layout.MULTI_ISA_FEATURE] == compat["required_executor_version"] == "1.3"
    for i, name in enumerate(SETS.split(",")):
        meta = json.loads(files[layout.model_meta(i)])
        assert meta["kernels"] and all(k.startswith(f"data/kernels_{name}/") and k in files for k in meta["kernels"])
        assert meta["library"].startswith(layout.model_dir(i)) and meta["library"] in files
        assert meta["constants_config"] == layout.constants_config(i)
    assert not any(n.startswith("data/kernels_x86_64/") for n in files)
    # one blob: set 0's constants, then those of set 1 that set 0 has not (the convolutions'
    # weights, packed per register tile), equal ones at set 0's offsets
    blob = files[layout.constants_blob(0)]
    assert layout.constants_blob(1) not in files
    configs = [json.loads(files[layout.constants_config(i)]) for i in range(2)]
    assert all(c["internal_weight_size"] == len(blob) for c in configs)
    assert all({c["file_name"] for c in config["consts"].values()} == {"constants_0"} for config in configs)
    ranges = [{(c["offset"], c["size"]) for c in config["consts"].values()} for config in configs]
    own_end = max(o + n for o, n in ranges[0])
    assert ranges[0] & ranges[1] and any(o >= own_end for o, _ in ranges[1] - ranges[0])


@pytest.mark.parametrize("isa", [None, "x86_64-avx2", "x86_64-avx512"])
def test_each_set_matches_onnxruntime(cnn, isa):
    if isa is not None and not runs_here(isa):
        pytest.skip(f"this CPU cannot run {isa}")
    import onnx
    x = rand(*SHAPES["image"], seed=3)
    ref = ort_run(onnx.load(SAMPLE), {"image": x})
    with om2gen.load(cnn, isa=isa) as m:
        assert m.kernel_sets == SETS.split(",")
        assert m.isa == (isa or ("x86_64-avx512" if runs_here("x86_64-avx512") else "x86_64-avx2"))
        got = m.run({"image": x})
    for (name, value), r in zip(got.items(), ref):
        assert_close(value, r, f"{name} ({isa})")


def test_environment_forces_a_set(cnn, monkeypatch):
    monkeypatch.setenv("OM2GEN_ISA", "x86_64-avx2")
    with om2gen.load(cnn) as m:
        assert m.isa == "x86_64-avx2"
    if runs_here("x86_64-avx512"):
        with om2gen.load(cnn, isa="x86_64-avx512") as m:   # the load option wins
            assert m.isa == "x86_64-avx512"


def test_forced_set_the_archive_lacks(cnn, monkeypatch):
    with pytest.raises(om2gen.AbiError, match=r"isa='x86_64' names a kernel set the model does not carry; it carries "
                                              r"x86_64-avx2, x86_64-avx512.*--target x86_64-avx2,x86_64-avx512,x86_64"):
        om2gen.load(cnn, isa="x86_64")
    monkeypatch.setenv("OM2GEN_ISA", "neon")
    with pytest.raises(om2gen.AbiError, match="OM2GEN_ISA=neon names a kernel set the model does not carry"):
        om2gen.load(cnn)


def test_cpu_without_avx512(cnn, monkeypatch):
    """On a CPU without AVX-512 the loader runs the AVX2 set, and forcing AVX-512 is refused."""
    monkeypatch.setattr(targets, "host_features", lambda: AVX2_ONLY)
    with om2gen.load(cnn) as m:
        assert m.isa == "x86_64-avx2"
        x = rand(*SHAPES["image"], seed=4)
        with om2gen.load(cnn, isa="x86_64-avx2") as forced:
            np.testing.assert_array_equal(m.run({"image": x})["probs"], forced.run({"image": x})["probs"])
    with pytest.raises(om2gen.AbiError, match=r"isa='x86_64-avx512', but this CPU lacks avx512bw, avx512cd, avx512dq, "
                                              r"avx512f, avx512vl for it; it runs x86_64-avx2"):
        om2gen.load(cnn, isa="x86_64-avx512")
    monkeypatch.setattr(targets, "host_features", lambda: frozenset({"sse2"}))
    with pytest.raises(om2gen.AbiError, match="carries kernel sets x86_64-avx2, x86_64-avx512, and this CPU runs none"):
        om2gen.load(cnn)


def test_inspect_shows_every_set(cnn, monkeypatch):
    info = inspect_archive(cnn)
    assert info["kernel_sets"] == SETS.split(",")
    assert [m["target"]["name"] for m in info["models"]] == SETS.split(",")
    text = render_text(info)
    assert "model 0 [x86_64-avx2]: sample_cnn" in text and "model 1 [x86_64-avx512]: sample_cnn" in text
    monkeypatch.setenv("OM2GEN_ISA", "x86_64-avx2")
    assert "this CPU runs x86_64-avx2 (model 0, forced by OM2GEN_ISA)" in render_text(inspect_archive(cnn))


def test_single_set_archive_and_forcing(tmp_path, monkeypatch):
    path = tmp_path / "one.om2"
    om2gen.compile(matmul_model(), path, target="x86_64-avx2")
    manifest = json.loads(entries(path)["manifest.json"])
    assert manifest["model_num"] == 1 and "target" not in manifest["models"][0]
    assert layout.MULTI_ISA_FEATURE not in manifest["compatibility"]["used_features"]
    monkeypatch.setenv("OM2GEN_ISA", "x86_64-avx2")
    with om2gen.load(path) as m:
        assert (m.isa, m.kernel_sets) == ("x86_64-avx2", ["x86_64-avx2"])
    monkeypatch.setenv("OM2GEN_ISA", "x86_64-avx512")
    with pytest.raises(om2gen.AbiError, match="it carries x86_64-avx2"):
        om2gen.load(path)


def test_constants_shared_one_by_one(cnn, tmp_path):
    """The union of the sets' constants is smaller than their two blobs: what both have is stored
    once, and each set reads its own constants right (test_each_set_matches_onnxruntime)."""
    singles = []
    for name in SETS.split(","):
        om2gen.compile(SAMPLE, tmp_path / f"{name}.om2", input_shapes=SHAPES, target=name)
        singles.append(len(entries(tmp_path / f"{name}.om2")[layout.constants_blob(0)]))
    union = len(entries(cnn)[layout.constants_blob(0)])
    assert max(singles) <= union < sum(singles)


def test_equal_constants_are_stored_once(matmul):
    d, model = matmul
    files = entries(d / "both.om2")
    assert layout.constants_blob(0) in files and layout.constants_blob(1) not in files
    config = json.loads(files[layout.constants_config(1)])
    assert {c["file_name"] for c in config["consts"].values()} == {"constants_0"}
    blob = len(files[layout.constants_blob(0)])
    assert blob == 256 * 256 * 4
    singles = sum((d / f"{n}.om2").stat().st_size for n in SETS.split(","))
    assert (d / "both.om2").stat().st_size <= singles - blob
    x = rand(4, 256, seed=5)
    ref = ort_run(model, {"x": x})[0]
    for isa in SETS.split(","):
        if runs_here(isa):
            with om2gen.load(d / "both.om2", isa=isa) as m:
                assert_close(m.run({"x": x})["z"], ref, isa)


def test_deterministic_whatever_the_order(matmul):
    d, _ = matmul
    assert (d / "both.om2").read_bytes() == (d / "both_again.om2").read_bytes()


def test_a_set_is_the_single_target_compile(matmul):
    """Model i of the merged archive is the single-target archive's model 0: the same library,
    kernels and constants, moved (here every constant is shared, so none moves inside the blob)."""
    d, _ = matmul
    both = entries(d / "both.om2")
    for i, name in enumerate(SETS.split(",")):
        one = entries(d / f"{name}.om2")
        meta, single = json.loads(both[layout.model_meta(i)]), json.loads(one[layout.model_meta(0)])
        assert both[meta["library"]] == one[single["library"]]
        assert [both[k] for k in meta["kernels"]] == [one[k] for k in single["kernels"]]
        assert meta["inputs"] == single["inputs"] and meta["work_size"] == single["work_size"]


def test_classic_om_refuses_several_sets(tmp_path):
    with pytest.raises(om2gen.CompileError, match=r"target='x86_64-avx2,x86_64-avx512': a classic .om carries one "
                                                  r"kernel set \(GE's TBE_KERNELS partition\); write an .om2"):
        om2gen.compile(matmul_model(), tmp_path / "m.om", target=SETS)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value, error", [
    ("x86_64-avx2,aarch64", "mixes CPU architectures"),
    ("x86_64-avx2,", "names no target"),
    ("x86_64-avx2,mips", "unknown --target 'mips'"),
    ([], "names no target"),
])
def test_bad_target_lists(value, error):
    with pytest.raises(om2gen.AbiError, match=error):
        targets.get_targets(value)


def test_command_line(tmp_path):
    out = tmp_path / "cli.om2"
    r = subprocess.run([sys.executable, "-m", "om2gen", "compile", str(SAMPLE), "-o", str(out), "-q",
                        "--input-shape", "image:1,3,32,32", "--soc_version", "x86_64-avx512,x86_64-avx2"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "om2gen", "inspect", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "kernel sets: x86_64-avx2, x86_64-avx512; this CPU runs" in r.stdout
    r = subprocess.run([sys.executable, "-m", "om2gen", "compile", str(SAMPLE), "-o", str(tmp_path / "m.om"), "-q",
                        "--input-shape", "image:1,3,32,32", "--target", SETS], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and f"--target {SETS}: a classic .om carries one kernel set" in r.stderr


def test_bench_names_the_set_it_timed(matmul, monkeypatch):
    from om2gen.cli import bench, bench_report
    d, _ = matmul
    monkeypatch.setenv("OM2GEN_ISA", "x86_64-avx2")
    r = bench.measure(d / "both.om2", threads=1, runs=1, warmup=0, loads=1)
    assert (r["kernel_set"], r["kernel_sets"]) == ("x86_64-avx2", SETS.split(","))
    assert "(OM2, kernel set x86_64-avx2 of x86_64-avx2, x86_64-avx512)" in bench_report.render_text(r)


def test_dynamic_model_sets_keep_their_own_tiling_libraries(tmp_path):
    """A dynamic model's device tiling library is built per target: each set gets its own
    OpSoStore, and both run at any shape in the range."""
    model = matmul_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    path = tmp_path / "dyn.om2"
    om2gen.compile(model, path, input_shapes={"x": ("1~16", 256)}, target=SETS)
    files = entries(path)
    assert layout.SO_STORE in files and layout.so_store(1) in files
    assert json.loads(files[layout.model_meta(1)])["so_bins"]["store"] == layout.so_store(1)
    for isa in SETS.split(","):
        if runs_here(isa):
            with om2gen.load(path, isa=isa) as m:
                for n in (3, 16):
                    x = rand(n, 256, seed=n)
                    assert_close(m.run({"x": x})["z"], ort_run(model, {"x": x})[0], f"{isa} n={n}")


def test_signed_archive_of_several_sets(cnn, tmp_path):
    from om2gen.formats.om2 import signing
    key, pub = signing.keygen(tmp_path / "k.pem")
    signed = signing.sign_archive(cnn, signing.private_key(key), tmp_path / "signed.om2")
    with om2gen.load(signed, trusted_keys=[pub], isa="x86_64-avx2") as m:
        assert m.signed_by and m.isa == "x86_64-avx2"


def edited(src, dst, edit):
    """A copy of the archive `src` with edit(files) applied and the digests recomputed: the edit
    looks genuine, so what the loader checks after the digests is what the test reaches."""
    files = entries(src)
    manifest = json.loads(files.pop(layout.MANIFEST))
    edit(manifest, files)
    refresh_digests(manifest, files)
    writer.write(dst, [writer.Entry(layout.MANIFEST, writer.json_bytes(manifest))]
                 + [writer.Entry(n, d) for n, d in sorted(files.items())])
    return dst


def test_models_that_are_no_kernel_sets(cnn, tmp_path):
    bad = edited(cnn, tmp_path / "bad.om2", lambda m, files: m["models"][1].pop("target"))
    with pytest.raises(om2gen.ArchiveError, match="holds 2 models that are not kernel sets of one model"):
        om2gen.load(bad)


def test_config_naming_a_missing_blob(cnn, tmp_path):
    index = 1 if runs_here("x86_64-avx512") else 0   # the set a load here runs

    def edit(manifest, files):
        name = layout.constants_config(index)
        config = json.loads(files[name])
        for c in config["consts"].values():
            c["file_name"] = "constants_7"
        files[name] = writer.json_bytes(config)
    bad = edited(cnn, tmp_path / "bad.om2", edit)
    with pytest.raises(om2gen.ArchiveError, match="names no constants blob of the archive"):
        om2gen.load(bad)
