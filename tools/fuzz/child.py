"""What runs in the child process of one case: load, run, close (or a misuse scenario), reporting
each stage to the parent so that a crash or a hang is known by where it happened.

The parent forks these children from a fork server that has imported om2gen and numpy (and
nothing else: no model is loaded there, and no thread is running), so a case costs a fork instead
of a 2-second interpreter start, and each case still has a process of its own."""
from __future__ import annotations

import faulthandler
import os
import resource
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

import om2gen
from om2gen.errors import Om2Error

TOLERANCE = 1e-4
MAX_FEED_BYTES = 64 << 20


class Reporter:
    def __init__(self, conn):
        self.conn, self.stage = conn, "start"

    def __call__(self, stage: str) -> None:
        self.stage = stage
        self.conn.send({"stage": stage})


def where(exc: BaseException) -> str:
    """The innermost frame of the traceback inside om2gen (file:line function)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/om2gen/" in f.filename.replace("\\", "/")]
    if not frames:
        return ""
    f = frames[-1]
    path = f.filename.replace("\\", "/")
    return f"{path[path.rindex('/om2gen/') + 1:]}:{f.lineno} {f.name}"


def exc_result(exc: BaseException, stage: str) -> dict:
    return {"outcome": "typed" if isinstance(exc, Om2Error) else "other", "stage": stage, "kind": type(exc).__name__,
            "message": str(exc).splitlines()[0][:300] if str(exc) else "", "where": where(exc)}


def compare(got, reference: dict) -> str | None:
    """None if `got` equals the reference under the project's float32 rule; else what differs."""
    if not isinstance(got, dict) or sorted(got) != sorted(reference):
        return f"outputs {sorted(got) if isinstance(got, dict) else type(got).__name__} instead of {sorted(reference)}"
    for name, ref in reference.items():
        g = got[name]
        if not isinstance(g, np.ndarray) or g.shape != ref.shape or g.dtype != ref.dtype:
            return (f"{name}: {getattr(g, 'dtype', type(g).__name__)}{list(getattr(g, 'shape', ()))} instead of "
                    f"{ref.dtype}{list(ref.shape)}")
        nan = np.isnan(ref)
        if not np.array_equal(np.isnan(g), nan):
            return f"{name}: NaN at other positions"
        fin = np.isfinite(ref)
        if not np.array_equal(g[~fin & ~nan], ref[~fin & ~nan]):
            return f"{name}: infinities differ"
        if fin.any():
            bound = TOLERANCE * max(1.0, float(np.abs(ref[fin]).max()))
            err = float(np.abs(g[fin].astype(np.float64) - ref[fin]).max())
            if not err <= bound:
                return f"{name}: max abs error {err:.3g} > {bound:.3g}"
    return None


def _io_diff(m, inputs: dict, reference: dict) -> str | None:
    """How the loaded model's description differs from what it was compiled for."""
    want_in = [(n, a.dtype, a.shape) for n, a in inputs.items()]
    want_out = [(n, a.dtype, a.shape) for n, a in reference.items()]
    got_in = [(t.name, t.dtype, tuple(t.shape)) for t in m.inputs]
    got_out = [(t.name, t.dtype, tuple(t.shape)) for t in m.outputs]
    if got_in != want_in or got_out != want_out:
        fmt = lambda xs: ", ".join(f"{n} {d}{list(s)}" for n, d, s in xs)[:200]  # noqa: E731
        return f"loaded as ({fmt(got_in)}) -> ({fmt(got_out)}), compiled as ({fmt(want_in)}) -> ({fmt(want_out)})"
    return None


def _feeds_for(m, inputs: dict):
    """Feeds that match what the model says it takes (a server builds its inputs from m.inputs):
    the fixed inputs where they match, else their values resized; None if absurdly large."""
    feeds, values = {}, list(inputs.values())
    for i, t in enumerate(m.inputs):
        base = inputs.get(t.name, values[min(i, len(values) - 1)])
        if base.dtype == t.dtype and base.shape == tuple(t.shape):
            feeds[t.name] = base
        elif t.nbytes > MAX_FEED_BYTES:
            return None
        else:
            feeds[t.name] = np.resize(base, tuple(t.shape)).astype(t.dtype)
    return feeds


def _load(spec, report, path=None, **kw):
    report("load")
    path = path or spec["path"]
    if spec.get("as_bytes"):
        return om2gen.load(Path(path).read_bytes(), **kw)
    return om2gen.load(path, **kw)


def run_checked(m, spec, report) -> dict:
    """run() on the fixed inputs, compared; then close()."""
    report("describe")
    problem = _io_diff(m, spec["inputs"], spec["reference"])
    try:
        feeds = _feeds_for(m, spec["inputs"])
    except Exception as e:   # noqa: BLE001 - inputs as the model describes them cannot be made
        if not problem:
            return {"outcome": "harness", "stage": "feeds", "kind": type(e).__name__, "message": str(e)[:300]}
        feeds, problem = None, f"{problem} ({type(e).__name__}: {e})"
    if feeds is None:
        report("close")
        m.close()
        return {"outcome": "wrong", "stage": "describe", "kind": "accepted", "message": problem}
    report("run")
    out = m.run(feeds)
    report("compare")
    diff = compare(out, spec["reference"])
    report("close")
    m.close()
    if problem or diff:
        return {"outcome": "wrong", "stage": "run", "kind": "wrong output" if diff else "wrong description",
                "message": problem or diff}
    return {"outcome": "ok"}


def scenario_mutant(spec, report) -> dict:
    return run_checked(_load(spec, report), spec, report)


# ---- misuse -------------------------------------------------------------------------------------------
def scenario_inputs(spec, report) -> dict:
    from . import feeds as feeds_mod
    try:
        feeds = feeds_mod.build(spec["params"], spec["inputs"], Path(spec["scratch"]))
    except Exception as e:   # noqa: BLE001 - the harness's own failure, not om2gen's
        return {"outcome": "harness", "stage": "feeds", "kind": type(e).__name__, "message": str(e)[:300]}
    m = _load(spec, report)
    report("run")
    try:
        out = m.run(feeds)
    except Om2Error as e:
        m.close()
        return exc_result(e, "run")
    report("compare")
    if spec["reference"] is None:
        m.close()
        return {"outcome": "wrong", "stage": "run", "kind": "accepted", "message": "run() accepted input it must refuse"}
    diff = compare(out, spec["reference"])
    report("close")
    m.close()
    return {"outcome": "wrong", "stage": "run", "kind": "wrong output", "message": diff} if diff else {"outcome": "ok"}


def scenario_raw(spec, report) -> dict:
    m = _load(spec, report)
    ins = [np.ascontiguousarray(a) for a in spec["inputs"].values()]
    outs = [np.empty(a.shape, a.dtype) for a in spec["reference"].values()]
    pin, pout = [a.ctypes.data for a in ins], [a.ctypes.data for a in outs]
    what = spec["params"]["what"]
    args = {"ok": (pin, pout), "no-inputs": ([], pout), "extra-input": (pin + pin, pout), "no-outputs": (pin, []),
            "null-input": ([0] * len(pin), pout), "null-output": (pin, [0] * len(pout)), "none": ([None], pout),
            "str": (["0x1000"], pout), "float": ([float(pin[0])], pout), "np-int": ([np.int64(pin[0])], pout),
            "array": ([ins[0]], pout), "tuple": (tuple(pin), tuple(pout)), "generator": ((p for p in pin), pout),
            "huge": ([1 << 64], pout)}[what]
    report("run")
    try:
        m.execute_raw(*args)
    except Om2Error as e:
        m.close()
        return exc_result(e, "run")
    valid = what in ("ok", "np-int", "tuple", "float")   # a float holding the exact address may be taken
    report("compare")
    diff = compare(dict(zip(spec["reference"], outs)), spec["reference"])
    m.close()
    if not valid:
        return {"outcome": "wrong", "stage": "run", "kind": "accepted", "message": f"execute_raw accepted {what}"}
    return {"outcome": "wrong", "stage": "run", "kind": "wrong output", "message": diff} if diff else {"outcome": "ok"}


def scenario_load_args(spec, report) -> dict:
    what = spec["params"]["what"]
    path = spec["path"]
    work = Path(spec["scratch"])
    valid = what in ("path", "pathlike", "bytes", "bytearray", "memoryview", "numpy", "mmap", "threads-1",
                     "threads-np", "mismatch-str")
    kw, source = {}, path
    if what == "path":
        pass
    elif what == "pathlike":
        source = Path(path)
    elif what in ("bytes", "bytearray", "memoryview", "numpy", "mmap", "memoryview-strided"):
        data = Path(path).read_bytes()
        if what == "mmap":
            import mmap
            with open(path, "rb") as f:
                source = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            source = {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data),
                      "numpy": np.frombuffer(data, np.uint8), "memoryview-strided": memoryview(data)[::2]}[what]
    elif what.startswith("threads-"):
        kw["threads"] = {"threads-0": 0, "threads-neg": -1, "threads-float": 1.5, "threads-str": "2", "threads-bool": True,
                         "threads-huge": 10 ** 9, "threads-1": 1, "threads-np": np.int64(2)}[what]
    elif what == "mismatch-str":
        kw["allow_platform_mismatch"] = "yes"
    elif what == "fifo":
        source = work / "fifo"
        os.mkfifo(source)
    elif what == "directory":
        source = work
    else:
        source = {"none": None, "int": 0, "float": 1.5, "list": [], "dict": {}, "object": object(), "missing":
                  str(work / "missing.om2"), "empty-path": "", "nul-path": path + "\0x", "long-path": "x" * 5000,
                  "empty-bytes": b"", "magic-only": b"PK\x03\x04", "om-magic-only": b"IMOD", "dev-null": "/dev/null",
                  "dev-zero": "/dev/zero", "proc": "/proc/self/maps", "str-content": Path(path).read_bytes()[:64].decode(
                      "latin-1")}[what]
    report("load")
    try:
        m = om2gen.load(source, **kw)
    except Om2Error as e:
        return exc_result(e, "load")
    if not valid:
        m.close()
        return {"outcome": "wrong", "stage": "load", "kind": "accepted", "message": f"load() accepted {what}"}
    return run_checked(m, spec, report)


class _Threads:
    """Runs functions in threads, collecting what each raised and each run's outputs."""

    def __init__(self):
        self.errors, self.outputs, self.threads = [], [], []

    def start(self, fn, *args):
        def body():
            try:
                fn(*args)
            except BaseException as e:   # noqa: BLE001 - every exception is a result here
                self.errors.append(e)
        t = threading.Thread(target=body, daemon=True)
        self.threads.append(t)
        t.start()

    def join(self):
        for t in self.threads:
            t.join()

    def result(self, reference) -> dict:
        untyped = [e for e in self.errors if not isinstance(e, Om2Error)]
        for out in self.outputs:
            diff = compare(out, reference)
            if diff:
                return {"outcome": "wrong", "stage": "run", "kind": "wrong output", "message": diff}
        if untyped:
            return exc_result(untyped[0], "threads")
        if self.errors:
            return exc_result(self.errors[0], "threads")
        return {"outcome": "ok"}


def scenario_race_close(spec, report) -> dict:
    p = spec["params"]
    m = _load(spec, report)
    th = _Threads()
    ins = [np.ascontiguousarray(a) for a in spec["inputs"].values()]
    barrier = threading.Barrier(2)

    def runner():
        barrier.wait()
        for _ in range(p["runs"]):
            if p["api"] == "run":
                th.outputs.append(m.run(spec["inputs"]))
            else:
                outs = [np.empty(a.shape, a.dtype) for a in spec["reference"].values()]
                m.execute_raw([a.ctypes.data for a in ins], [a.ctypes.data for a in outs])
                th.outputs.append(dict(zip(spec["reference"], outs)))

    def closer():
        barrier.wait()
        time.sleep(p["delay_us"] / 1e6)
        m.close()
    report("race")
    th.start(runner)
    th.start(closer)
    th.join()
    report("close")
    m.close()
    return th.result(spec["reference"])


def scenario_double_close(spec, report) -> dict:
    p = spec["params"]
    m = _load(spec, report)
    if p["run_first"]:
        report("run")
        m.run(spec["inputs"])
    th = _Threads()
    barrier = threading.Barrier(p["threads"])

    def closer():
        barrier.wait()
        if p["via"] == "exit":
            m.__exit__(None, None, None)
        elif p["via"] == "del":
            m.__del__()
        else:
            m.close()
    report("close")
    for _ in range(p["threads"]):
        th.start(closer)
    th.join()
    report("run after close")
    try:
        m.run(spec["inputs"])
    except Om2Error:
        pass
    except BaseException as e:  # noqa: BLE001
        th.errors.append(e)
    else:
        return {"outcome": "wrong", "stage": "run", "kind": "accepted", "message": "run() after close() ran"}
    return th.result(spec["reference"])


def scenario_concurrent(spec, report) -> dict:
    p = spec["params"]
    th = _Threads()
    report("threads")
    if p["what"] == "runs":
        m = _load(spec, report)

        def runner():
            for _ in range(p["runs"]):
                th.outputs.append(m.run(spec["inputs"]))
        for _ in range(p["threads"]):
            th.start(runner)
        th.join()
        m.close()
        return th.result(spec["reference"])

    def loader():
        for _ in range(p["runs"]):
            with om2gen.load(spec["path"], threads=p.get("model_threads")) as mm:
                th.outputs.append(mm.run(spec["inputs"]))
    for _ in range(p["threads"]):
        th.start(loader)
    th.join()
    return th.result(spec["reference"])


def scenario_file_change(spec, report) -> dict:
    p = spec["params"]
    path = spec["path"]
    m = _load(spec, report)
    report("run before")
    first = m.run(spec["inputs"])
    report("change the file")
    action = p["action"]
    if action == "truncate":
        os.truncate(path, p["size"])
    elif action == "overwrite-range":
        with open(path, "r+b") as f:
            f.seek(p["offset"])
            f.write(bytes((x * 37 + 11) & 0xFF for x in range(p["length"])))
    elif action == "overwrite-other":
        data = Path(p["other"]).read_bytes()
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
    elif action == "rewrite-same":
        data = Path(path).read_bytes()
        with open(path, "r+b") as f:
            f.write(data)
    elif action == "replace":
        tmp = path + ".new"
        Path(tmp).write_bytes(Path(p["other"]).read_bytes())
        os.replace(tmp, path)
    elif action == "unlink":
        os.unlink(path)
    report("run after")
    out = [first]
    for _ in range(2):
        out.append(m.run(spec["inputs"]))
    report("close")
    m.close()
    for o in out:
        diff = compare(o, spec["reference"])
        if diff:
            return {"outcome": "wrong", "stage": "run after", "kind": "wrong output", "message": diff}
    return {"outcome": "ok"}


def scenario_poison(spec, report) -> dict:
    """A model whose kernel was tampered with (digest recomputed) stays loaded while the genuine
    model is loaded and run: the genuine one must run its own kernels."""
    p = spec["params"]
    report("load tampered")
    tampered = om2gen.load(spec["path"])
    report("load genuine")
    genuine = om2gen.load(p["genuine"])
    report("run genuine")
    out = genuine.run(spec["inputs"])
    genuine.close()
    tampered.close()
    diff = compare(out, spec["reference"])
    return {"outcome": "wrong", "stage": "run genuine", "kind": "wrong output", "message": diff} if diff else \
        {"outcome": "ok"}


SCENARIOS = {"mutant": scenario_mutant, "inputs": scenario_inputs, "raw": scenario_raw, "load_args": scenario_load_args,
             "race_close": scenario_race_close, "double_close": scenario_double_close, "concurrent": scenario_concurrent,
             "file_change": scenario_file_change, "poison": scenario_poison}


def main(spec: dict, conn) -> None:
    """The child's entry point (multiprocessing target)."""
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.dump_traceback_later(max(spec["timeout"] - 1.5, 0.5), exit=False, file=sys.stderr)
    if spec.get("mem_limit"):
        resource.setrlimit(resource.RLIMIT_AS, (spec["mem_limit"], spec["mem_limit"]))
    report = Reporter(conn)
    try:
        result = SCENARIOS[spec["scenario"]](spec, report)
    except BaseException as e:   # noqa: BLE001 - every exception is a result here
        result = exc_result(e, report.stage)
    faulthandler.cancel_dump_traceback_later()
    result["om2gen"] = om2gen.__file__
    conn.send({"final": result})
    conn.close()
