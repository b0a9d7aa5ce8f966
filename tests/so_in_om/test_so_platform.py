"""SoInOmInfo: recorded at compile time (OM2 manifest, OM MODEL_DEF attrs), checked at load; a
mismatch is an AbiError naming what differs and the override, which then lets the model load."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import refresh_om_digests
from sobuild import HOST, archive_json, edit_manifest, model

import om2gen
from om2gen.cli import main
from om2gen.errors import AbiError, ArchiveError
from om2gen.formats.om import model_def_attrs, proto
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.so_in_om import info as so_in_om
from om2gen.toolchain import targets
from om2gen.version import GENERATOR

HERE = so_in_om.host_info()


def test_info_records_the_target_and_this_om2gen():
    info = so_in_om.info(targets.TARGETS["aarch64"])
    assert info == so_in_om.SoInOmInfo("aarch64", "linux", so_in_om.opp_version(), GENERATOR)
    assert "model-abi" in info.opp_version and "kernel-abi" in info.opp_version
    assert so_in_om.info(targets.default_target()) == HERE
    assert so_in_om.check(HERE, "m.om2") == []
    assert so_in_om.check(None, "m.om2") == []          # models from before the record


@pytest.mark.parametrize("field, value, label", [
    ("cpu_info", "aarch64" if HOST != "aarch64" else "x86_64", "CPU architecture cpu_info="),
    ("os_info", "windows", "OS os_info='windows'"),
    ("opp_version", "om2gen-runtime model-abi 1", "runtime/operator package version opp_version="),
    ("compiler_version", "om2gen 7.0.0", "compiler version compiler_version='om2gen 7.0.0'"),
    ("compiler_version", "gcc 12", "compiler version compiler_version='gcc 12'"),
])
def test_each_difference_is_named_with_the_override(field, value, label):
    recorded = dataclasses.replace(HERE, **{field: value})
    with pytest.raises(AbiError) as info:
        so_in_om.check(recorded, "m.om2")
    message = str(info.value)
    assert message.startswith("m.om2 was compiled for another platform: ") and label in message
    assert f"this machine: {getattr(HERE, field)!r}" in message or "this om2gen" in message
    assert "allow_platform_mismatch=True" in message and "--allow-platform-mismatch" in message
    assert so_in_om.check(recorded, "m.om2", allow_mismatch=True) == so_in_om.differences(recorded)


def test_compiler_release_rule():
    for same in ("om2gen 0.1.0", "om2gen 0.1.99"):
        assert not so_in_om.differences(dataclasses.replace(HERE, compiler_version=same))
    assert so_in_om.differences(dataclasses.replace(HERE, compiler_version="om2gen 0.2.0"))
    assert len(so_in_om.differences(so_in_om.SoInOmInfo("mips", "plan9", "x", "y"))) == 4


def test_malformed_records_are_archive_errors():
    with pytest.raises(ArchiveError, match="so_in_om_info must be an object with string fields"):
        so_in_om.SoInOmInfo.from_json({"cpu_info": "x86_64"}, "m.om2")
    md = proto.ModelDef()
    assert so_in_om.from_model_def(md, "m.om") is None
    md.attr["compiler_version"].s = b"om2gen 0.1.0"           # GE-written OMs carry only this one
    assert so_in_om.from_model_def(md, "m.om") is None
    md.attr["host_env_cpu"].s = b"x86_64"
    with pytest.raises(ArchiveError, match="records the platform only partly .no host_env_os, opp_version"):
        so_in_om.from_model_def(md, "m.om")
    for key in ("host_env_os", "opp_version"):
        md.attr[key].s = b"x"
    md.attr["opp_version"].i = 3
    with pytest.raises(ArchiveError, match="attr opp_version is an int .i., not a string .s.; the model is corrupt"):
        so_in_om.from_model_def(md, "m.om")


def set_kind(attr, kind: str) -> None:
    if kind == "list":
        attr.list.i.append(1)
    else:
        setattr(attr, kind, {"s": b"0x1000", "i": 7, "f": 1.5, "b": True, "bt": b"\x10\x00"}[kind])


KINDS = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "bt": "bytes", "list": "a list"}


@pytest.mark.parametrize("kind", ["s", "f", "b", "bt", "list"])
def test_so_in_om_flag_of_another_kind_is_an_archive_error(kind):
    """Not read as 0 (which hid the packed SOs' declaration): a corrupt model naming the attr and its kind."""
    md = proto.ModelDef()
    assert model_def_attrs.flag_from_model_def(md, "m.om") == 0
    set_kind(md.attr["so_in_om_flag"], kind)
    with pytest.raises(ArchiveError, match=f"m.om: MODEL_DEF attr so_in_om_flag is {KINDS[kind]} .{kind}., not an "
                                           f"int .i.; the model is corrupt"):
        so_in_om.check_flag([], md, "m.om")
    md.attr["so_in_om_flag"].i = 0
    so_in_om.check_flag([], md, "m.om")
    md.attr.pop("so_in_om_flag")
    md.attr["so_in_om_flag"].CopyFrom(proto.ModelDef().attr["x"])      # present without a value
    with pytest.raises(ArchiveError, match="attr so_in_om_flag is empty .no value., not an int"):
        so_in_om.check_flag([], md, "m.om")


@pytest.mark.parametrize("key", list(so_in_om.MODEL_DEF_ATTRS.values()))
@pytest.mark.parametrize("kind", ["i", "b", "list"])
def test_platform_attrs_of_another_kind_are_archive_errors(key, kind):
    md = proto.ModelDef()
    for k in so_in_om.MODEL_DEF_ATTRS.values():
        md.attr[k].s = b"x"
    set_kind(md.attr[key], kind)
    with pytest.raises(ArchiveError, match=f"m.om: MODEL_DEF attr {key} is {KINDS[kind]} .{kind}., not a string"):
        so_in_om.from_model_def(md, "m.om")
    if key == "compiler_version":                 # alone (as GE writes it) it is checked too
        alone = proto.ModelDef()
        set_kind(alone.attr[key], kind)
        with pytest.raises(ArchiveError, match=f"attr {key} is {KINDS[kind]}"):
            so_in_om.from_model_def(alone, "m.om")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("platform")
    onnx_path = model(d / "m.onnx")
    return {fmt: om2gen.compile(onnx_path, d / f"m.{fmt}", format=fmt) for fmt in ("om2", "om")}


def expected(x):
    return np.maximum(x, 0) + x


def test_om2_records_it_in_the_manifest(compiled):
    m = archive_json(compiled["om2"], "manifest.json")
    assert so_in_om.SoInOmInfo.from_json(m["so_in_om_info"], "m") == HERE
    assert m["format_version"] == "1.2"


def test_om_records_it_in_model_def(compiled):
    md = proto.ModelDef.FromString(read_om(compiled["om"]).partition(PT.MODEL_DEF))
    assert so_in_om.from_model_def(md, "m.om") == HERE
    assert md.attr["host_env_cpu"].s.decode() == HOST and md.attr["host_env_os"].s == b"linux"
    assert md.attr["compiler_version"].s.decode() == GENERATOR


@pytest.mark.needs_cc
def test_om2_mismatch_refused_then_overridden(compiled, tmp_path, capsys):
    def change(m):
        m["so_in_om_info"]["opp_version"] = "om2gen-runtime model-abi 0"
    other = edit_manifest(compiled["om2"], tmp_path / "other.om2", change)
    with pytest.raises(AbiError, match="opp_version='om2gen-runtime model-abi 0'.*--allow-platform-mismatch"):
        om2gen.load(other)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    with om2gen.load(other, allow_platform_mismatch=True) as m:
        np.testing.assert_allclose(m.run({"x": x})["z"], expected(x), rtol=1e-6)
    # the CLI: refused (AbiError's exit code), then run with --allow-platform-mismatch
    np.save(tmp_path / "x.npy", x)
    args = ["run", str(other), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path)]
    assert main(args) == AbiError.exit_code
    assert "--allow-platform-mismatch" in capsys.readouterr().err
    assert main(args + ["--allow-platform-mismatch"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), expected(x), rtol=1e-6)


@pytest.mark.needs_cc
def test_om_mismatch_refused_then_overridden(compiled, tmp_path):
    om = read_om(compiled["om"])
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    md.attr["compiler_version"].s = b"om2gen 9.0.0"
    parts = [Partition(PT.MODEL_DEF, md.SerializeToString(deterministic=True)) if p.type == PT.MODEL_DEF else p
             for p in om.partitions]
    other = tmp_path / "other.om"
    write_om(other, refresh_om_digests(parts), header=om.header)
    with pytest.raises(AbiError, match="compiler_version='om2gen 9.0.0'.*allow_platform_mismatch=True"):
        om2gen.load(other)
    x = np.ones((2, 8), np.float32)
    with om2gen.load(other, allow_platform_mismatch=True) as m:
        np.testing.assert_allclose(m.run({"x": x})["z"], expected(x))


@pytest.mark.needs_cc
@pytest.mark.parametrize("kind", ["s", "f"])
def test_om_with_a_non_int_so_in_om_flag_is_refused_by_load_inspect_and_convert(compiled, tmp_path, kind, capsys):
    """om2gen inspect raised a TypeError formatting it; loading read it as 0."""
    om = read_om(compiled["om"])
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    set_kind(md.attr["so_in_om_flag"], kind)
    parts = [Partition(PT.MODEL_DEF, md.SerializeToString(deterministic=True)) if p.type == PT.MODEL_DEF else p
             for p in om.partitions]
    bad = tmp_path / "bad.om"
    write_om(bad, refresh_om_digests(parts), header=om.header)
    pattern = f"MODEL_DEF attr so_in_om_flag is {KINDS[kind]} .{kind}., not an int .i."
    with pytest.raises(ArchiveError, match=pattern):
        om2gen.load(bad)
    from om2gen.cli.inspect import inspect_archive
    with pytest.raises(ArchiveError, match=f"{bad} model 0: {pattern}"):
        inspect_archive(bad)
    capsys.readouterr()
    assert main(["inspect", str(bad)]) == ArchiveError.exit_code
    assert main(["convert", str(bad), "-o", str(tmp_path / "bad.om2"), "-q"]) == ArchiveError.exit_code
    err = capsys.readouterr().err
    assert err.count("so_in_om_flag is") == 2 and "Traceback" not in err
    assert not (tmp_path / "bad.om2").exists()
