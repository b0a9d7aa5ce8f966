"""Helpers of the SO-in-OM tests: real ELF shared objects of each kind, built with gcc/g++ in a tmp
dir, op package trees, small models, and formats/om2/OM rewriting."""
from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import zipfile
from pathlib import Path

import onnx
import pytest
from helpers import refresh_digests
from onnx import TensorProto, helper

from om2gen.native import ffi

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "runtime_abi" / "include"
HOST = platform.machine()
CROSS_CC = "aarch64-linux-gnu-gcc"
CROSS_CXX = "aarch64-linux-gnu-g++"
BUILD_TIMEOUT = 300

# One C source for every op-package kind: a constructor flag, a tag, and the declaring symbols.
KIND_SOURCE = r"""
static int ctor_ran;
__attribute__((constructor)) static void om2test_init(void) { ctor_ran = 1; }
int om2test_ctor_ran(void) { return ctor_ran; }
int om2test_tag(void) { return TAG; }
%s
"""

# A custom operator "Twin" whose Execute fills its output with TWIN_VALUE (at capture; the copy
# task that follows replays every run). Two builds with different values register the same op type.
TWIN_SOURCE = r"""
#include <cstddef>
#include <cstdint>
#include "om2/custom_op.h"

class Twin : public om2::PortableOp, public om2::EagerExecuteOp {
public:
    int32_t InferShape(om2::CustomOpNodeInfo &node) override {
        *node.GetOutputDesc(0) = *node.GetInputDesc(0);
        return 0;
    }
    int32_t Compile(const om2::CustomOpNodeInfo &) override { return 0; }
    int32_t Serialize(uint8_t **data, size_t *size) const override {
        *data = new uint8_t[1]{7};
        *size = 1;
        return 0;
    }
    int32_t Deserialize(const uint8_t *data, size_t size) override { return size == 1 && data[0] == 7 ? 0 : 1; }
    int32_t Execute(om2::EagerOpExecutionContext &context) override {
        Om2CustomTensor *out = context.GetOutputTensor(0);
        float *p = static_cast<float *>(out->data);
        for (uint64_t i = 0; i < out->size / sizeof(float); ++i) p[i] = TWIN_VALUE;
        return 0;
    }
};

REG_AUTO_MAPPING_OP("Twin", Twin);
"""


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def need_cross() -> None:
    if shutil.which(CROSS_CC) is None or shutil.which(CROSS_CXX) is None:
        pytest.skip(f"the aarch64 cross toolchain ({CROSS_CC}, {CROSS_CXX}) is not installed; on Debian: "
                    "apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu")


def _compile(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"


def kind_so(path: Path, symbols: list[str], tag: int = 1, cc: str = "gcc", extra: tuple[str, ...] = ()) -> Path:
    """A shared object exporting `int <symbol>(void)` (returning tag) for each symbol."""
    need(cc)
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_suffix(".c")
    src.write_text(KIND_SOURCE % "\n".join(f"int {s}(void) {{ return TAG; }}" for s in symbols))
    _compile([cc, "-shared", "-fPIC", "-O1", f"-DTAG={tag}", "-o", str(path), str(src), *extra])
    src.unlink()
    return path


# An op-package SO (any kind) that also registers a custom-op creator: from its constructor, and
# later when om2test_register_later() is called. The creator lives in this SO.
REGISTERING_SOURCE = r"""
typedef void *(*om2test_creator)(void);
int Om2RegisterCustomOpCreator(const char *op_type, om2test_creator creator);
static void *om2test_make(void) { return 0; }
static int ctor_rc = -100;
__attribute__((constructor)) static void om2test_init(void) { ctor_rc = Om2RegisterCustomOpCreator(OP_TYPE, om2test_make); }
int om2test_ctor_rc(void) { return ctor_rc; }
int om2test_register_later(void) { return Om2RegisterCustomOpCreator(OP_TYPE "Later", om2test_make); }
%s
"""


def registering_so(path: Path, op_type: str, symbols: list[str], cc: str = "gcc") -> Path:
    """A shared object exporting `int <symbol>(void)` (returning 1) for each symbol, whose constructor
    registers a custom-op creator for `op_type` (and om2test_register_later one for `<op_type>Later`)."""
    need(cc)
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_suffix(".c")
    src.write_text(REGISTERING_SOURCE % "\n".join(f"int {s}(void) {{ return 1; }}" for s in symbols))
    _compile([cc, "-shared", "-fPIC", "-O1", f'-DOP_TYPE="{op_type}"', "-o", str(path), str(src)])
    src.unlink()
    return path


def twin_so(path: Path, value: float, cxx: str = "g++") -> Path:
    need(cxx)
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_suffix(".cpp")
    src.write_text(TWIN_SOURCE)
    _compile([cxx, "-shared", "-fPIC", "-O1", "-std=c++17", f"-I{INCLUDE}", f"-DTWIN_VALUE={value}f", "-o",
              str(path), str(src)])
    src.unlink()
    return path


def call_int(address: int) -> int:
    assert address, "symbol not found"
    return ffi.cast("int (*)(void)", address)()


def mapping_of(address: int) -> str:
    """The /proc/self/maps path of the mapping holding `address`."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if lo <= address < hi:
            return parts[5] if len(parts) > 5 else ""
    raise AssertionError(f"address {address:#x} is not mapped")


def model(path: Path, ops=("Relu", "Add"), twin: bool = False) -> Path:
    """x -> [Twin ->] Relu -> Add(·, x) -> z, float32[2, 8]; ops picks which of Relu/Add/Sigmoid."""
    nodes, cur = [], "x"
    if twin:
        nodes.append(helper.make_node("Twin", [cur], ["t"], name="twin", domain="om2.test"))
        cur = "t"
    for i, op in enumerate(ops):
        out = f"v{i}"
        nodes.append(helper.make_node(op, [cur, "x"] if op == "Add" else [cur], [out], name=f"{op.lower()}{i}"))
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["z"], name="out"))
    graph = helper.make_graph(nodes, "so_in_om_test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("om2.test", 1)] if twin else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    return path


def rewrite_archive(src: Path, dst: Path, edit) -> Path:
    """A copy of an OM2 archive with edit(name, bytes) applied (None drops), digests refreshed."""
    with zipfile.ZipFile(src) as zin:
        entries = {i.filename: zin.read(i) for i in zin.infolist()}
    entries = {n: d for n, d in ((n, edit(n, d)) for n, d in entries.items()) if d is not None}
    manifest = json.loads(entries["manifest.json"])
    refresh_digests(manifest, entries)
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w") as zout:
        for name, data in entries.items():
            zout.writestr(name, data)
    return dst


def edit_manifest(src: Path, dst: Path, change) -> Path:
    def edit(name, data):
        if name != "manifest.json":
            return data
        m = json.loads(data)
        change(m)
        return json.dumps(m).encode()
    return rewrite_archive(src, dst, edit)


def archive_json(path: Path, name: str):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read(name))


def archive_bytes(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(name)
