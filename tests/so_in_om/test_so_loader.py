"""Load-time dispatch of packed SOs (om2gen/so_in_om/loading.py): each SoBinType reaches its consumer,
loaded from a memfd (never from disk); op-master SOs are deduplicated across models (built-in by
name, custom by content); wrong SOs are typed errors and release what was already loaded."""
from __future__ import annotations

import pytest
from sobuild import HOST, call_int, kind_so, mapping_of, twin_so

from om2gen.errors import AbiError, ArchiveError
from om2gen.formats import op_so_store
from om2gen.formats.op_so_store import OpSoBin, SoBinType
from om2gen.so_in_om import info, loading

pytestmark = pytest.mark.needs_cc
SUFFIX = info.host_library_suffix(info.host_os(), HOST)


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    return {
        "space": kind_so(d / "space.so", ["Om2Tiling_Relu", "Om2InferShape_Relu"], tag=11).read_bytes(),
        "master": kind_so(d / "master.so", ["Om2DeviceTiling_Relu"], tag=21).read_bytes(),
        "master2": kind_so(d / "master2.so", ["Om2DeviceTiling_Relu"], tag=22).read_bytes(),
        "master3": kind_so(d / "master3.so", ["Om2DeviceTiling_Relu"], tag=23).read_bytes(),
        "fused": kind_so(d / "fused.so", ["Om2FusedKernel_Relu"], tag=31).read_bytes(),
        "guard": kind_so(d / "guard.so", ["Om2GuardCheck"], tag=41).read_bytes(),
        "twin": twin_so(d / "libtwin_loader.so", 5.0).read_bytes(),
    }


def all_four(libs) -> list[OpSoBin]:
    return [
        OpSoBin(f"libophost{SUFFIX}", "vendors/acme", SoBinType.kSpaceRegistry, libs["space"]),
        OpSoBin("Ascend-V1-libopmaster.so", "built-in", SoBinType.kOpMasterDevice, libs["master"]),
        OpSoBin("libfused.so", "vendors/acme", SoBinType.kAutofuse, libs["fused"]),
        OpSoBin(info.GUARD_CHECK, "", SoBinType.kAutofuse, libs["guard"]),
        OpSoBin("libtwin_loader.so", "vendors/customize", SoBinType.kCustomOp, libs["twin"]),
    ]


@pytest.fixture(autouse=True)
def nothing_leaks():
    yield
    assert not loading.SPACE_REGISTRY_CACHE.loaded()
    assert loading.op_master_loaded() == {"built-in": [], "custom": []}


def test_each_type_reaches_its_consumer_from_a_memfd(libs):
    packed = loading.load_packed(all_four(libs), "model.om2")
    try:
        # kSpaceRegistry: host infer-shape/tiling functions by op type; its constructor ran
        tiling = packed.space_registry.function("Relu")
        assert call_int(tiling) == 11 and call_int(packed.space_registry.function("Relu", "InferShape")) == 11
        assert packed.space_registry.function("Softmax") == 0
        assert packed.space_registry.op_types() == {"Relu"}
        so = packed.space_registry.libraries[0]
        assert call_int(so.symbol("om2test_ctor_ran")) == 1
        assert "memfd:" in mapping_of(tiling)          # loaded from memory, never from a file
        # kOpMasterDevice
        assert call_int(packed.op_master.function("Relu")) == 21
        assert packed.op_master.unique_names == {"built-in/Ascend-V1-libopmaster.so": "Ascend-V1-libopmaster.so"}
        assert "memfd:" in mapping_of(packed.op_master.function("Relu"))
        # kAutofuse: guard_check.so kept as bytes, fused-kernel libraries loaded on demand
        assert packed.autofuse.guard_check == libs["guard"]
        assert set(packed.autofuse.buffers) == {"vendors/acme/libfused.so"}
        assert packed.autofuse.loaded == {}
        fused = packed.autofuse.function("vendors/acme/libfused.so", "Om2FusedKernel_Relu")
        assert call_int(fused) == 31 and "memfd:" in mapping_of(fused)
        with pytest.raises(Exception, match="no packed autofuse library 'x/y.so'.*vendors/acme/libfused.so"):
            packed.autofuse.load("x/y.so")
        # kCustomOp: the library's own registry, the model's scope
        assert [lib.op_types for lib in packed.custom_libraries] == [("Twin",)]
        assert packed.custom_by_name["libtwin_loader.so"] is packed.custom_libraries[0]
    finally:
        packed.close()
    packed.close()   # idempotent


def test_op_master_dedup_built_in_by_name_custom_by_content(libs):
    first = loading.load_packed([
        OpSoBin("Ascend-V1-libopmaster.so", "built-in", SoBinType.kOpMasterDevice, libs["master"]),
        OpSoBin("libcust_master.so", "vendors/cust-0", SoBinType.kOpMasterDevice, libs["master"])], "a.om")
    second = loading.load_packed([
        # same built-in name, other bytes: the first loaded wins (GE: name + version identify it)
        OpSoBin("Ascend-V1-libopmaster.so", "built-in", SoBinType.kOpMasterDevice, libs["master2"]),
        # other vendor and name, same bytes: reuses the loaded one
        OpSoBin("libother_name.so", "vendors/cust-1", SoBinType.kOpMasterDevice, libs["master"])], "b.om")
    try:
        loaded = loading.op_master_loaded()
        assert loaded["built-in"] == ["Ascend-V1-libopmaster.so"]
        assert len(loaded["custom"]) == 1 and loaded["custom"][0].endswith("_vendors_cust-0_libcust_master.so")
        assert second.op_master.unique_names["vendors/cust-1/libother_name.so"] == loaded["custom"][0]
        assert call_int(second.op_master.function("Relu")) == 21      # the first built-in's code
        first.close()
        assert loading.op_master_loaded()["built-in"] == ["Ascend-V1-libopmaster.so"]   # still leased by b
        # different content under a custom vendor: a second library
        third = loading.load_packed([OpSoBin("libcust_master.so", "vendors/cust-0", SoBinType.kOpMasterDevice,
                                              libs["master2"])], "c.om")
        assert len(loading.op_master_loaded()["custom"]) == 2
        third.close()
    finally:
        first.close()
        second.close()


def test_custom_op_master_unique_names_never_collide_after_a_release(libs):
    """GE's <n>_vendors_<vendor>_<so>: n counts every SO ever loaded, so a release cannot make a
    new SO reuse the name of a live one (n from the live count did: B and C both got 1_...)."""
    def load(data, where):
        return loading.load_packed([OpSoBin("libtiling.so", "vendors/acme", SoBinType.kOpMasterDevice, data)], where)
    a = load(libs["master"], "a.om")
    b = load(libs["master2"], "b.om")
    a.close()
    c = load(libs["master3"], "c.om")
    try:
        name_b = b.op_master.unique_names["vendors/acme/libtiling.so"]
        name_c = c.op_master.unique_names["vendors/acme/libtiling.so"]
        assert name_b != name_c
        assert name_b.endswith("_vendors_acme_libtiling.so") and name_c.endswith("_vendors_acme_libtiling.so")
        assert loading.op_master_loaded()["custom"] == sorted([name_b, name_c])
        assert call_int(b.op_master.function("Relu")) == 22 and call_int(c.op_master.function("Relu")) == 23
    finally:
        b.close()
        c.close()


def test_space_registry_shared_by_content_and_released_with_the_last_model(libs):
    bins = [OpSoBin(f"libophost{SUFFIX}", "built-in", SoBinType.kSpaceRegistry, libs["space"])]
    a = loading.load_packed(bins, "a.om2")
    b = loading.load_packed(bins, "b.om2")
    assert a.space_registry.libraries[0] is b.space_registry.libraries[0]
    assert a.space_registry.libraries[0].refs == 2
    a.close()
    assert len(loading.SPACE_REGISTRY_CACHE.loaded()) == 1
    assert call_int(b.space_registry.function("Relu")) == 11
    b.close()


def test_space_registry_for_another_platform_is_refused(libs):
    other = "linux_aarch64" if HOST != "aarch64" else "linux_x86_64"
    bins = [OpSoBin(f"libophost_{other}.so", "built-in", SoBinType.kSpaceRegistry, libs["space"])]
    with pytest.raises(AbiError, match=f"libophost_{other}.so is host code for another platform; this machine "
                                       f"needs \\*{SUFFIX}"):
        loading.load_packed(bins, "m.om")


def test_wrong_sos_are_typed_errors_and_release_what_was_loaded(libs):
    good = [OpSoBin("Ascend-V1-libopmaster.so", "built-in", SoBinType.kOpMasterDevice, libs["master"])]
    foreign = bytearray(libs["fused"])
    foreign[18:20] = (183 if HOST != "aarch64" else 62).to_bytes(2, "little")
    cases = [
        (OpSoBin("libjunk.so", "built-in", SoBinType.kAutofuse, b"\x00garbage"), ArchiveError, "is not an ELF file"),
        (OpSoBin("libforeign.so", "built-in", SoBinType.kAutofuse, bytes(foreign)), AbiError, "it is built for EM_"),
    ]
    for bad, error, pattern in cases:
        with pytest.raises(error, match=f"m.om: packed kAutofuse built-in/lib.*{pattern}"):
            loading.load_packed(good + [bad], "m.om")
        assert loading.op_master_loaded()["built-in"] == []   # checked before anything loads
    # a consumer failing half-way releases the earlier leases
    with pytest.raises(AbiError, match="host code for another platform"):
        loading.load_packed(good + [OpSoBin("libophost.so", "", SoBinType.kSpaceRegistry, libs["space"])], "m.om")


def test_unknown_so_bin_type_in_a_store_is_an_archive_error(libs):
    store = bytearray(op_so_store.build([OpSoBin("libfused.so", "v", SoBinType.kAutofuse, libs["fused"])]))
    store[4 + 6:4 + 8] = (9).to_bytes(2, "little")
    with pytest.raises(ArchiveError, match="so_bin_type 9 is not a known SoBinType"):
        op_so_store.load(bytes(store))


def test_flag_must_declare_exactly_the_packed_types(libs):
    bins = all_four(libs)
    info.check_flag(bins, 0xF000, "m.om")
    with pytest.raises(ArchiveError, match="0x1000 declares kCustomOp, but the packed SOs are kSpaceRegistry, "
                                           "kOpMasterDevice, kAutofuse, kCustomOp"):
        info.check_flag(bins, 0x1000, "m.om")
    with pytest.raises(ArchiveError, match="declares kAutofuse, but the packed SOs are none"):
        info.check_flag([], 0x2000, "m.om")
