"""Custom operators as an outside operator author writes them (issue 11, section 3): the library
given twice, an omitted optional output, hostile op types and node names, exceptions from the
hooks, and an op type no given library has. The library is tests/custom_op/author_ops.cpp,
built with `om2gen config` (authorlib.py)."""
from __future__ import annotations

import shutil
import zipfile

import numpy as np
import pytest
from authorlib import EVIL_OP_TYPES, build, model

import om2gen
from om2gen.formats.om2 import layout
from om2gen.so_in_om import custom_libraries

pytestmark = pytest.mark.needs_cc
X = np.ones((2, 4), np.float32)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build(tmp_path_factory.mktemp("author"))


def run(path, **feeds):
    with om2gen.load(path) as m:
        return m.run(feeds or {"x": X})


# --- 1. the same library twice ----------------------------------------------------------------

@pytest.mark.parametrize("how", ["same path twice", "a copy in the environment", "twice in the Python API"])
def test_the_same_library_given_twice_counts_once(lib, tmp_path, monkeypatch, how):
    libs = [lib, lib]
    if how == "a copy in the environment":
        (tmp_path / "env").mkdir()
        shutil.copy(lib, tmp_path / "env" / "libcopy.so")
        monkeypatch.setenv(custom_libraries.ENV_PATH, str(tmp_path / "env"))
        libs = [lib]
    elif how == "twice in the Python API":
        libs = [str(lib), lib.resolve()]
    out = tmp_path / "m.om2"
    om2gen.compile(model("GatedMul", ("y", "m"), inputs=("x", "g")), out, custom_op_libs=libs, progress=False)
    with zipfile.ZipFile(out) as z:
        packed = [n for n in z.namelist() if n.startswith(layout.CUSTOM_OPS_DIR + "shared_libs/")]
    assert packed == [layout.custom_op_library(layout.custom_op_library_name(
        lib.stat().st_size, custom_libraries.load_library(lib, None).sha256, lib.name))]
    assert run(out, x=X, g=X)["z0"][0, 0] == 203


def test_no_repr_or_error_prints_the_library_bytes(lib):
    library = custom_libraries.load_library(lib, None)
    assert "data=" not in repr(library) and len(repr(library)) < 2000
    from om2gen.formats.om2.writer import Entry
    from om2gen.so_in_om.providers import OppSo
    assert "\\x" not in repr(Entry("a.so", library.data))
    assert "\\x" not in repr(OppSo("v", lib, library.data, frozenset()))


# --- 2. optional outputs ----------------------------------------------------------------------

@pytest.mark.parametrize("outputs, expected", [
    (("y", ""), {"z0": 201}),               # 2 positions, the second omitted: both hooks see that
    (("y", "m"), {"z0": 203, "z1": 7}),     # 2 positions, both present
    (("y",), {"z0": 101}),                  # 1 position (a trailing output left off)
])
@pytest.mark.parametrize("suffix", [".om2", ".om"])
def test_both_hooks_see_the_same_output_positions(lib, tmp_path, outputs, expected, suffix):
    out = tmp_path / f"m{suffix}"
    om2gen.compile(model("GatedMul", outputs, inputs=("x", "g")), out, custom_op_libs=[lib], progress=False)
    got = run(out, x=X, g=X)
    assert {k: float(v[0, 0]) for k, v in got.items()} == expected


# --- 3. names that become archive entries and model source ------------------------------------

@pytest.mark.parametrize("op_type", EVIL_OP_TYPES, ids=range(len(EVIL_OP_TYPES)))
def test_hostile_op_types_and_node_names_make_safe_entry_names(lib, tmp_path, op_type):
    out = tmp_path / "m.om2"
    node_name = "../../n\x00ode/\u00fc\u00f1\u00ee/" + "N" * 300 + "*/ #error x"
    om2gen.compile(model(op_type, ("y",), node_name=node_name), out, custom_op_libs=[lib], progress=False)
    with zipfile.ZipFile(out) as z:
        names = [i.orig_filename for i in z.infolist()]
    assert [n for n in names if layout.unsafe_entry_name(n)] == []
    assert all(n.startswith(("manifest.json", "data/")) for n in names)
    assert run(out)["z0"][0, 0] == 1


# --- 4. exceptions from the hooks -------------------------------------------------------------

@pytest.mark.parametrize("where, error, what", [
    ("infer", om2gen.CompileError, "InferShape threw a C++ exception: Thrower: boom in infer"),
    ("compile", om2gen.CompileError, "Compile threw a C++ exception: Thrower: boom in compile"),
    ("serialize", om2gen.CompileError, "Serialize threw a C++ exception: Thrower: boom in serialize"),
    ("deserialize", om2gen.RuntimeFailure, "Deserialize threw a C++ exception: Thrower: boom in deserialize"),
    ("execute", om2gen.RuntimeFailure, "Execute threw a C++ exception: Thrower: boom in execute"),
    ("execute-int", om2gen.RuntimeFailure, "Execute threw a C++ exception that is not a std::exception"),
])
def test_an_exception_keeps_its_message_op_type_and_node(lib, tmp_path, where, error, what):
    out = tmp_path / "m.om2"
    node = f"thrower_at_{where}"
    with pytest.raises(error) as info:
        om2gen.compile(model("Thrower", ("y",), node_name=node, attrs={"where": where}), out,
                       custom_op_libs=[lib], progress=False)
        om2gen.load(out)
    message = str(info.value)
    assert what in message and "Thrower" in message and node in message, message


# --- 5. an op type no given library has -------------------------------------------------------

def test_an_op_no_library_has_names_the_libraries_and_what_they_provide(lib, tmp_path):
    with pytest.raises(om2gen.UnsupportedOpError) as info:
        om2gen.compile(model("GatedMull", ("y",), node_name="typo"), tmp_path / "m.om2", custom_op_libs=[lib],
                       progress=False)
    message = str(info.value)
    assert "'typo'" in message and "GatedMull" in message
    assert f"searched: {lib.name} (provides " in message and "GatedMul, Plain" not in message
    assert all(op in message for op in ("GatedMul", "Thrower", "../../../Evil"))
    assert "FusedElementwise" not in message and "om2gen." not in message


def test_internal_ops_are_not_listed_as_supported(tmp_path):
    from om2gen.ops import registry
    assert "om2gen.FusedElementwise" not in registry.supported_ops()
    with pytest.raises(om2gen.UnsupportedOpError) as info:
        om2gen.compile(model("NoSuchOp", ("y",)), tmp_path / "m.om2", progress=False)
    assert "FusedElementwise" not in str(info.value) and "Relu" in str(info.value)
