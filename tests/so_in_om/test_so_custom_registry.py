"""Custom-op registrations land in a registry owned by the library being loaded, and a model sees
only the libraries packed in it -- never a process-global fallback (GE_BEHAVIOURS A6)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import refresh_om_digests
from sobuild import HOST, call_int, model, registering_so, rewrite_archive, twin_so

import om2gen
from om2gen.errors import RuntimeFailure
from om2gen.formats import op_so_store
from om2gen.formats.om import integrity, proto
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.formats.op_so_store import OpSoBin, SoBinType
from om2gen.native import ffi, lib
from om2gen.so_in_om import custom_libraries, info, loading

pytestmark = pytest.mark.needs_cc


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    d = tmp_path_factory.mktemp("twins")
    a = twin_so(d / "a" / "libtwin.so", 2.0)
    b = twin_so(d / "b" / "libtwin.so", 3.0)    # same file name and op type, other behaviour
    assert a.read_bytes() != b.read_bytes()
    return a, b


def visible() -> list[str]:
    n = lib.Om2ListCustomOps(ffi.NULL, 0)
    names = ffi.new("const char *[]", max(n, 1))
    lib.Om2ListCustomOps(names, n)
    return [ffi.string(names[i]).decode() for i in range(n)]


def test_registrations_land_in_the_library_registry(twins):
    a = custom_libraries.load_bytes(twins[0].read_bytes(), "libtwin.so")
    b = custom_libraries.load_bytes(twins[1].read_bytes(), "libtwin.so")
    assert a.registry != b.registry and a.op_types == b.op_types == ("Twin",)
    assert custom_libraries.load_bytes(twins[0].read_bytes(), "other_name.so") is a   # one per content
    assert "Twin" not in visible()                        # nothing went to the process registry
    with custom_libraries.scope([a]):
        assert visible() == ["Twin"]
        with custom_libraries.scope([]):                         # a model without custom-op libraries
            assert visible() == []
            assert lib.om2x_custom_scope_current() != ffi.NULL
        with custom_libraries.scope([b, a]):
            assert visible() == ["Twin"]
    assert lib.om2x_custom_scope_current() == ffi.NULL
    assert "Twin" not in visible()


@pytest.fixture(scope="module")
def registering(tmp_path_factory):
    """SOs of the other kinds whose code registers a custom-op creator (at load and later)."""
    d = tmp_path_factory.mktemp("registering")
    return {kind: registering_so(d / f"{kind}.so", f"Om2TestReg_{kind}", [symbol]).read_bytes()
            for kind, symbol in (("space", "Om2Tiling_Relu"), ("master", "Om2DeviceTiling_Relu"),
                                 ("fused", "Om2FusedKernel_Relu"), ("kernel", "om2test_kernel"))}


def symbol_int(handle, name: str) -> int:
    return call_int(int(ffi.cast("uintptr_t", lib.om2x_so_symbol(handle, name.encode()))))


def test_other_packed_sos_register_only_into_a_registry_of_their_own(registering, twins):
    """An op-master / space-registry / autofuse SO that registers creators: they land in its own
    registry, never in the process one, and go with it when it is released (before, they stayed
    in the process registry and pointed into unloaded code)."""
    suffix = info.host_library_suffix(info.host_os(), HOST)
    packed = loading.load_packed([
        OpSoBin(f"libreg{suffix}", "vendors/acme", SoBinType.kSpaceRegistry, registering["space"]),
        OpSoBin("libreg_master.so", "vendors/acme", SoBinType.kOpMasterDevice, registering["master"]),
        OpSoBin("libreg_fused.so", "vendors/acme", SoBinType.kAutofuse, registering["fused"])], "m.om")
    ops = [f"Om2TestReg_{k}" for k in ("space", "master", "fused")]
    try:
        loaded = [packed.space_registry.libraries[0], packed.op_master.leases[0][1],
                  packed.autofuse.load("vendors/acme/libreg_fused.so")]
        for so, op in zip(loaded, ops):
            assert symbol_int(so.handle, "om2test_ctor_rc") == 0            # registered at load...
            assert symbol_int(so.handle, "om2test_register_later") == 0     # ...and later, on call
            assert custom_libraries._registered(so.registry) == (op, op + "Later")   # both in its own registry
        registries = [so.registry for so in loaded]
        assert not set(visible()) & {o + s for o in ops for s in ("", "Later")}
        with packed.activated():
            assert visible() == []                    # a model's scope holds only its custom-op libraries
    finally:
        packed.close()
    assert not set(visible()) & {o + s for o in ops for s in ("", "Later")}
    for registry in registries:
        assert lib.om2x_so_unload(registry) == -1     # freed with its SO: not a loaded one any more
    assert lib.om2x_so_unload(ffi.NULL) == -1
    twin = custom_libraries.load_bytes(twins[0].read_bytes(), "libtwin.so")
    assert lib.om2x_so_unload(twin.registry) == -1    # custom-op libraries stay resident


def test_a_creator_in_a_kernel_binary_or_model_library_is_refused(registering):
    """Other objects the runtime loads from memory (kernel binaries, model libraries) are unloaded
    with their model; a creator in their code must not reach the process registry."""
    data = registering["kernel"]
    handle, err = ffi.new("void **"), ffi.new("char[]", 512)
    assert lib.om2x_dlopen_from_memory(data, len(data), b"kernel", 0, handle, err, 512) == 0, ffi.string(err)
    try:
        assert symbol_int(handle[0], "om2test_ctor_rc") == -1
        assert symbol_int(handle[0], "om2test_register_later") == -1
    finally:
        lib.om2x_dlclose(handle[0])
    assert not {"Om2TestReg_kernel", "Om2TestReg_kernelLater"} & set(visible())


def test_scopes_are_left_innermost_first(twins):
    a = custom_libraries.load_bytes(twins[0].read_bytes(), "libtwin.so")
    outer, inner = ffi.new("void **"), ffi.new("void **")
    regs = ffi.new("void *[]", [a.registry])
    assert lib.om2x_custom_scope_enter(regs, 1, outer) == 0
    assert lib.om2x_custom_scope_enter(regs, 0, inner) == 0
    assert lib.om2x_custom_scope_leave(outer[0]) == -1    # not the innermost: refused, nothing changes
    assert lib.om2x_custom_scope_current() == inner[0]
    assert lib.om2x_custom_scope_leave(inner[0]) == 0
    assert lib.om2x_custom_scope_leave(outer[0]) == 0
    assert lib.om2x_custom_scope_current() == ffi.NULL
    assert lib.om2x_custom_scope_enter(ffi.NULL, 1, outer) == -1


@pytest.fixture(scope="module")
def twin_models(twins, tmp_path_factory):
    d = tmp_path_factory.mktemp("twin_models")
    onnx_path = model(d / "twin.onnx", ops=(), twin=True)
    out = {}
    for key, library in zip("ab", twins):
        for fmt in ("om2", "om"):
            out[key, fmt] = om2gen.compile(onnx_path, d / f"{key}.{fmt}", custom_op_libs=[library], format=fmt)
    return out


@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_two_models_with_the_same_op_type_each_get_their_own(twin_models, fmt):
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    with om2gen.load(twin_models["a", fmt]) as a, om2gen.load(twin_models["b", fmt]) as b:
        ya, yb = a.run({"x": x})["z"], b.run({"x": x})["z"]
        assert np.all(ya == 2.0) and np.all(yb == 3.0)
        assert np.all(a.run({"x": x})["z"] == 2.0)       # replays keep their own kernels' results
    # the other load order
    with om2gen.load(twin_models["b", fmt]) as b, om2gen.load(twin_models["a", fmt]) as a:
        assert np.all(b.run({"x": x})["z"] == 3.0) and np.all(a.run({"x": x})["z"] == 2.0)


def packed_library(path) -> op_so_store.OpSoBin:
    (item,) = op_so_store.load(read_om(path).partition(PT.SO_BINS))
    return item


def test_a_model_uses_its_packed_library_not_a_resident_one(twin_models, tmp_path):
    """Model a's library is resident after a load; a copy of model a whose SO_BINS holds b's
    library (under b's name, which the tasks and MODEL_DEF's digest follow: a library under
    another's name is refused, test_integrity.py) must run b's Twin."""
    with om2gen.load(twin_models["a", "om"]) as a:
        assert np.all(a.run({"x": np.zeros((2, 8), np.float32)})["z"] == 2.0)
    om = read_om(twin_models["a", "om"])
    item, other = packed_library(twin_models["a", "om"]), packed_library(twin_models["b", "om"])
    assert item.name != other.name
    store = op_so_store.build([op_so_store.OpSoBin(other.name, item.vendor, item.bin_type, other.data)])
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    md.attr[integrity.SO_BINS_SHA256].list.s[:] = [d.encode() for d in integrity.so_bins_digests([other])]
    tasks = proto.ModelTaskDef.FromString(om.partition(PT.TASK_INFO))
    for t in tasks.task:
        if t.kernel.so_name == item.name:
            t.kernel.so_name = other.name
    new = {PT.SO_BINS: store, PT.MODEL_DEF: md.SerializeToString(deterministic=True),
           PT.TASK_INFO: tasks.SerializeToString(deterministic=True)}
    parts = [Partition(p.type, new.get(p.type, p.data)) for p in om.partitions]
    swapped = tmp_path / "swapped.om"
    write_om(swapped, refresh_om_digests(parts), header=om.header)
    with om2gen.load(swapped) as m:
        assert np.all(m.run({"x": np.zeros((2, 8), np.float32)})["z"] == 3.0)


def test_a_model_without_the_library_fails_instead_of_using_a_resident_one(twin_models, tmp_path):
    with om2gen.load(twin_models["a", "om2"]):                # a's library now resident
        pass

    def drop_store(name, data):   # an archive of before data/so_bins/, its shared_libs entry removed
        if name.startswith("data/so_bins/") or "/shared_libs/" in name:
            return None
        if name == "data/model_0/model_meta.json":
            meta = json.loads(data)
            meta.pop("so_bins")
            meta["custom_ops"]["shared_libs"] = []
            return json.dumps(meta).encode()
        return data
    broken = rewrite_archive(twin_models["a", "om2"], tmp_path / "nolib.om2", drop_store)
    with pytest.raises(RuntimeFailure, match="custom operator Twin is not registered"):
        om2gen.load(broken)
