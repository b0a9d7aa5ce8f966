"""What a process reuses when it loads the same model again (formats/om2/reader.py's memo of small
archives, runtime/libraries.py's model libraries mapped once per content), and that nothing
reused ever stands in for different bytes."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import make_model, rand
from onnx import helper

import om2gen
from om2gen.formats.om2 import reader, zipdir
from om2gen.runtime import libraries


def _add_model(width: int):
    return make_model([helper.make_node("Add", ["x", "y"], ["z"])], {"x": rand(1, width), "y": rand(1, width)}, ["z"])


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse")
    paths = []
    for width in range(2, 2 + libraries.IDLE_KEPT + 3):
        path = d / f"add{width}.om2"
        om2gen.compile(_add_model(width), path)
        paths.append(path)
    return paths


def _feeds(width):
    return {"x": rand(1, width, seed=1), "y": rand(1, width, seed=2)}


def _count_directory_reads(monkeypatch) -> list:
    calls = []
    real = zipdir.read_directory

    def counting(view):
        calls.append(len(view))
        return real(view)
    monkeypatch.setattr(zipdir, "read_directory", counting)
    return calls


def test_same_bytes_are_parsed_and_verified_once(archives, monkeypatch):
    path = archives[0]
    om2gen.load(path).close()
    calls = _count_directory_reads(monkeypatch)
    digests = []
    monkeypatch.setattr(reader, "digest_matches", lambda e, d: digests.append(e["name"]) or True)
    for _ in range(3):
        with om2gen.load(path) as m:
            f = _feeds(2)
            np.testing.assert_array_equal(m.run(f)["z"], f["x"] + f["y"])
        with om2gen.load(path.read_bytes()) as m:   # the same bytes from memory
            assert m.run(f)["z"].shape == (1, 2)
    assert calls == [] and digests == []


def test_changed_bytes_are_never_served_from_the_memo(archives):
    path = archives[0]
    om2gen.load(path).close()
    data = bytearray(path.read_bytes())
    with reader.Archive(path) as a:
        name = next(n for n in a.names() if n.startswith("data/kernels_"))
        start, end = zipdir.data_span(a.image.view, a.info(name))
    data[(start + end) // 2] ^= 0x40   # one bit of a kernel: same size, same ZIP directory
    with pytest.raises(om2gen.ArchiveError, match="digest"):
        om2gen.load(bytes(data))


def test_meta_is_a_copy(archives):
    with om2gen.load(archives[0]) as m:
        m.meta["inputs"].clear()
        m.meta.clear()
    with om2gen.load(archives[0]) as m:
        assert [t["name"] for t in m.meta["inputs"]] == ["x", "y"]


def test_models_of_one_library_share_its_mapping(archives):
    libraries.unmap_idle()
    models = [om2gen.load(archives[1]) for _ in range(3)]
    try:
        assert libraries.mapped_count() == (1, 0)
        f = _feeds(3)
        for m in models:
            np.testing.assert_array_equal(m.run(f)["z"], f["x"] + f["y"])
        models.pop().close()
        assert libraries.mapped_count() == (1, 0)   # the others still use it
    finally:
        for m in models:
            m.close()
    assert libraries.mapped_count() == (0, 1)


def test_idle_libraries_are_bounded(archives):
    libraries.unmap_idle()
    for path in archives:
        om2gen.load(path).close()
    assert libraries.mapped_count() == (0, libraries.IDLE_KEPT)
    with om2gen.load(archives[-1]) as m:   # the most recent ones are the ones kept
        assert libraries.mapped_count() == (1, libraries.IDLE_KEPT - 1)
        f = _feeds(len(archives) + 1)
        np.testing.assert_array_equal(m.run(f)["z"], f["x"] + f["y"])


def test_threads_loading_one_model_at_once(archives):
    errors = []

    def worker(k):
        try:
            for _ in range(20):
                with om2gen.load(archives[k % 2]) as m:
                    f = _feeds(2 + k % 2)
                    np.testing.assert_array_equal(m.run(f)["z"], f["x"] + f["y"])
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[0]
    assert libraries.mapped_count()[0] == 0
