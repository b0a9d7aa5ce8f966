"""Cross-compilation (--target aarch64 with Debian's aarch64 cross toolchain): the archive and the
OM are for the other CPU, the SOs come from the target's op package directory and are ELF-checked
for it, custom-op libraries run here in their host build while the target build is packed, and
loading the result on this machine is a clear AbiError, not a crash."""
from __future__ import annotations

import io

import pytest
from elftools.elf.elffile import ELFFile
from sobuild import CROSS_CC, CROSS_CXX, HOST, archive_bytes, archive_json, kind_so, model, need_cross, twin_so

import om2gen
from om2gen.errors import AbiError, CompileError
from om2gen.formats import op_so_store
from om2gen.formats.om import proto
from om2gen.formats.om2 import layout
from om2gen.formats.om.container import read_om
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.formats.op_so_store import SoBinType as T
from om2gen.so_in_om import providers

pytestmark = [pytest.mark.needs_cc, pytest.mark.skipif(HOST == "aarch64", reason="this machine is aarch64")]


def machine(data: bytes) -> str:
    return ELFFile(io.BytesIO(data))["e_machine"]


@pytest.fixture(scope="module")
def cross(tmp_path_factory):
    need_cross()
    root = tmp_path_factory.mktemp("opp")
    kind_so(root / "aarch64/built-in/op_host/libophost.so", ["Om2Tiling_Relu"], cc=CROSS_CC)
    kind_so(root / "aarch64/built-in/op_master_device/libopmaster.so", ["Om2DeviceTiling_Add"], cc=CROSS_CC)
    kind_so(root / "x86_64/built-in/op_host/libophost.so", ["Om2Tiling_Relu"])   # never used for aarch64
    host_twin = twin_so(root / "host" / "libtwin.so", 6.0)
    target_twin = twin_so(root / "aarch64/vendors/customize/custom_ops/libtwin.so", 6.0, cxx=CROSS_CXX)
    return root, host_twin, target_twin


@pytest.fixture(scope="module")
def compiled(cross, tmp_path_factory):
    root, host_twin, _ = cross
    d = tmp_path_factory.mktemp("cross")
    onnx_path = model(d / "m.onnx", ops=("Relu", "Add"), twin=True)
    mp = pytest.MonkeyPatch()
    mp.setenv(providers.ENV_OPP, str(root))
    try:
        return {fmt: om2gen.compile(onnx_path, d / f"m.{fmt}", custom_op_libs=[host_twin], target="aarch64",
                                    format=fmt) for fmt in ("om2", "om")}
    finally:
        mp.undo()


def test_the_archive_is_for_aarch64_with_the_target_sos(compiled, cross):
    _, host_twin, target_twin = cross
    manifest = archive_json(compiled["om2"], "manifest.json")
    assert manifest["target"]["arch"] == "aarch64" and manifest["so_in_om_info"]["cpu_info"] == "aarch64"
    assert "aarch64-linux-gnu" in manifest["compiler"]["cxx"] or "aarch64" in manifest["compiler"]["cxx"]
    meta = archive_json(compiled["om2"], "data/model_0/model_meta.json")
    assert machine(archive_bytes(compiled["om2"], meta["library"])) == "EM_AARCH64"
    bins = op_so_store.load(archive_bytes(compiled["om2"], layout.SO_STORE))
    assert [(b.bin_type, b.name) for b in bins] == [
        (T.kSpaceRegistry, "libophost_linux_aarch64.so"), (T.kOpMasterDevice, "libopmaster.so"),
        (T.kCustomOp, providers.archive_name("libtwin.so", target_twin.read_bytes()))]
    assert all(machine(b.data) == "EM_AARCH64" for b in bins)
    custom = next(b for b in bins if b.bin_type == T.kCustomOp)
    assert custom.data == target_twin.read_bytes() != host_twin.read_bytes()
    assert archive_bytes(compiled["om2"], layout.custom_op_library(custom.name)) == custom.data
    om = read_om(compiled["om"])
    assert om.partition(PT.SO_BINS) == archive_bytes(compiled["om2"], layout.SO_STORE)
    md = proto.ModelDef.FromString(om.partition(PT.MODEL_DEF))
    assert md.attr["host_env_cpu"].s == b"aarch64"


@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_loading_it_here_is_a_clear_abi_error(compiled, fmt):
    # (an .om2 checks its kernel set first, an .om its platform record: either way aarch64 code is refused)
    with pytest.raises(AbiError, match=f"aarch64.*{HOST}.*[Rr]ecompile"):
        om2gen.load(compiled[fmt])
    # overriding the platform record does not make aarch64 code run here: still a typed error
    with pytest.raises(AbiError, match="aarch64"):
        om2gen.load(compiled[fmt], allow_platform_mismatch=True)


def test_a_target_build_is_required_for_each_custom_op_library(cross, tmp_path, monkeypatch):
    root, host_twin, _ = cross
    onnx_path = model(tmp_path / "m.onnx", ops=(), twin=True)
    monkeypatch.setenv(providers.ENV_OPP, str(tmp_path / "empty_opp"))
    (tmp_path / "empty_opp").mkdir()
    with pytest.raises(CompileError, match="cross-compiling for aarch64: custom-op library libtwin.so .ops Twin. has "
                                           "no aarch64 build: put it at .OM2GEN_OPP_PATH/aarch64/<vendor>/"
                                           "custom_ops/libtwin.so"):
        om2gen.compile(onnx_path, tmp_path / "x.om2", custom_op_libs=[host_twin], target="aarch64")
    monkeypatch.delenv(providers.ENV_OPP)
    with pytest.raises(CompileError, match="set .OM2GEN_OPP_PATH to the operator package directory"):
        om2gen.compile(onnx_path, tmp_path / "x.om2", custom_op_libs=[host_twin], target="aarch64")
    assert not (tmp_path / "x.om2").exists()


def test_an_x86_library_in_the_aarch64_package_is_refused(cross, tmp_path, monkeypatch):
    root = tmp_path / "opp"
    kind_so(root / "aarch64/built-in/op_master_device/libwrong.so", ["Om2DeviceTiling_Add"])   # host gcc
    monkeypatch.setenv(providers.ENV_OPP, str(root))
    with pytest.raises(CompileError, match="libwrong.so: it is built for EM_X86_64 .64-bit., aarch64 needs "
                                           "EM_AARCH64"):
        om2gen.compile(model(tmp_path / "m.onnx"), tmp_path / "x.om2", target="aarch64")
    assert not (tmp_path / "x.om2").exists()


def test_a_missing_cross_compiler_is_named_with_the_package(monkeypatch):
    """Needs no toolchain: the cross compiler is looked up on PATH and reported when absent."""
    from om2gen.toolchain import compiler, targets
    real = compiler.shutil.which
    monkeypatch.setattr(compiler.shutil, "which", lambda name: None if name.startswith("aarch64-") else real(name))
    with pytest.raises(CompileError, match="--target aarch64 needs aarch64-linux-gnu-g\\+\\+, which is not installed; "
                                           "install Debian's cross toolchain: apt-get install gcc-aarch64-linux-gnu "
                                           "g\\+\\+-aarch64-linux-gnu"):
        compiler.compiler_identity(True, targets.TARGETS["aarch64"])
