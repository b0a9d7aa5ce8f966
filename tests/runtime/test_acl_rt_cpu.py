"""Tests of the CPU ACL runtime (runtime_abi/src/acl_rt/).

The real checks live in the C++ self-test tests/runtime/acl_rt_selftest.cpp. This module builds
what it needs into a temporary directory: a small kernel binary (an ELF shared object following
om2/om2_kernel.h, whose C source is below) and the self-test linked with the runtime, compiled
with the runtime's production flags. It then runs the self-test natively, and (slow tier) under
valgrind and the sanitizers. It also checks the contract of the runtime library itself: every
function the ACL headers declare is exported, and nothing runs at load time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_cc

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "runtime_abi" / "include"
RUNTIME_SRCS = sorted((ROOT / "runtime_abi" / "src" / "acl_rt").glob("*.cpp"))
SELFTEST_SRC = Path(__file__).resolve().parent / "acl_rt_selftest.cpp"
ACL_HEADERS = [INCLUDE / "acl" / "acl_base.h", INCLUDE / "acl" / "acl_rt.h"]
VENDOR_HEADER = INCLUDE / "om2" / "om2_cpu_runtime.h"

# The flags the runtime is built with when it goes into the Python extension module.
RUNTIME_FLAGS = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{INCLUDE}"]
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 120

SECTIONS = [
    "init and device",
    "error messages",
    "memory",
    "kernel binaries",
    "launch argument checks",
    "SPMD launches",
    "issue thread counts",
    "streams and events",
    "capture and replay",
    "labels",
    "finalize and leaks",
]

KERNELS_C = r"""
#include <pthread.h>
#include <stdint.h>
#include "om2/om2_kernel.h"

typedef struct { int64_t n; float scale; float pad; } ScaleTiling;

/* args {x}{y}{tiling}: y[i] = x[i] * scale + block_idx over the items this block owns. */
OM2_KERNEL(scale_add) {
    const float *x = (const float *)OM2_ADDR(0);
    float *y = (float *)OM2_ADDR(1);
    const ScaleTiling *t = OM2_TILING(ScaleTiling, 2);
    int64_t begin, end;
    om2_block_range(t->n, GetBlockIdx(), GetBlockNum(), &begin, &end);
    for (int64_t i = begin; i < end; ++i) y[i] = x[i] * t->scale + (float)GetBlockIdx();
}

/* args {hits}{nums}: counts how often each block index ran and the block count it saw. */
OM2_KERNEL(record_blocks) {
    uint32_t *hits = (uint32_t *)OM2_ADDR(0);
    uint32_t *nums = (uint32_t *)OM2_ADDR(1);
    __atomic_fetch_add(&hits[om2_block_idx], 1u, __ATOMIC_RELAXED);
    nums[om2_block_idx] = om2_block_num;
}

/* args {out}: out[0] = calls of this kernel in this loaded copy of the binary. */
static int g_calls;
OM2_KERNEL(count_calls) {
    (void)om2_block_idx;
    (void)om2_block_num;
    ((int *)OM2_ADDR(0))[0] = ++g_calls;
}

/* args {dst}{src}: dst[0] = src[0] (uint32), written by block 0: computes a switch index. */
OM2_KERNEL(copy_u32) {
    (void)om2_block_num;
    if (om2_block_idx == 0) ((uint32_t *)OM2_ADDR(0))[0] = ((const uint32_t *)OM2_ADDR(1))[0];
}

/* args {tids}: tids[block_idx] = the thread that ran the block; each block works ~50 us, so
 * that every thread the launch may use has time to join. */
OM2_KERNEL(record_threads) {
    (void)om2_block_num;
    ((uint64_t *)OM2_ADDR(0))[om2_block_idx] = (uint64_t)pthread_self();
    volatile uint32_t spin = 0;
    for (uint32_t i = 0; i < 100000u; ++i) spin += i;
}

/* args {counter}{index}: counter[0] -= 1; index[0] = counter[0] > 0 ? 0 : 1 (a loop's back edge). */
OM2_KERNEL(countdown) {
    (void)om2_block_idx;
    (void)om2_block_num;
    uint32_t *counter = (uint32_t *)OM2_ADDR(0);
    counter[0] -= 1u;
    ((uint32_t *)OM2_ADDR(1))[0] = counter[0] > 0u ? 0u : 1u;
}
"""


def _compilers() -> tuple[str, str]:
    cc, cxx = shutil.which("gcc"), shutil.which("g++")
    if cc is None or cxx is None:
        pytest.skip("gcc/g++ not found")
    return cc, cxx


def _run(cmd: list[str], timeout: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _build(cmd: list[str]) -> None:
    result = _run(cmd, BUILD_TIMEOUT)
    assert result.returncode == 0, f"build failed: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}"


def _build_selftest(cxx: str, out: Path, flags: list[str]) -> Path:
    _build([cxx, *flags, str(SELFTEST_SRC), *map(str, RUNTIME_SRCS), "-o", str(out), "-ldl"])
    return out


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("acl_rt_cpu")


@pytest.fixture(scope="module")
def kernels_so(build_dir: Path) -> Path:
    cc, _ = _compilers()
    src = build_dir / "kernels.c"
    src.write_text(KERNELS_C)
    out = build_dir / "kernels.so"
    _build([cc, "-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
            str(src), "-o", str(out)])
    return out


@pytest.fixture(scope="module")
def runtime_objs(build_dir: Path) -> list[Path]:
    """The runtime compiled once with its production flags (-fPIC: it goes into a shared object),
    one object per source; the self-test, the export check and the static-initializer check all
    use these objects."""
    _, cxx = _compilers()
    assert len(RUNTIME_SRCS) > 1, RUNTIME_SRCS
    objs = []
    for src in RUNTIME_SRCS:
        obj = build_dir / f"acl_rt_{src.stem}.o"
        _build([cxx, *RUNTIME_FLAGS, "-c", str(src), "-o", str(obj)])
        objs.append(obj)
    return objs


@pytest.fixture(scope="module")
def selftest(build_dir: Path, runtime_objs: list[Path]) -> Path:
    _, cxx = _compilers()
    out = build_dir / "acl_rt_selftest"
    _build([cxx, *RUNTIME_FLAGS, str(SELFTEST_SRC), *map(str, runtime_objs), "-o", str(out), "-ldl"])
    return out


def _assert_selftest_passed(result: subprocess.CompletedProcess) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"self-test failed (rc {result.returncode}):\n{output}"
    assert "FAIL" not in result.stdout, output
    for section in SECTIONS:
        assert f"ok: {section}" in result.stdout, f"section {section!r} missing:\n{output}"
    assert re.search(r"^PASS: \d+ checks$", result.stdout, re.MULTILINE), output


def _declared_functions(header: Path) -> set[str]:
    text = header.read_text()
    return set(re.findall(r"ACL_FUNC_VISIBILITY\s+[\w\s\*]+?\b(\w+)\s*\(", text))


def test_selftest_passes(selftest: Path, kernels_so: Path) -> None:
    _assert_selftest_passed(_run([str(selftest), str(kernels_so)], RUN_TIMEOUT))


def test_selftest_reports_failures(selftest: Path, build_dir: Path) -> None:
    """The self-test itself fails loudly: here the 'kernel binary' is not an ELF file."""
    bogus = build_dir / "not_a_kernel.so"
    bogus.write_bytes(b"this is not an ELF file")
    result = _run([str(selftest), str(bogus)], RUN_TIMEOUT)
    assert result.returncode == 1
    assert "FAIL:" in result.stdout


def test_runtime_exports_every_declared_function(build_dir: Path, runtime_objs: list[Path]) -> None:
    elffile = pytest.importorskip("elftools.elf.elffile")
    _, cxx = _compilers()
    lib = build_dir / "libacl_rt_cpu.so"
    _build([cxx, *RUNTIME_FLAGS, "-shared", *map(str, runtime_objs), "-o", str(lib), "-ldl"])
    declared = set().union(*(_declared_functions(h) for h in ACL_HEADERS), _declared_functions(VENDOR_HEADER))
    assert {"aclrtLaunchKernelV2", "aclmdlRIExecuteAsync", "aclDataTypeSize", "om2rtSetThreadCount"} <= declared
    with lib.open("rb") as f:
        dynsym = elffile.ELFFile(f).get_section_by_name(".dynsym")
        exported = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    assert declared - exported == set(), "declared but not implemented"
    # the runtime's C++ internals (namespace om2rt) stay hidden: only the C API is exported
    assert not [name for name in exported if "5om2rt" in name]


def test_runtime_has_no_static_initializers(runtime_objs: list[Path]) -> None:
    """The runtime goes into a Python extension module: nothing may run (or start threads) at load."""
    elffile = pytest.importorskip("elftools.elf.elffile")
    for obj in runtime_objs:
        with obj.open("rb") as f:
            sections = {s.name for s in elffile.ELFFile(f).iter_sections()}
        assert not {".init_array", ".ctors", ".preinit_array"} & sections, obj.name


@pytest.mark.slow
def test_selftest_under_valgrind(selftest: Path, kernels_so: Path) -> None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed")
    cmd = [valgrind, "-q", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite",
           str(selftest), str(kernels_so)]
    _assert_selftest_passed(_run(cmd, 600))


def _sanitizer_supported(cxx: str, flag: str, build_dir: Path) -> bool:
    probe = build_dir / "sanitizer_probe.cpp"
    probe.write_text("int main() { return 0; }\n")
    result = _run([cxx, flag, str(probe), "-o", str(build_dir / "sanitizer_probe")], BUILD_TIMEOUT)
    return result.returncode == 0 and _run([str(build_dir / "sanitizer_probe")], 60).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_selftest_with_sanitizer(sanitizer: str, build_dir: Path, kernels_so: Path) -> None:
    _, cxx = _compilers()
    flag = f"-fsanitize={sanitizer}"
    if not _sanitizer_supported(cxx, flag, build_dir):
        pytest.skip(f"{flag} is not supported by this toolchain")
    flags = [f for f in RUNTIME_FLAGS if f != "-O2"] + ["-O1", "-g", "-fno-omit-frame-pointer", flag,
                                                       "-fno-sanitize-recover=all"]
    exe = _build_selftest(cxx, build_dir / f"acl_rt_selftest_{sanitizer.replace(',', '_')}", flags)
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1", UBSAN_OPTIONS="print_stacktrace=1")
    _assert_selftest_passed(_run([str(exe), str(kernels_so)], 600, env=env))
