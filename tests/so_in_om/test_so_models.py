"""All four SoBinTypes end to end: detection packs only what a model needs from the op package
($OM2GEN_OPP_PATH) and its custom-op libraries, the OM2 data/so_bins/ store equals the OM's
SO_BINS partition, the flag and the platform are recorded, and loading hands every SO to its
consumer (constructors ran, symbols callable) for both formats."""
from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import numpy as np
import pytest
from sobuild import HOST, archive_bytes, archive_json, call_int, kind_so, model, rewrite_archive, twin_so

import om2gen
from om2gen.cli.inspect import inspect_archive, render_text
from om2gen.errors import AbiError, ArchiveError, CompileError
from om2gen.formats import op_so_store as so_store
from om2gen.formats.om import proto
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.formats.op_so_store import SoBinType as T
from om2gen.so_in_om import info
from om2gen.so_in_om import loading as so_loader
from om2gen.so_in_om import providers
from om2gen.toolchain import targets

pytestmark = pytest.mark.needs_cc
SUFFIX = info.host_library_suffix("linux", HOST)


@pytest.fixture(scope="module")
def opp(tmp_path_factory):
    """An op package for this machine: what serves Relu/Add is needed by the test model, the rest
    (Softmax, Conv, ...) is not."""
    root = tmp_path_factory.mktemp("opp")
    base = root / HOST
    kind_so(base / "built-in/op_host/libophost_builtin.so", ["Om2Tiling_Relu", "Om2InferShape_Softmax"], tag=1)
    kind_so(base / "vendors/acme/op_host/libacme_tiling.so", ["Om2Tiling_Relu", "Om2InferShape_Relu"], tag=2)
    kind_so(base / "built-in/op_master_device/Ascend-V1-libopmaster.so", ["Om2DeviceTiling_Add"], tag=3)
    kind_so(base / "built-in/op_master_device/libunused.so", ["Om2DeviceTiling_Conv"], tag=4)
    kind_so(base / "vendors/acme/autofuse/libfused_add.so", ["Om2FusedKernel_Add"], tag=5)
    kind_so(base / "vendors/acme/autofuse/guard_check.so", ["Om2GuardCheck"], tag=6)
    kind_so(base / "vendors/zeta/autofuse/libfused_softmax.so", ["Om2FusedKernel_Softmax"], tag=7)
    twin = twin_so(root / "libtwin_all.so", 4.0)
    return root, twin


@pytest.fixture(scope="module")
def compiled(opp, tmp_path_factory):
    root, twin = opp
    d = tmp_path_factory.mktemp("all_four")
    onnx_path = model(d / "m.onnx", ops=("Relu", "Add"), twin=True)
    mp = pytest.MonkeyPatch()
    mp.setenv(providers.ENV_OPP, str(root))
    try:
        return {fmt: om2gen.compile(onnx_path, d / f"m.{fmt}", custom_op_libs=[twin], format=fmt)
                for fmt in ("om2", "om")}
    finally:
        mp.undo()


def test_only_what_the_model_needs_is_packed(compiled, opp):
    meta = archive_json(compiled["om2"], "data/model_0/model_meta.json")
    items = [(i["type"], i["vendor"], i["name"]) for i in meta["so_bins"]["items"]]
    twin = opp[1]
    twin_name = providers.archive_name(twin.name, twin.read_bytes())
    assert items == [
        ("kSpaceRegistry", "vendors/acme", f"libacme_tiling{SUFFIX}"),      # vendor before built-in; suffixed
        ("kOpMasterDevice", "built-in", "Ascend-V1-libopmaster.so"),        # libunused.so (Conv) left out
        ("kAutofuse", "vendors/acme", "libfused_add.so"),                   # zeta's Softmax kernel left out
        ("kAutofuse", "", "guard_check.so"),                                # GE: vendor ""
        ("kCustomOp", "vendors/customize", twin_name),
    ]
    assert meta["so_bins"]["so_in_om_flag"] == 0xF000
    assert meta["custom_ops"]["shared_libs"] == [layout.custom_op_library(twin_name)]
    manifest = archive_json(compiled["om2"], "manifest.json")
    assert manifest["compatibility"]["required_executor_version"] == layout.SO_IN_OM_EXECUTOR_VERSION == "1.1"
    assert manifest["compatibility"]["used_features"] == {"so_in_om": "1.1"}
    listed = {e["name"]: e for e in manifest["entries"]}
    store = archive_bytes(compiled["om2"], layout.SO_STORE)
    assert listed[layout.SO_STORE]["sha256"] == hashlib.sha256(store).hexdigest()
    assert listed[layout.SO_STORE]["compression"] == "stored"
    text = render_text(inspect_archive(compiled["om2"]))
    assert "packed SOs (data/so_bins/op_so_store.bin, so_in_om_flag 0xF000):" in text
    assert f"kSpaceRegistry   vendors/acme/libacme_tiling{SUFFIX}" in text
    assert f"platform (SoInOmInfo): {HOST} linux" in text
    om_text = render_text(inspect_archive(compiled["om"]))
    assert "SO_BINS (so_in_om_flag 0xF000" in om_text and "guard_check.so" in om_text


def test_om2_store_is_the_om_so_bins_partition(compiled):
    om = read_om(compiled["om"])
    store = archive_bytes(compiled["om2"], layout.SO_STORE)
    assert om.partition(PT.SO_BINS) == store
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    assert md.attr["so_in_om_flag"].i == 0xF000
    assert list(md.attr["om_info_list"].list.i)[4] == len(store)
    assert om.header.need_check_os_cpu_info == 1          # host (kSpaceRegistry) code is packed
    assert info.from_model_def(md, "m.om") == info.host_info()
    # the custom-op task names its SO_BINS item
    names = {b.name for b in so_store.load(store) if b.bin_type == T.kCustomOp}
    mtd = proto.ModelTaskDef.FromString(om.partition(PT.TASK_INFO))
    assert {t.kernel.so_name for t in mtd.task if t.kernel.so_name} == names


@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_loading_hands_every_so_to_its_consumer(compiled, fmt):
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    with om2gen.load(compiled[fmt]) as m:
        sos = m._sos
        assert call_int(sos.space_registry.function("Relu")) == 2            # acme's, not built-in's
        assert call_int(sos.space_registry.libraries[0].symbol("om2test_ctor_ran")) == 1
        assert call_int(sos.op_master.function("Add")) == 3
        assert so_loader.op_master_loaded()["built-in"] == ["Ascend-V1-libopmaster.so"]
        assert sos.autofuse.guard_check is not None
        assert call_int(sos.autofuse.function("vendors/acme/libfused_add.so", "Om2FusedKernel_Add")) == 5
        assert [lib.op_types for lib in sos.custom_libraries] == [("Twin",)]
        np.testing.assert_allclose(m.run({"x": x})["z"], 4.0 + x, rtol=1e-6)   # Relu(4) + x
    assert so_loader.op_master_loaded() == {"built-in": [], "custom": []}
    assert not so_loader.SPACE_REGISTRY_CACHE.loaded()


def test_a_model_needing_none_packs_none(opp, tmp_path, monkeypatch):
    monkeypatch.setenv(providers.ENV_OPP, str(opp[0]))
    onnx_path = model(tmp_path / "sig.onnx", ops=("Sigmoid",))
    path = om2gen.compile(onnx_path, tmp_path / "sig.om2")
    meta = archive_json(path, "data/model_0/model_meta.json")
    assert "so_bins" not in meta
    manifest = archive_json(path, "manifest.json")
    assert not any(e["name"].startswith(layout.SO_BINS_DIR) for e in manifest["entries"])
    assert manifest["compatibility"]["required_executor_version"] == layout.BASE_EXECUTOR_VERSION
    om = read_om(om2gen.compile(onnx_path, tmp_path / "sig.om", format="om"))
    assert om.partition(PT.SO_BINS) == b"" and om.header.need_check_os_cpu_info == 0
    assert "so_in_om_flag" not in proto.ModelDef.FromString(om.partition(PT.MODEL_DEF)).attr


def fake_program(op_types):
    return SimpleNamespace(graph_json={"nodes": [{"op_type": t} for t in op_types]}, custom_ops=[])


def test_pack_by_op_type_without_compiling(opp, monkeypatch):
    monkeypatch.setenv(providers.ENV_OPP, str(opp[0]))
    target = targets.default_target()
    pack = providers.pack(fake_program(["Softmax"]), target)
    assert [(b.bin_type, b.vendor, b.name) for b in pack.bins] == [
        (T.kSpaceRegistry, "built-in", f"libophost_builtin{SUFFIX}"),
        (T.kAutofuse, "vendors/zeta", "libfused_softmax.so")]                # zeta has no guard_check.so
    assert pack.flag == 0xA000
    assert providers.pack(fake_program(["Conv", "Add"]), target).flag == 0x6000
    assert providers.pack(fake_program(["Sigmoid"]), target).bins == ()
    monkeypatch.delenv(providers.ENV_OPP)
    assert providers.pack(fake_program(["Relu"]), target).bins == ()


def test_bad_op_package_contents_are_compile_errors(opp, tmp_path, monkeypatch):
    target = targets.default_target()
    root = tmp_path / "opp"
    monkeypatch.setenv(providers.ENV_OPP, str(root))
    junk = root / HOST / "built-in/op_master_device/libjunk.so"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"not an elf")
    with pytest.raises(CompileError, match="libjunk.so in the op package is not an ELF shared object"):
        providers.pack(fake_program(["Relu"]), target)
    junk.unlink()
    host = kind_so(root / HOST / "built-in/op_host/libhost_linux_aarch64.so", ["Om2Tiling_Relu"])
    with pytest.raises(CompileError, match="libhost_linux_aarch64.so: named for linux/aarch64"):
        providers.pack(fake_program(["Relu"]), targets.TARGETS["x86_64"])
    host.unlink()
    monkeypatch.setenv(providers.ENV_OPP, str(tmp_path / "missing"))
    with pytest.raises(CompileError, match="OM2GEN_OPP_PATH=.*missing is not a directory"):
        providers.pack(fake_program(["Relu"]), target)


def _store_edit(change):
    def edit(name, data):
        if name == layout.SO_STORE:
            return change(bytearray(data))
        return data
    return edit


def test_wrong_sos_in_an_archive_are_typed_errors(compiled, tmp_path):
    bins = so_store.load(archive_bytes(compiled["om2"], layout.SO_STORE))

    def restore(replace):
        return lambda data: bytes(so_store.build([replace(b) for b in bins]))

    def unknown_type(data):
        data[4 + 6:4 + 8] = (7).to_bytes(2, "little")     # the first item's so_bin_type
        return bytes(data)
    cases = [
        (_store_edit(unknown_type), ArchiveError, "so_bin_type 7 is not a known SoBinType"),
        (_store_edit(restore(lambda b: so_store.OpSoBin(b.name, b.vendor, b.bin_type, b"junk")
                             if b.bin_type == T.kAutofuse else b)), ArchiveError, "packed kAutofuse .* is not an ELF"),
        (_store_edit(restore(lambda b: so_store.OpSoBin(b.name, b.vendor, b.bin_type,
                                                        b.data[:18] + (183).to_bytes(2, "little") + b.data[20:])
                             if b.bin_type == T.kOpMasterDevice else b)), AbiError, "built for EM_AARCH64"),
        (_store_edit(restore(lambda b: so_store.OpSoBin(b.name, b.vendor, b.bin_type, b.data + b"x")
                             if b.bin_type == T.kCustomOp else b)), ArchiveError,
         "kCustomOp libraries in data/so_bins/op_so_store.bin differ from data/custom_ops/shared_libs/"),
    ]
    for i, (edit, error, pattern) in enumerate(cases):
        broken = rewrite_archive(compiled["om2"], tmp_path / f"broken{i}.om2", edit)
        with pytest.raises(error, match=pattern):
            om2gen.load(broken)

    def lie_about_the_flag(name, data):
        if name == "data/model_0/model_meta.json":
            meta = json.loads(data)
            meta["so_bins"]["so_in_om_flag"] = 0x1000
            return json.dumps(meta).encode()
        return data
    with pytest.raises(ArchiveError, match="so_in_om_flag 0x1000 declares kCustomOp, but the packed SOs are"):
        om2gen.load(rewrite_archive(compiled["om2"], tmp_path / "flag.om2", lie_about_the_flag))
    for value in ("0xF000", True, 61440.0):       # not an int: refused, shown as invalid by inspect
        def flag_of_another_type(name, data, value=value):
            if name == "data/model_0/model_meta.json":
                meta = json.loads(data)
                meta["so_bins"]["so_in_om_flag"] = value
                return json.dumps(meta).encode()
            return data
        broken = rewrite_archive(compiled["om2"], tmp_path / "flag_type.om2", flag_of_another_type)
        with pytest.raises(ArchiveError, match="so_bins.so_in_om_flag must be integer|so_bins must name the store and its so_in_om_flag"):
            om2gen.load(broken)
        assert f"so_in_om_flag {value!r} (invalid)" in render_text(inspect_archive(broken))
    assert so_loader.op_master_loaded() == {"built-in": [], "custom": []}
    assert not so_loader.SPACE_REGISTRY_CACHE.loaded()
