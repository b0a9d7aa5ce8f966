"""ELF checks of packed shared objects (om2gen/so_in_om/elf_checks.py): machine, class, OS ABI, type and
DT_NEEDED against what the target runtime provides, with typed errors at compile and load time."""
from __future__ import annotations

import pytest
from sobuild import HOST, kind_so, need

from om2gen.errors import AbiError, ArchiveError, CompileError
from om2gen.so_in_om import elf_checks

pytestmark = pytest.mark.needs_cc


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return kind_so(tmp_path_factory.mktemp("elf") / "libgood.so", ["Om2Tiling_Relu"]).read_bytes()


def patched(data: bytes, offset: int, value: bytes) -> bytes:
    out = bytearray(data)
    out[offset:offset + len(value)] = value
    return bytes(out)


def test_a_good_library_passes_and_lists_its_exports(good):
    summary = elf_checks.check(good, "libgood.so", HOST)
    assert {"Om2Tiling_Relu", "om2test_tag", "om2test_ctor_ran"} <= summary.exported
    assert set(summary.needed) <= elf_checks.RUNTIME_LIBRARIES[HOST]


def test_runtime_library_tables():
    for arch, libs in elf_checks.RUNTIME_LIBRARIES.items():
        assert {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", elf_checks.ARCHES[arch].loader} <= libs
    assert "ld-linux-aarch64.so.1" in elf_checks.RUNTIME_LIBRARIES["aarch64"]
    assert "ld-linux-x86-64.so.2" in elf_checks.RUNTIME_LIBRARIES["x86_64"]


@pytest.mark.parametrize("at_load, error", [(False, CompileError), (True, ArchiveError)])
def test_not_an_elf(at_load, error):
    with pytest.raises(error, match=r"libjunk.so is not an ELF file \(starts with 6e6f7065\)"):
        elf_checks.check(b"nope, not a library", "libjunk.so", HOST, at_load=at_load)
    with pytest.raises(error, match="starts with nothing"):
        elf_checks.check(b"", "libempty.so", HOST, at_load=at_load)


@pytest.mark.parametrize("at_load, error", [(False, CompileError), (True, AbiError)])
def test_wrong_machine(good, at_load, error):
    foreign = patched(good, 18, (183).to_bytes(2, "little"))   # e_machine = EM_AARCH64
    with pytest.raises(error, match="libforeign.so: it is built for EM_AARCH64 .64-bit., x86_64 needs EM_X86_64"):
        elf_checks.check(foreign, "libforeign.so", "x86_64", at_load=at_load)
    # and the other way round: an x86-64 library for an aarch64 target
    with pytest.raises(error, match="EM_X86_64 .64-bit., aarch64 needs EM_AARCH64"):
        elf_checks.check(good, "libgood.so", "aarch64", at_load=at_load)


def test_wrong_os_abi_and_type(good, tmp_path):
    freebsd = patched(good, 7, bytes([9]))   # EI_OSABI = ELFOSABI_FREEBSD
    with pytest.raises(CompileError, match="OS ABI is ELFOSABI_FREEBSD"):
        elf_checks.check(freebsd, "libbsd.so", HOST)
    need("gcc")
    src = tmp_path / "obj.c"
    src.write_text("int f(void) { return 1; }\n")
    import subprocess
    subprocess.run(["gcc", "-c", "-fPIC", "-o", str(tmp_path / "obj.o"), str(src)], check=True)
    with pytest.raises(AbiError, match=r"obj.o: it is ET_REL, not a shared object \(ET_DYN\)"):
        elf_checks.check((tmp_path / "obj.o").read_bytes(), "obj.o", HOST, at_load=True)


def test_unknown_architecture(good):
    with pytest.raises(CompileError, match="cannot check shared objects for CPU 'mips'"):
        elf_checks.check(good, "libgood.so", "mips")


def test_needed_library_the_runtime_lacks(tmp_path):
    dep = kind_so(tmp_path / "libhelper.so", ["helper"])
    lib = kind_so(tmp_path / "libuser.so", ["Om2Tiling_Relu"], extra=(f"-L{tmp_path}", "-Wl,--no-as-needed", "-lhelper"))
    with pytest.raises(CompileError, match="libuser.so needs libhelper.so .DT_NEEDED., which the x86_64 target "
                                           "runtime does not provide.*cannot find other libraries by name"):
        elf_checks.check(lib.read_bytes(), "libuser.so", "x86_64")
    assert dep.is_file()


def test_needed_cann_runtime_gets_the_in_process_hint(tmp_path):
    stub = kind_so(tmp_path / "libascendcl.so", ["aclInit"])
    lib = kind_so(tmp_path / "libacl_user.so", ["Om2Tiling_Relu"], extra=(f"-L{tmp_path}", "-Wl,--no-as-needed", "-lascendcl"))
    with pytest.raises(AbiError, match="needs libascendcl.so .DT_NEEDED.*provides the ACL and Om2\\* symbols in the "
                                       "loading process: link the .so without -lascendcl"):
        elf_checks.check(lib.read_bytes(), "libacl_user.so", "x86_64", at_load=True)
    assert stub.is_file()
