"""A process that loads, runs and closes models for hours: nothing may pile up.

Every om2gen.load + close once left the model library mapped (a thread_local std::string in the
generated code registered a TLS destructor, and glibc keeps such a library loaded until every
thread that touched it exits). The soak below counts mappings, memfd mappings, open files and
RSS around 1,000 load/run/close cycles of each format; OM2GEN_TEST_SCALE=N runs N times as many.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from helpers import rand

import om2gen
from om2gen.native import lib
from om2gen.runtime import libraries

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"
SCALE = max(1, int(os.environ.get("OM2GEN_TEST_SCALE", "1")))


def resources() -> dict[str, int]:
    maps = Path("/proc/self/maps").read_text().splitlines()
    return {   # file mappings: anonymous ones come and go with the allocators' arenas
        "file mappings": sum(len(line.split()) >= 6 and not line.split()[5].startswith("[") for line in maps),
        "memfd mappings": sum("memfd:" in line for line in maps),
        "open files": len(os.listdir("/proc/self/fd")),
        "rss_kib": int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024,
    }


@pytest.fixture(scope="module")
def sample_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("soak")
    paths = {}
    for fmt in ("om2", "om"):
        paths[fmt] = d / f"sample.{fmt}"
        om2gen.compile(SAMPLE, paths[fmt], input_shapes={"image": (1, 3, 32, 32)}, format=fmt)
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["om2", "om"])
def test_load_run_close_cycles_leave_resources_flat(sample_models, fmt):
    feeds = {"image": rand(1, 3, 32, 32)}
    with om2gen.load(sample_models[fmt]) as m:
        expected = m.run(feeds)["probs"]

    def cycle():
        with om2gen.load(sample_models[fmt]) as m:
            np.testing.assert_array_equal(m.run(feeds)["probs"], expected)

    for _ in range(50):   # allocator pools and caches settle
        cycle()
    before = resources()
    for _ in range(1000 * SCALE):
        cycle()
    after = resources()
    assert after["memfd mappings"] <= before["memfd mappings"], (before, after)
    assert after["open files"] <= before["open files"], (before, after)
    assert after["file mappings"] <= before["file mappings"], (before, after)
    assert after["rss_kib"] - before["rss_kib"] < 4096, (before, after)


def test_closed_model_library_is_kept_idle_then_unmapped(sample_models):
    libraries.unmap_idle()
    none = resources()["memfd mappings"]
    m = om2gen.load(sample_models["om2"])
    loaded = resources()["memfd mappings"]
    assert loaded > none
    m.close()   # kept mapped for a load of the same library (runtime/libraries.py)
    assert libraries.mapped_count() == (0, 1)
    assert resources()["memfd mappings"] == loaded
    assert libraries.unmap_idle() == 1
    assert resources()["memfd mappings"] == none


def test_each_model_keeps_the_thread_count_it_was_loaded_with(sample_models):
    feeds = {"image": rand(1, 3, 32, 32)}
    with om2gen.load(sample_models["om2"], threads=1) as a, om2gen.load(sample_models["om2"], threads=2) as b, \
            om2gen.load(sample_models["om"]) as c:
        assert (a.threads, b.threads, c.threads) == (1, 2, None)
        assert lib.om2rtGetIssueThreadCount() == 0   # loading leaves the caller's setting as it was
        ra, rb, rc = a.run(feeds)["probs"], b.run(feeds)["probs"], c.run(feeds)["probs"]
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(ra, rc)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2", 10**6])
def test_bad_thread_counts_are_input_errors(sample_models, threads):
    with pytest.raises(om2gen.InputError, match="threads"):
        om2gen.load(sample_models["om2"], threads=threads)


@pytest.mark.slow
def test_threads_loading_running_and_closing_at_once(sample_models):
    """Four threads, each with its own models and thread counts, loading, running and closing
    concurrently: every result is the single-threaded one, and nothing is left behind."""
    import threading
    feeds = {"image": rand(1, 3, 32, 32)}
    with om2gen.load(sample_models["om2"]) as m:
        expected = m.run(feeds)["probs"]
    before = resources()
    errors = []

    def worker(k):
        try:
            for i in range(25 * SCALE):
                fmt = "om2" if (i + k) % 3 else "om"
                with om2gen.load(sample_models[fmt], threads=1 + (i + k) % 2) as m:
                    for _ in range(3):
                        np.testing.assert_array_equal(m.run(feeds)["probs"], expected)
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not errors, errors[0]
    after = resources()
    assert after["memfd mappings"] <= before["memfd mappings"], (before, after)
    assert after["open files"] <= before["open files"], (before, after)
