"""samples/acl/infer.py, a pyACL-shaped script, runs the sample CNN from an .om2 archive and from
a classic .om file and gives ONNX Runtime's answer both ways."""
import importlib.util
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import FORMATS, ROOT, SAMPLE
from helpers import assert_close, ort_run

SCRIPT = ROOT / "samples" / "acl" / "infer.py"


@pytest.fixture(scope="module")
def infer():
    spec = importlib.util.spec_from_file_location("acl_infer_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(image):
    return ort_run(onnx.load(SAMPLE), {"image": image})[0]


@pytest.mark.parametrize("use_async", [False, True], ids=["execute", "execute_async"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_script_matches_onnxruntime(infer, sample_models, fmt, use_async, tmp_path, capsys):
    image = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    argv = [str(sample_models[fmt]), "--image", str(tmp_path / "image.npy"), "--save", str(tmp_path / "probs.npy")]
    assert infer.main(argv + (["--async"] if use_async else [])) == 0
    probs = np.load(tmp_path / "probs.npy")
    assert_close(probs, _reference(image), f"{fmt} probs")
    assert capsys.readouterr().out.startswith("image 0: top-5 classes ")


def test_both_formats_agree_on_every_run(infer, sample_models):
    """One AclModel per format, several images each: equal results, bit for bit."""
    rng = np.random.default_rng(3)
    images = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(3)]
    results = {}
    for fmt in FORMATS:
        net = infer.AclModel()
        try:
            net.load(str(sample_models[fmt]))
            assert [t["name"] for t in net.inputs] == ["image"] and net.inputs[0]["shape"] == (1, 3, 32, 32)
            assert [t["name"] for t in net.outputs] == ["probs"] and net.outputs[0]["shape"] == (1, 10)
            results[fmt] = [net.infer([im])[0] for im in images]
        finally:
            net.release()
    for a, b, im in zip(results["om2"], results["om"], images):
        assert np.array_equal(a, b)
        assert_close(a, _reference(im))


@pytest.mark.slow
def test_script_command_line(sample_models, tmp_path):
    for fmt in FORMATS:
        out = tmp_path / f"{fmt}.npy"
        run = subprocess.run([sys.executable, str(SCRIPT), str(sample_models[fmt]), "--save", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        image = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
        assert_close(np.load(out), _reference(image))


def test_script_reports_a_bad_model(infer, tmp_path, capsys):
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"IMOD" + bytes(60))
    assert infer.main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "acl.mdl.load_from_file failed with error 100013" in err and "acl.mdl.load_from_file: " in err
    assert infer.main([str(tmp_path / "missing.om2")]) == 1
    assert "error 145002" in capsys.readouterr().err
