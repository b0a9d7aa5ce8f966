"""Compile-side fuzzing: mutated ONNX models (tools/onnx_mutants.py) through om2gen.compile, each
case in a child process with a timeout, classified as

  typed      an om2gen error (om2gen.Om2Error), as a hostile model should get
  untyped    any other exception: an om2gen bug (the table names its type and where it was raised)
  ok         compiled
  cc-failed  a CompileError from the C compiler: typed, but om2gen generated C that does not build
             (a case the frontend or an op should have refused, or a codegen bug)
  run-failed with --stage run: compiled, but loading the archive or running it raised an om2gen
             error (what compile should have refused)
  wrong      with --stage run: the outputs differ from ONNX Runtime's on the same inputs
  hang       no answer within --timeout seconds (the worker is killed and replaced)
  crash      the worker died (a signal, or an exit without an answer)

    python tools/fuzz_compile.py [--cases N] [--seed S] [--jobs J] [--timeout SEC] [--stage lower|full|run]
    python tools/fuzz_compile.py --seed S --case I     # one case in this process, with its traceback

--stage full (the default) runs all of om2gen.compile into a temporary .om2; --stage lower stops
where the C toolchain would start (everything that reads the model has run by then), which is
fast enough for the test suite (tests/errors/test_hostile_onnx.py); --stage run also loads each
archive that compiled, runs it once on seeded random inputs and compares with ONNX Runtime where
ONNX Runtime runs the mutant too. Each worker's address space
is capped (--memory-gib), so a model that makes om2gen allocate too much shows up as an untyped
MemoryError instead of the machine swapping. Exit status: 1 if any case is untyped, cc-failed,
hung or crashed.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_mutants  # noqa: E402

RUN_LIMIT_BYTES = 512 << 20   # --stage run: bigger models are compiled, not run
KINDS = ("typed", "untyped", "ok", "cc-failed", "run-failed", "wrong", "hang", "crash")
BAD = ("untyped", "cc-failed", "run-failed", "wrong", "hang", "crash")


@dataclass
class Result:
    index: int
    seed_model: str
    changes: list[str]
    kind: str
    error: str = ""           # the exception's class name (typed, untyped)
    where: str = ""           # untyped: file:line function of the innermost om2gen frame
    message: str = ""
    seconds: float = 0.0
    note: str = ""            # ok with --stage run: why the outputs were not compared


class _StopBeforeToolchain(Exception):
    """Raised in place of the kernel build with --stage lower: the case got that far."""


# ---- the worker: one child process, one case per line on stdin, one JSON answer per line ----

def _where(tb) -> str:
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "/om2gen/" in f.filename] or frames
    f = ours[-1]
    return f"{f.filename.split('/om2gen/')[-1] if '/om2gen/' in f.filename else Path(f.filename).name}:" \
           f"{f.lineno} {f.name}"


def compile_one(model_path: str, stage: str, archive: str) -> dict:
    """Compiles one model into `archive`; the answer as a dict (kind, error, where, message)."""
    import om2gen
    from om2gen.toolchain import compiler

    real_build_all = compiler.build_all
    if stage == "lower":
        def stop(*args, **kwargs):
            raise _StopBeforeToolchain
        compiler.build_all = stop
    try:
        om2gen.compile(model_path, archive)
    except _StopBeforeToolchain:
        return {"kind": "ok"}
    except om2gen.CompileError as exc:
        text = str(exc)
        if text.startswith("compiling ") and " failed (exit " in text:
            diagnostic = next((ln for ln in text.splitlines() if "error:" in ln), text.splitlines()[0])
            what = re.sub(r"_[0-9a-f]{8,}$", "", text.split(" failed")[0])   # the kernel's op, not its hash
            return {"kind": "cc-failed", "error": "CompileError", "where": what,
                    "message": diagnostic[:400]}
        return {"kind": "typed", "error": "CompileError", "message": text[:400]}
    except om2gen.Om2Error as exc:
        return {"kind": "typed", "error": type(exc).__name__, "message": str(exc)[:400]}
    except BaseException as exc:   # noqa: BLE001: every other exception is what this tool looks for
        return {"kind": "untyped", "error": type(exc).__name__, "where": _where(exc.__traceback__),
                "message": str(exc)[:400]}
    finally:
        compiler.build_all = real_build_all
    return run_archive(model_path, archive) if stage == "run" else {"kind": "ok"}


def run_archive(model_path: str, path: str) -> dict:
    """Loads a compiled archive and runs it once on seeded random inputs; where ONNX Runtime runs
    the same model, the outputs must agree (else the case is `wrong`)."""
    import numpy as np

    import om2gen
    size = _memory_needed(path)
    if size > RUN_LIMIT_BYTES:
        return {"kind": "ok", "note": f"not run: needs {size >> 20} MiB"}
    rng = np.random.default_rng(0)
    try:
        with om2gen.load(path) as model:
            feeds = {i.name: _random(rng, i.dtype, i.shape) for i in model.inputs}
            got = model.run(feeds)
    except om2gen.Om2Error as exc:
        return {"kind": "run-failed", "error": type(exc).__name__, "message": str(exc)[:400]}
    except BaseException as exc:   # noqa: BLE001
        return {"kind": "untyped", "error": type(exc).__name__, "where": _where(exc.__traceback__),
                "message": str(exc)[:400]}
    if _unspecified_order(model_path):
        return {"kind": "ok", "note": "not compared: a TopK with sorted=0 may return any order"}
    ref = _reference(model_path, feeds)
    if ref is None:
        return {"kind": "ok", "note": "ONNX Runtime refuses the model"}
    for name, r in ref.items():
        problem = _differs(got.get(name), r)
        if problem:
            return {"kind": "wrong", "where": f"output {name}", "message": problem}
    return {"kind": "ok"}


def _unspecified_order(model_path: str) -> bool:
    import onnx
    return any(n.op_type == "TopK" and any(a.name == "sorted" and a.i == 0 for a in n.attribute)
               for n in onnx.load(model_path).graph.node)


def _memory_needed(path: str) -> int:
    """Workspace, inputs and outputs of the archive's model, from its model_meta.json."""
    from om2gen.formats.om2 import layout
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read(layout.model_meta(0)))
    return int(meta["work_size"]) + sum(int(t["size"]) for t in meta["inputs"] + meta["outputs"])


def _random(rng, dtype, shape):
    import numpy as np
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 4, shape).astype(dtype)


def _reference(model_path: str, feeds: dict) -> dict | None:
    """ONNX Runtime's outputs, or None if it cannot run the model."""
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds)))
    except Exception:   # noqa: BLE001: ORT's refusal is not om2gen's result
        return None


def _differs(got, ref) -> str | None:
    import numpy as np
    if got is None:
        return "missing"
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"{got.dtype}{list(got.shape)}, ONNX Runtime gives {ref.dtype}{list(ref.shape)}"
    if ref.dtype.kind != "f":
        return None if np.array_equal(got, ref) else "values differ"
    if not np.array_equal(np.isnan(got), np.isnan(ref)):
        return "NaN positions differ"
    finite = np.isfinite(ref)
    if not np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)]):
        return "infinities differ"
    if not finite.any():
        return None
    err = float(np.max(np.abs(got[finite].astype(np.float64) - ref[finite])))
    bound = 1e-3 * max(1.0, float(np.max(np.abs(ref[finite]))))
    return None if err <= bound else f"max abs error {err:.3g} > {bound:.3g}"


def worker(memory_gib: float) -> None:
    import resource
    limit = int(memory_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())   # whatever the compile prints is not an answer
    import om2gen  # noqa: F401: imported before the first case's clock starts
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:   # the parent owns every file named here (a killed worker leaves nothing)
        job = json.loads(line)
        t0 = time.monotonic()
        answer = compile_one(job["path"], job["stage"], job["archive"])
        answer["seconds"] = time.monotonic() - t0
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


class _Worker:
    def __init__(self, memory_gib: float):
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", "--memory-gib", str(memory_gib)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.job, self.started, self.files = None, 0.0, ()
        if self.proc.stdout.readline() != "ready\n":
            raise RuntimeError(f"a fuzz worker did not start (exit {self.proc.wait()}); run "
                               f"{sys.executable} {__file__} --worker to see why")

    def send(self, job, path: str, stage: str) -> None:
        self.job, self.started, self.files = job, time.monotonic(), (path, path + ".om2")
        self.proc.stdin.write(json.dumps({"path": path, "stage": stage, "archive": path + ".om2"}) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run(cases: int, seed: int, *, jobs: int | None = None, timeout: float = 120.0, stage: str = "full",
        memory_gib: float = 6.0, first: int = 0, progress=None) -> list[Result]:
    """Runs cases first .. first+cases-1 of `seed`; one Result per case, in case order."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, cases))
    todo = collections.deque(range(first, first + cases))
    results: dict[int, Result] = {}
    with tempfile.TemporaryDirectory(prefix="om2gen-fuzz-cases-") as tmp:
        workers = [_Worker(memory_gib) for _ in range(jobs)]

        def feed(w: _Worker) -> None:
            if not todo:
                w.job = None
                return
            index = todo.popleft()
            name, model, changes = onnx_mutants.case(seed, index)
            path = os.path.join(tmp, f"case_{index}.onnx")
            Path(path).write_bytes(model.SerializeToString())
            w.send(Result(index, name, changes, "crash"), path, stage)

        for w in workers:
            feed(w)
        while any(w.job for w in workers):
            busy = [w for w in workers if w.job]
            ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 1.0)
            for i, w in enumerate(workers):
                if not w.job:
                    continue
                elapsed, files = time.monotonic() - w.started, w.files
                if w.proc.stdout in ready:
                    line = w.proc.stdout.readline()
                    res = w.job
                    if line:
                        answer = json.loads(line)
                        res.kind, res.seconds = answer.pop("kind"), answer.pop("seconds")
                        res.error, res.where = answer.get("error", ""), answer.get("where", "")
                        res.message, res.note = answer.get("message", ""), answer.get("note", "")
                    else:   # the worker died: a crash; start another
                        w.proc.wait()
                        res.kind, res.seconds, res.error = "crash", elapsed, f"exit {w.proc.returncode}"
                        workers[i] = w = _Worker(memory_gib)
                elif elapsed > timeout:
                    res = w.job
                    res.kind, res.seconds = "hang", elapsed
                    w.kill()
                    workers[i] = w = _Worker(memory_gib)
                else:
                    continue
                results[res.index] = res
                for f in files:
                    if os.path.exists(f):
                        os.remove(f)
                if progress:
                    progress(len(results), cases)
                feed(w)
        for w in workers:
            w.proc.stdin.close()
            w.proc.wait()
    return [results[i] for i in sorted(results)]


# ---- the report ----

def summary(results: list[Result], show: int = 20) -> str:
    """A markdown table per seed model and kind, then the untyped/hang/crash cases grouped by where."""
    counts = collections.Counter((r.seed_model, r.kind) for r in results)
    models = sorted({r.seed_model for r in results})
    lines = ["| seed model | cases | " + " | ".join(KINDS) + " |", "|---|---|" + "---|" * len(KINDS)]
    for m in models + ["all"]:
        row = [counts[(m, k)] if m != "all" else sum(counts[(x, k)] for x in models) for k in KINDS]
        lines.append(f"| {m} | {sum(row)} | " + " | ".join(map(str, row)) + " |")
    typed = collections.Counter(r.error for r in results if r.kind == "typed")
    lines.append("")
    lines.append("typed errors: " + (", ".join(f"{e} {n}" for e, n in typed.most_common()) or "none"))
    notes = collections.Counter(r.note.split(":")[0] for r in results if r.note)
    if notes:
        lines.append("ok but not compared: " + ", ".join(f"{n} {c}" for n, c in notes.most_common()))
    bad = [r for r in results if r.kind in BAD]
    groups = collections.defaultdict(list)
    for r in bad:
        groups[(r.kind, r.error, r.where)].append(r)
    if groups:
        lines += ["", "| kind | exception | where | cases | e.g. case | change | message |", "|---|---|---|---|---|---|---|"]
        for (kind, error, where), rs in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:show]:
            r = rs[0]
            msg = r.message.replace("|", "/").replace("\n", " ")[:100]
            lines.append(f"| {kind} | {error} | {where} | {len(rs)} | {r.index} | {'; '.join(r.changes)[:120]} "
                         f"| {msg} |")
    return "\n".join(lines)


def replay(seed: int, index: int, stage: str) -> None:
    """One case in this process: what it changed, then the compile with a full traceback."""
    name, model, changes = onnx_mutants.case(seed, index)
    print(f"case {index} of seed {seed}: {name}; " + "; ".join(changes))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.onnx")
        Path(path).write_bytes(model.SerializeToString())
        answer = compile_one(path, stage, os.path.join(tmp, "case.om2"))
        print(json.dumps(answer, indent=1))
        if answer["kind"] == "untyped":
            import om2gen
            om2gen.compile(path, os.path.join(tmp, "case.om2"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first", type=int, default=0, help="index of the first case")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a hang")
    p.add_argument("--stage", choices=("lower", "full", "run"), default="full")
    p.add_argument("--memory-gib", type=float, default=6.0, help="address-space cap of each worker")
    p.add_argument("--show", type=int, default=20, help="rows of failing cases to list")
    p.add_argument("--json", type=Path, help="write every result here")
    p.add_argument("--case", type=int, help="replay this one case in-process")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.memory_gib)
        return 0
    if args.case is not None:
        replay(args.seed, args.case, args.stage)
        return 0
    t0 = time.monotonic()

    def progress(done, total):
        print(f"\r{done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    results = run(args.cases, args.seed, jobs=args.jobs, timeout=args.timeout, stage=args.stage,
                  memory_gib=args.memory_gib, first=args.first, progress=progress)
    print(f"{len(results)} cases, seed {args.seed}, stage {args.stage}, {time.monotonic() - t0:.0f} s\n")
    print(summary(results, args.show))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return int(any(r.kind in BAD for r in results))


if __name__ == "__main__":
    sys.exit(main())
