"""Tests of the custom-operator factory (runtime_abi/src/om2_custom_ops.cpp) and the sample
custom-op library (samples/custom_op).

The real checks live in the C++ self-test tests/custom_op/factory_selftest.cpp, linked with the
CPU runtime and the factory (with -rdynamic, as the Python extension exports them RTLD_GLOBAL):
it dlopens the sample library built by samples/custom_op/build.py, creates each op through the
factory, runs InferShape / Compile / Serialize / Deserialize / Execute, and checks results,
error messages and that nothing leaks. This module also checks the build script (one command,
deterministic output, the kernel binary embedded), the factory's build contract (warning-free
with the runtime's flags, no static initializers) and the sample model and its reference.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.needs_cc

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "runtime_abi" / "include"
RUNTIME_SRCS = sorted((ROOT / "runtime_abi" / "src" / "acl_rt").glob("*.cpp"))
FACTORY_SRC = ROOT / "runtime_abi" / "src" / "om2_custom_ops.cpp"
SELFTEST_SRC = Path(__file__).resolve().parent / "factory_selftest.cpp"
SAMPLE = ROOT / "samples" / "custom_op"

# The flags the runtime is built with when it goes into the Python extension module.
RUNTIME_FLAGS = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{INCLUDE}"]
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 120

SECTIONS = [
    "empty factory",
    "load library",
    "registration",
    "AddCustom InferShape and Compile",
    "ScaleShift InferShape and Compile",
    "serialization",
    "execute",
    "capture and replay",
    "destroy and leaks",
]


def _cxx() -> str:
    cxx = shutil.which("g++")
    if cxx is None or shutil.which("gcc") is None:
        pytest.skip("gcc/g++ not found")
    return cxx


def _run(cmd: list[str], timeout: int, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _build(cmd: list[str]) -> subprocess.CompletedProcess:
    result = _run(cmd, BUILD_TIMEOUT)
    assert result.returncode == 0, f"build failed: {' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result


def _load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build_sample(out: Path) -> Path:
    _cxx()
    result = _run([sys.executable, str(SAMPLE / "build.py"), "--out", str(out)], BUILD_TIMEOUT)
    assert result.returncode == 0, f"build.py failed:\n{result.stdout}\n{result.stderr}"
    library = Path(result.stdout.strip())
    assert library == (out / "libom2_sample_ops.so").resolve()
    assert library.is_file()
    return library


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("custom_op")


@pytest.fixture(scope="module")
def sample_lib(build_dir: Path) -> Path:
    return _build_sample(build_dir / "sample")


@pytest.fixture(scope="module")
def selftest(build_dir: Path) -> Path:
    out = build_dir / "factory_selftest"
    _build([_cxx(), *RUNTIME_FLAGS, "-rdynamic", str(SELFTEST_SRC), *map(str, RUNTIME_SRCS), str(FACTORY_SRC),
            "-o", str(out), "-ldl"])
    return out


def _assert_selftest_passed(result: subprocess.CompletedProcess) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"self-test failed (rc {result.returncode}):\n{output}"
    assert "FAIL" not in result.stdout, output
    for section in SECTIONS:
        assert f"ok: {section}" in result.stdout, f"section {section!r} missing:\n{output}"
    assert re.search(r"^PASS: \d+ checks$", result.stdout, re.MULTILINE), output


def test_selftest_passes(selftest: Path, sample_lib: Path, build_dir: Path) -> None:
    copy = build_dir / "copy" / "libom2_sample_ops_copy.so"
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(sample_lib, copy)
    _assert_selftest_passed(_run([str(selftest), str(sample_lib), str(copy)], RUN_TIMEOUT))


def test_selftest_reports_failures(selftest: Path, build_dir: Path) -> None:
    """The self-test fails loudly when the library is missing."""
    missing = build_dir / "no_such_library.so"
    result = _run([str(selftest), str(missing), str(missing)], RUN_TIMEOUT)
    assert result.returncode == 1
    assert "FAIL:" in result.stdout and "no_such_library.so" in result.stdout


def test_factory_builds_warning_free_without_static_initializers(build_dir: Path) -> None:
    elffile = pytest.importorskip("elftools.elf.elffile")
    obj = build_dir / "om2_custom_ops.o"
    result = _build([_cxx(), *RUNTIME_FLAGS, "-c", str(FACTORY_SRC), "-o", str(obj)])
    assert result.stderr == ""
    with obj.open("rb") as f:
        elf = elffile.ELFFile(f)
        sections = {s.name for s in elf.iter_sections()}
        symbols = {s.name: s for s in elf.get_section_by_name(".symtab").iter_symbols()}
    assert not {".init_array", ".ctors", ".preinit_array"} & sections
    for name in ["Om2RegisterCustomOpCreator", "Om2CreateCustomOp", "Om2DestroyCustomOp", "Om2ListCustomOps",
                 "Om2CustomOpSetError", "Om2CustomOpGetError"]:
        assert name in symbols, f"{name} is not defined (extern \"C\")"
        sym = symbols[name]
        assert sym["st_info"]["bind"] == "STB_GLOBAL" and sym["st_shndx"] != "SHN_UNDEF", name


def test_sample_build_is_deterministic_and_embeds_the_kernels(sample_lib: Path, build_dir: Path) -> None:
    elffile = pytest.importorskip("elftools.elf.elffile")
    other = _build_sample(build_dir / "sample_again")
    assert other.read_bytes() == sample_lib.read_bytes()
    kernels = sample_lib.parent / "obj" / "om2_sample_kernels.so"
    assert (other.parent / "obj" / kernels.name).read_bytes() == kernels.read_bytes()
    assert sorted(p.name for p in sample_lib.parent.glob("*.so")) == [sample_lib.name]  # the library alone
    # The kernel binary is inside the op library (launched from memory, never from a path).
    assert kernels.read_bytes() in sample_lib.read_bytes()
    assert str(sample_lib.parent).encode() not in sample_lib.read_bytes()

    with sample_lib.open("rb") as f:
        dynsym = elffile.ELFFile(f).get_section_by_name(".dynsym")
        undefined = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] == "SHN_UNDEF" and s.name}
        defined = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    # Resolved at load from the runtime: the ACL API and the factory.
    assert {"Om2RegisterCustomOpCreator", "aclrtBinaryLoadFromData", "aclrtLaunchKernelV2", "aclrtMalloc"} <= undefined
    assert "Om2SampleOpsExecuteCount" in defined
    with kernels.open("rb") as f:
        dynsym = elffile.ELFFile(f).get_section_by_name(".dynsym")
        entries = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    assert {"add_custom", "scale_shift"} <= entries


def test_sample_build_reports_a_missing_compiler(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "CXX": "no-such-compiler-om2"}
    result = _run([sys.executable, str(SAMPLE / "build.py"), "--out", str(tmp_path)], BUILD_TIMEOUT, env=env)
    assert result.returncode == 1
    assert "no-such-compiler-om2" in result.stderr and "CXX" in result.stderr
    assert "Traceback" not in result.stderr


def test_sample_model_and_reference(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    result = _run([sys.executable, str(SAMPLE / "model.py"), "--out", str(tmp_path)], RUN_TIMEOUT)
    assert result.returncode == 0, result.stderr
    path = Path(result.stdout.strip())
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 17), ("om2.sample", 1)}
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    assert ops == [("", "Relu"), ("om2.sample", "AddCustom"), ("om2.sample", "ScaleShift"), ("", "Mul")]
    scale_shift = model.graph.node[2]
    assert {a.name: a.f for a in scale_shift.attribute} == {"alpha": 2.0, "beta": 0.5}
    assert list(scale_shift.output) == ["y0", "y1"]

    sample = _load_module("om2_sample_model", SAMPLE / "model.py")
    inputs = sample.make_inputs(seed=3)
    assert set(inputs) == {i.name for i in model.graph.input}
    out = sample.reference(**inputs)
    assert set(out) == {o.name for o in model.graph.output}
    x, y = inputs["x"].astype(np.float64), inputs["y"].astype(np.float64)
    s = np.maximum(x, 0) + y
    expected = (2 * s + 0.5) * (2 * s - 0.5)
    assert out["z"].dtype == np.float32 and out["z"].shape == sample.SHAPE
    np.testing.assert_allclose(out["z"], expected, rtol=1e-5, atol=1e-5)
