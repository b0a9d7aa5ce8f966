"""Kernel binaries are mapped without the dynamic loader when they are plain enough
(runtime_abi/src/om2_kernel_image.h), and through dlopen otherwise or when OM2RT_KERNEL_DLOPEN=1."""
import platform
import subprocess
import sys

import numpy as np
import onnx
import pytest
from helpers import make_model, rand
from onnx import helper

import om2gen

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the light loader is x86-64 only")

FEEDS = {"x": rand(3, 40, seed=7)}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """Exp and Tanh call libm (fused with the Add into one kernel, or not)."""
    d = tmp_path_factory.mktemp("kloader")
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Tanh", ["e"], ["t"]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    onnx.save(make_model(nodes, FEEDS, ["y"]), d / "m.onnx")
    return om2gen.compile(d / "m.onnx", d / "m.om2")


def _memfds() -> set[str]:
    """The distinct memfd files mapped into this process (shared objects loaded from memory)."""
    with open("/proc/self/maps") as f:
        return {line.split()[4] for line in f if "memfd:om2_kernel" in line}


CHILD = """
import numpy as np, om2gen
def memfds():
    with open("/proc/self/maps") as f:
        return {{line.split()[4] for line in f if "memfd:om2_kernel" in line}}
x = np.load({x!r})
before = memfds()
with om2gen.load({path!r}) as m:
    y = m.run({{"x": x}})["y"]
    print(len(memfds() - before))
np.save({out!r}, y)
"""


def _run(path, tmp_path, env_extra):
    import os
    out, x = tmp_path / "y.npy", tmp_path / "x.npy"
    np.save(x, FEEDS["x"])
    code = CHILD.format(x=str(x), path=str(path), out=str(out))
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]), np.load(out)


def test_plain_kernels_need_no_dynamic_loader(model, tmp_path):
    light, y_light = _run(model, tmp_path, {})
    loader, y_loader = _run(model, tmp_path, {"OM2RT_KERNEL_DLOPEN": "1"})
    import json
    import zipfile
    with zipfile.ZipFile(model) as z:
        kernels = len(json.loads(z.read("data/model_0/model_meta.json"))["kernels"])
    assert kernels >= 1
    assert light == 1                 # the model library only
    assert loader == 1 + kernels      # and one per kernel binary
    ref = np.tanh(np.exp(FEEDS["x"])) + FEEDS["x"]
    np.testing.assert_allclose(y_light, ref, rtol=1e-5, atol=1e-6)
    assert np.array_equal(y_light, y_loader)


def test_a_kernel_with_constructors_goes_through_dlopen(tmp_path):
    """A binary built with the C runtime's start files (DT_INIT, INIT_ARRAY), as kernels were
    before -nostartfiles: declined by the light loader, loaded and run by dlopen."""
    import ctypes

    from om2gen import _native
    rt = ctypes.CDLL(_native.__file__)   # the runtime already loaded in this process
    src = tmp_path / "k.c"
    src.write_text('__attribute__((visibility("default"))) int answer(void) { return 42; }\n')
    so = tmp_path / "k.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", str(src), "-o", str(so)], check=True)
    data = so.read_bytes()
    handle, func = ctypes.c_void_p(), ctypes.c_void_p()
    before = _memfds()
    assert rt.aclrtBinaryLoadFromData(data, ctypes.c_size_t(len(data)), None, ctypes.byref(handle)) == 0
    assert len(_memfds() - before) == 1
    assert rt.aclrtBinaryGetFunction(handle, b"answer", ctypes.byref(func)) == 0 and func.value
    assert rt.aclrtBinaryUnLoad(handle) == 0
    assert len(_memfds() - before) == 0
