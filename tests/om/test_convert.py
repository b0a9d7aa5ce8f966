"""om2gen convert: a classic OM → an OM2 archive holding the same kernels, weights and tasks."""
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import om2gen
from om2gen.cli.convert import convert
from om2gen.formats.om import kernel_store
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ModelPartitionType as PT

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
SHAPES = {"image": (1, 3, 32, 32)}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    om = om2gen.compile(SAMPLE, d / "model.om", input_shapes=SHAPES, format="om")
    return {"om": om, "om2": convert(om, d / "model.om2"), "dir": d}


def test_converted_archive_runs_like_the_om(converted):
    x = {"image": np.random.default_rng(0).standard_normal(SHAPES["image"]).astype(np.float32)}
    with om2gen.load(converted["om"]) as a, om2gen.load(converted["om2"]) as b:
        assert b.format == "om2" and a.inputs == b.inputs and a.outputs == b.outputs
        ra, rb = a.run(x), b.run(x)
    assert ra.keys() == rb.keys() and all(np.array_equal(ra[k], rb[k]) for k in ra)


def test_kernels_and_weights_are_the_oms_own(converted):
    f = read_om(converted["om"])
    kernels = dict(kernel_store.load(f.partition(PT.TBE_KERNELS)))
    with zipfile.ZipFile(converted["om2"]) as z:
        for name, binary in kernels.items():
            assert z.read(layout.kernel_binary("x86_64", f"{name}.o")) == binary
        assert z.read(layout.constants_blob(0)) == f.partition(PT.WEIGHTS_DATA)
        tables = next(n for n in z.namelist() if n.endswith(layout.TABLES_SOURCE_SUFFIX))
        text = z.read(tables).decode()
        build = json.loads(z.read(layout.build_commands(0)))
    digest = hashlib.sha256(f.partition(PT.MODEL_DEF)).hexdigest()
    assert f"Source model: classic OM (MODEL_DEF partition), sha256 {digest}" in text
    assert all("TBE_KERNELS" in cmd for cmd in build["kernels"].values())


def test_convert_is_deterministic(converted, tmp_path):
    again = convert(converted["om"], tmp_path / "again.om2")
    assert again.read_bytes() == converted["om2"].read_bytes()


def test_runtime_if_converts(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from test_control import runtime_if_model
    om = om2gen.compile(runtime_if_model(), tmp_path / "if.om", format="om")
    om2 = convert(om, tmp_path / "if.om2")
    rng = np.random.default_rng(5)
    with om2gen.load(om) as a, om2gen.load(om2) as b:
        for cond in (True, False):
            feeds = {t.name: (np.array(cond).reshape(t.shape) if t.dtype == np.bool_
                              else rng.standard_normal(t.shape).astype(t.dtype)) for t in a.inputs}
            ra, rb = a.run(feeds), b.run(feeds)
            assert all(np.array_equal(ra[k], rb[k]) for k in ra)


def test_cli_convert_and_bad_input_leaves_nothing(converted, tmp_path):
    out = tmp_path / "cli.om2"
    r = subprocess.run([sys.executable, "-m", "om2gen", "convert", str(converted["om"]), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and out.read_bytes() == converted["om2"].read_bytes(), r.stderr
    bad = tmp_path / "bad.om"
    bad.write_bytes(converted["om"].read_bytes()[:-10])
    target = tmp_path / "never.om2"
    r = subprocess.run([sys.executable, "-m", "om2gen", "convert", str(bad), "-o", str(target)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "om2gen: error:" in r.stderr and "model_length" in r.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"cli.om2", "bad.om"}   # no partial output, no temp file
    with pytest.raises(om2gen.ArchiveError, match="not an OM file"):
        convert(converted["om2"], tmp_path / "x.om2")


def test_convert_refuses_an_om_output_name(converted, tmp_path):
    with pytest.raises(om2gen.Om2Error, match=r"writes an OM2 archive.*x\.om2"):
        convert(converted["om"], tmp_path / "x.om")
    assert list(tmp_path.iterdir()) == []
