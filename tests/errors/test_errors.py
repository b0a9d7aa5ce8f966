"""Bad input gets one clear, typed error: never a crash, a hang, a partial archive or a temp leak."""
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import make_model, rand
from onnx import TensorProto, helper

import om2gen
from om2gen.formats.om2 import layout

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
SHAPES = {"image": (1, 3, 32, 32)}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.om2"
    om2gen.compile(SAMPLE, path, input_shapes=SHAPES)
    return path


def cli(*args):
    return subprocess.run([sys.executable, "-m", "om2gen", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("om2gen: error: "), proc.stderr
    for n in needles:
        assert n in proc.stderr, (n, proc.stderr)


# ---- compiling ----

def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffthis is not protobuf" * 10)
    with pytest.raises(om2gen.ModelError, match="not an ONNX model"):
        om2gen.compile(bad, tmp_path / "o.om2")
    assert_one_line_error(cli("compile", bad, "-o", tmp_path / "o.om2"), "bad.onnx")
    assert not (tmp_path / "o.om2").exists()


def test_truncated_onnx_file(tmp_path):
    data = SAMPLE.read_bytes()
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(om2gen.ModelError):
        om2gen.compile(bad, tmp_path / "o.om2", input_shapes=SHAPES)


def test_missing_model_file(tmp_path):
    with pytest.raises(om2gen.ModelError, match="no such model file"):
        om2gen.compile(tmp_path / "nope.onnx", tmp_path / "o.om2")


def test_unsupported_op_names_node_type_and_opset(tmp_path):
    # Unique's output shape depends on the data: nothing om2gen can compile statically
    model = make_model([helper.make_node("Unique", ["a"], ["y"], name="my_unique")], {"a": rand(2, 3)}, ["y"],
                       opset=17)
    with pytest.raises(om2gen.UnsupportedOpError) as e:
        om2gen.compile(model, tmp_path / "o.om2")
    msg = str(e.value)
    assert "my_unique" in msg and "Unique" in msg and "opset 17" in msg and "supported operators" in msg
    assert not (tmp_path / "o.om2").exists()


def test_every_unsupported_op_type_is_named_in_one_error(tmp_path):
    """Each unsupported type once, with its node count and a node name, including one inside an If
    branch and one of a custom domain; om2gen's internal operators are not offered as supported."""
    inner = helper.make_graph([helper.make_node("Bernoulli", ["a"], ["o"], name="coin_in_branch")], "b", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Unique", ["a"], ["u1"], name="uniq_a"), helper.make_node("Unique", ["a"], ["u2"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Bar", ["r"], ["y"], name="bar", domain="com.foo"),
             helper.make_node("If", ["flag"], ["z"], then_branch=inner, else_branch=inner)]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [6]) for n in ("u1", "u2", "y")]
                              + [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.foo", 1)])
    with pytest.raises(om2gen.UnsupportedOpError) as e:
        om2gen.compile(model, tmp_path / "o.om2")
    msg = str(e.value)
    assert "uses 3 operator types om2gen does not support" in msg, msg
    assert "Unique (opset 17; 2 nodes, e.g. 'uniq_a')" in msg, msg
    assert "com.foo.Bar (opset 1; node 'bar')" in msg and "Bernoulli (opset 17; 2 nodes, e.g. 'coin_in_branch')" in msg
    assert "custom_op_libs=" in msg and "supported operators: Abs," in msg
    assert "Fused" not in msg and "om2gen." not in msg.split("supported operators:")[1], msg
    assert not (tmp_path / "o.om2").exists()


@pytest.mark.parametrize("op_type", ["FusedConv", "NoSuchOp"])
def test_a_node_of_om2gens_own_domain_is_refused(op_type, tmp_path):
    """om2gen's fused operators are made by its passes only, whatever attributes a node claims
    (FusedElementwise: tests/passes/test_fusion_elementwise.py)."""
    node = helper.make_node(op_type, ["x", "w"], ["y"], name="mine", domain="om2gen", activation="Relu")
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [onnx.numpy_helper.from_array(rand(3, 2, 1, 1), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("om2gen", 1)])
    refusal = f"node 'mine': om2gen.{op_type} is in the domain of om2gen's own fused operators"
    with pytest.raises(om2gen.UnsupportedOpError, match=refusal):
        om2gen.compile(model, tmp_path / "o.om2")
    assert not (tmp_path / "o.om2").exists()


def test_missing_input_shape_names_the_input(tmp_path):
    """Python's error speaks of input_shapes=, the CLI's of --input-shape; both show an example."""
    with pytest.raises(om2gen.ShapeError, match=r"'image'.*input_shapes=\{'image': \(1, 3, 32, 32\)\}") as e:
        om2gen.compile(SAMPLE, tmp_path / "o.om2")
    assert "--input" not in str(e.value)
    assert_one_line_error(cli("compile", SAMPLE, "-o", tmp_path / "o.om2"), "image", "--input-shape image:1,3,32,32")


def test_input_shape_for_unknown_input(tmp_path):
    """A misspelled name is reported first (not the unpinned input it left), with the model's inputs."""
    for shapes in ({"img": (1, 3, 32, 32)}, {"img": (1, 3, 32, 32), **SHAPES}):
        with pytest.raises(om2gen.ShapeError) as e:
            om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes=shapes)
        msg = str(e.value)
        assert msg.startswith("input_shapes= names 'img', which the model does not have"), msg
        assert "image[batch,3,32,32]" in msg and "did you mean 'image'" in msg and "--input" not in msg, msg
    proc = cli("compile", SAMPLE, "-o", tmp_path / "o.om2", "--input-shape", "img:1,3,32,32")
    assert_one_line_error(proc, "--input-shape names 'img'", "image[batch,3,32,32]")
    assert "pin" not in proc.stderr and "input_shapes" not in proc.stderr, proc.stderr


def test_input_value_for_unknown_input(tmp_path):
    with pytest.raises(om2gen.ShapeError, match=r"^input_values= names 'imag'.*image\[batch,3,32,32\]"):
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes=SHAPES, input_values={"imag": 1})
    proc = cli("compile", SAMPLE, "-o", tmp_path / "o.om2", "--input-value", "imag=1;image=0")
    assert_one_line_error(proc, "--input-value names 'imag'", "image[batch,3,32,32]")


def test_atc_input_shape_list_with_an_unknown_name(tmp_path):
    """ATC's one-flag form is read, not dropped: its second name is checked like any other."""
    proc = cli("compile", SAMPLE, "-o", tmp_path / "o.om2", "--input-shape", "image:1,3,32,32;b:1,10")
    assert_one_line_error(proc, "--input-shape names 'b'", "its inputs are: image[batch,3,32,32]")
    proc = cli("compile", SAMPLE, "-o", tmp_path / "o.om2", "--input-shape", "image:1,3,32,32;image:1,3,32,16")
    assert_one_line_error(proc, "gives 'image' twice")


def test_input_shape_that_is_not_a_shape(tmp_path):
    with pytest.raises(om2gen.ShapeError, match=r"input_shapes= gives 'image' the shape '1,3,32,32'"):
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes={"image": "1,3,32,32"})


def test_input_shape_of_wrong_rank(tmp_path):
    with pytest.raises(om2gen.ShapeError, match="rank"):
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes={"image": (1, 3, 32)})


def test_bad_input_shape_syntax():
    proc = cli("compile", SAMPLE, "-o", "/tmp/x.om2", "--input-shape", "image:1,a")
    assert proc.returncode != 0 and "dims must be integers" in proc.stderr


def test_verbose_after_the_subcommand_shows_the_traceback(tmp_path):
    args = ["compile", SAMPLE, "-o", tmp_path / "o.om2", "--input-shape", "img:1,3,32,32"]
    for argv in (["--verbose", *args], [*args, "--verbose"]):
        proc = cli(*argv)
        assert proc.returncode != 0 and "Traceback" in proc.stderr and "ShapeError" in proc.stderr, proc.stderr
    assert_one_line_error(cli(*args), "'img'")   # and without it, one line


def test_format_contradicting_the_extension_is_refused(tmp_path):
    with pytest.raises(om2gen.Om2Error, match=r"format='om' asks for a classic OM file, but the output x.om2") as e:
        om2gen.compile(SAMPLE, tmp_path / "x.om2", input_shapes=SHAPES, format="om")
    assert "name the file x.om" in str(e.value) and "--format" not in str(e.value)
    proc = cli("compile", SAMPLE, "-o", tmp_path / "x.om", "--format", "om2", "--input-shape", "image:1,3,32,32")
    assert_one_line_error(proc, "--format om2 asks for an OM2 archive", "x.om", "name the file x.om2")
    proc = cli("compile-op", "Relu", "--input", "x:float32:2,3", "-o", tmp_path / "r.om2", "--format", "om")
    assert_one_line_error(proc, "--format om asks for a classic OM file", "r.om2")
    assert not list(tmp_path.iterdir())


def test_compiler_failure_shows_command_and_output(tmp_path, fresh_cache, monkeypatch):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho 'fakecc: internal compiler error: out of coffee' >&2\nexit 4\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))  # every temp dir om2gen makes lands here
    with pytest.raises(om2gen.CompileError) as e:
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes=SHAPES)
    msg = str(e.value)
    assert "out of coffee" in msg and "command:" in msg and "fakecc" in msg
    assert not (tmp_path / "o.om2").exists()
    assert not list(tmp_path.glob(".o.om2*"))
    assert list(private_tmp.iterdir()) == []


def test_missing_compiler(tmp_path, fresh_cache, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-om2")
    with pytest.raises(om2gen.CompileError, match="CC=no-such-compiler-om2"):
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes=SHAPES)


def test_unknown_target(tmp_path):
    with pytest.raises(om2gen.AbiError, match="unknown --target"):
        om2gen.compile(SAMPLE, tmp_path / "o.om2", input_shapes=SHAPES, target="mips")


def test_output_into_missing_directory(tmp_path):
    with pytest.raises(om2gen.Om2Error, match="does not exist"):
        om2gen.compile(SAMPLE, tmp_path / "no" / "o.om2", input_shapes=SHAPES)


# ---- loading ----

def rewrite(src: Path, dst: Path, edit) -> Path:
    """Copies an archive, letting edit(name, bytes) change entries (None drops one)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info, data)
    return dst


def edit_manifest(fn):
    def edit(name, data):
        if name == layout.MANIFEST:
            m = json.loads(data)
            fn(m)
            return json.dumps(m).encode()
        return data
    return edit


@pytest.mark.parametrize("content", [b"", b"PK", b"hello world, not a zip", b"\x7fELF" + bytes(100)])
def test_foreign_or_tiny_file(tmp_path, content):
    p = tmp_path / "x.om2"
    p.write_bytes(content)
    with pytest.raises(om2gen.ArchiveError):
        om2gen.load(p)


def test_truncated_archive(tmp_path, good):
    data = good.read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        p = tmp_path / f"cut{cut}.om2"
        p.write_bytes(data[:cut])
        with pytest.raises(om2gen.ArchiveError):
            om2gen.load(p)
    assert_one_line_error(cli("run", p, "--input", "image=x.npy"), "cut")


def test_zip_without_manifest(tmp_path):
    p = tmp_path / "plain.om2"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(om2gen.ArchiveError, match="no manifest.json"):
        om2gen.load(p)


def test_missing_entry(tmp_path, good):
    p = rewrite(good, tmp_path / "m.om2", lambda n, d: None if n.endswith(".o") else d)
    with pytest.raises(om2gen.ArchiveError, match="missing"):
        om2gen.load(p)


def test_tampered_kernel_fails_digest_check(tmp_path, good):
    def flip(name, data):
        if name.endswith(".o"):
            b = bytearray(data)
            b[len(b) // 2] ^= 0xFF
            return bytes(b)
        return data
    with pytest.raises(om2gen.ArchiveError, match="does not match its blake3 digest"):
        om2gen.load(rewrite(good, tmp_path / "t.om2", flip))


def test_tampered_library_fails_digest_check(tmp_path, good):
    def flip(name, data):
        return data[:100] + bytes([data[100] ^ 1]) + data[101:] if name.endswith("_om2.so") else data
    with pytest.raises(om2gen.ArchiveError, match="does not match its blake3 digest"):
        om2gen.load(rewrite(good, tmp_path / "t.om2", flip))


def test_other_abi_version(tmp_path, good):
    p = rewrite(good, tmp_path / "abi.om2", edit_manifest(lambda m: m.update(abi_version=99)))
    with pytest.raises(om2gen.AbiError, match="ABI 99"):
        om2gen.load(p)


def test_other_isa(tmp_path, good):
    p = rewrite(good, tmp_path / "isa.om2",
                edit_manifest(lambda m: m["target"]["isa_features"].append("avx10_imaginary")))
    with pytest.raises(om2gen.AbiError, match="avx10_imaginary"):
        om2gen.load(p)


def test_other_arch(tmp_path, good):
    p = rewrite(good, tmp_path / "arch.om2", edit_manifest(lambda m: m["target"].update(arch="riscv64")))
    with pytest.raises(om2gen.AbiError, match="riscv64"):
        om2gen.load(p)


def test_newer_format_major(tmp_path, good):
    p = rewrite(good, tmp_path / "fmt.om2", edit_manifest(lambda m: m.update(format_version="2.0")))
    with pytest.raises(om2gen.ArchiveError, match="format"):
        om2gen.load(p)


# ---- running ----

@pytest.fixture(scope="module")
def model(good):
    with om2gen.load(good) as m:
        yield m


def test_wrong_input_name(model):
    with pytest.raises(om2gen.InputError, match="unknown input.*'img'.*missing input.*'image'"):
        model.run({"img": np.zeros((1, 3, 32, 32), np.float32)})


def test_wrong_input_count(model):
    with pytest.raises(om2gen.InputError, match="unknown input"):
        model.run({"image": np.zeros((1, 3, 32, 32), np.float32), "extra": np.zeros(1, np.float32)})
    with pytest.raises(om2gen.InputError, match="missing input"):
        model.run({})


def test_wrong_input_dtype(model):
    with pytest.raises(om2gen.InputError, match="float64.*float32"):
        model.run({"image": np.zeros((1, 3, 32, 32), np.float64)})


def test_wrong_input_shape(model):
    with pytest.raises(om2gen.InputError, match=r"\[1, 3, 64, 64\].*input_shapes=\{'image': \(1, 3, 64, 64\)\}"):
        model.run({"image": np.zeros((1, 3, 64, 64), np.float32)})


def test_model_still_runs_after_errors(model):
    out = model.run({"image": np.zeros((1, 3, 32, 32), np.float32)})["probs"]
    assert out.shape == (1, 10) and abs(float(out.sum()) - 1.0) < 1e-5


def test_cli_run_bad_input_file(tmp_path, good):
    (tmp_path / "bad.npy").write_bytes(b"garbage")
    assert_one_line_error(cli("run", good, "--input", f"image={tmp_path / 'bad.npy'}"), "cannot read")


def test_cli_run_wrong_input_name(tmp_path, good):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    assert_one_line_error(cli("run", good, "--input", f"img={tmp_path / 'x.npy'}"), "img")


def test_newer_required_executor(tmp_path, good):
    p = rewrite(good, tmp_path / "req.om2",
                edit_manifest(lambda m: m["compatibility"].update(required_executor_version="1.7")))
    with pytest.raises(om2gen.ArchiveError, match="needs executor 1.7.*upgrade om2gen"):
        om2gen.load(p)


def test_other_kernel_abi(tmp_path, good):
    p = rewrite(good, tmp_path / "kabi.om2", edit_manifest(lambda m: m.update(kernel_abi_version=7)))
    with pytest.raises(om2gen.AbiError, match="kernel ABI 7"):
        om2gen.load(p)


@pytest.mark.parametrize("meta", [b"[]", b'{"inputs": 3}', b"not json",
                                  b'{"inputs": [{"name": "x", "dtype": "complex256", "shape": [1]}], "outputs": [], '
                                  b'"library": "x.so", "kernels": []}'])
def test_malformed_model_meta(tmp_path, good, meta):
    p = rewrite(good, tmp_path / "meta.om2", lambda n, d: meta if n.endswith("model_meta.json") else d)
    # the manifest's size/digest of model_meta no longer match: either check may fire first
    with pytest.raises(om2gen.ArchiveError):
        om2gen.load(p)


def test_malformed_model_meta_with_consistent_manifest(tmp_path, good):
    import hashlib

    import blake3
    bad = b'{"inputs": "nope"}'

    def edit(name, data):
        if name.endswith("model_meta.json"):
            return bad
        if name == layout.MANIFEST:
            m = json.loads(data)
            for e in m["entries"]:
                if e["name"].endswith("model_meta.json"):
                    e["size"], e["sha256"], e["blake3"] = len(bad), hashlib.sha256(bad).hexdigest(), blake3.blake3(bad).hexdigest()
            return json.dumps(m).encode()
        return data
    with pytest.raises(om2gen.ArchiveError, match="model_meta.json: the document must contain"):
        om2gen.load(rewrite(good, tmp_path / "meta2.om2", edit))


def test_run_time_shape_advice_speaks_the_callers_language(tmp_path):
    """om2gen.load(...).run() from Python names input_shapes=; `om2gen run` names --input-shape."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(1, 4)}, ["y"])
    path = tmp_path / "relu.om2"
    om2gen.compile(model, path)
    with om2gen.load(path) as m, pytest.raises(om2gen.InputError, match=r"input_shapes=\{'x': \(2, 4\)\}"):
        m.run({"x": np.zeros((2, 4), np.float32)})
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    r = subprocess.run([sys.executable, "-m", "om2gen", "run", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                        "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--input-shape x:2,4" in r.stderr, r.stderr
