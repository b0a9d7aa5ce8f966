"""Draws the cases (deterministically from the seed), runs each in a child process and classifies it.

Case `<fmt>-<n>` is mutant n of that format, `<fmt>-use-<n>` misuse case n on that format; each is
drawn from random.Random(f"{seed}/{section}/{n}") alone, so `--only ID` rebuilds exactly that case
whatever --cases says. Families take turns by weight (FAMILIES dicts), so the mix is the same at
any size."""
from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import random
import re
import shutil
import signal
import sys
import time
import types
from multiprocessing.connection import wait
from pathlib import Path

from . import misuse, models, mutate_om, mutate_om2

OUTCOMES = ("typed", "other", "crash", "hang", "wrong", "ok")
GENUINE = "genuine models, unchanged (baseline)"
BAD = ("other", "crash", "hang", "wrong", "harness")


@dataclasses.dataclass
class Case:
    id: str
    section: str          # "om2", "om" (mutants) or "misuse"
    family: str
    description: str
    fmt: str
    model: str
    scenario: str = "mutant"
    data: bytes | None = None          # the file the child loads (None: the genuine model)
    params: dict = dataclasses.field(default_factory=dict)
    as_bytes: bool = False
    reference: object = "model"        # "model": the model's reference outputs; None: must be refused


@dataclasses.dataclass
class Result:
    id: str
    section: str
    family: str
    description: str
    outcome: str
    kind: str = ""
    stage: str = ""
    where: str = ""
    message: str = ""
    seconds: float = 0.0


class _MisuseView:
    """What misuse families see of one genuine model in one format."""

    def __init__(self, ctx, fmt, model):
        self.fmt, self.formats = fmt, ("om2", "om")
        self.data = ctx.models[model].data(fmt)
        self._base = ctx.base(fmt, model)

    def weights_span(self, rng):
        if self.fmt == "om2":
            e = self._base.by_name[self._base.constants]
            start, end = e.data_start, e.data_end
        else:
            start, end = self._base.spans.get(mutate_om.PT.WEIGHTS_DATA, (0, 64))
        length = max(1, min(end - start, rng.choice((4, 64, 4096, end - start))))
        return start + rng.randrange(max(1, end - start - length + 1)), length


class Context:
    def __init__(self, work: Path, seed: int):
        self.work, self.seed = Path(work).resolve(), seed
        self.models = models.build(work / "models", seed)
        self._bases = {}

    def base(self, fmt: str, model: str):
        key = (fmt, model)
        if key not in self._bases:
            if fmt == "om2":
                mk = lambda n: mutate_om2.Base(n, self.models[n].data("om2"),  # noqa: E731
                                               mutate_om2.zipkit.parse(self.models[n].data("om2")), [])
            else:
                mk = lambda n: mutate_om.Base(n, self.models[n].data("om"), [])  # noqa: E731
            b = mk(model)
            b.others = [mk(n) for n in models.MODEL_NAMES if n != model]
            self._bases[key] = b
        return self._bases[key]

    @staticmethod
    def _slots(families: dict) -> list[str]:
        return [name for name, (weight, _) in families.items() for _ in range(weight)]

    def case(self, case_id: str) -> Case:
        g = re.fullmatch(r"(om2|om)-genuine-(\w+)", case_id)
        if g and g.group(2) in self.models:
            return Case(case_id, g.group(1), GENUINE, "the compiled model, unchanged", g.group(1), g.group(2))
        m = re.fullmatch(r"(om2|om)-(use-)?(\d+)", case_id)
        if not m:
            raise ValueError(f"case id {case_id!r}: expected om2-N, om-N, om2-use-N, om-use-N or om2-genuine-MODEL")
        fmt, use, index = m.group(1), bool(m.group(2)), int(m.group(3))
        section = "misuse" if use else fmt
        families = misuse.FAMILIES if use else (mutate_om2.FAMILIES if fmt == "om2" else mutate_om.FAMILIES)
        slots = self._slots(families)
        family = slots[index % len(slots)]
        rng = random.Random(f"{self.seed}/{fmt}{'/use' if use else ''}/{index}")
        model = rng.choice(models.MODEL_NAMES)
        fn = families[family][1]
        if not use:
            desc, data = fn(rng, self.base(fmt, model))
            as_bytes = rng.random() < 0.1
            return Case(case_id, section, family, desc + (" [loaded from bytes]" if as_bytes else ""), fmt, model,
                        data=data, as_bytes=as_bytes)
        desc, scenario, params, extra = fn(rng, _MisuseView(self, fmt, model))
        case = Case(case_id, section, family, f"{fmt} {model}: {desc}", fmt, model, scenario, params=params)
        if extra.get("tamper"):
            base = self.base(fmt, model)
            case.data = misuse.tampered_om2(base) if fmt == "om2" else misuse.tampered_om(base)
        if scenario == "inputs":
            case.reference = self._input_reference(case)
        return case

    def _input_reference(self, case: Case):
        from . import feeds
        scratch = self.work / "scratch" / "reference"
        scratch.mkdir(parents=True, exist_ok=True)
        meaning = feeds.meaning(case.params, self.models[case.model].inputs, scratch)
        feeds.cleanup(scratch)
        if meaning is None:
            return None
        return models.ort_run(self.models[case.model].onnx_path, meaning)

    def ids(self, formats, cases: int, misuse_cases: int) -> list[str]:
        out = []
        for fmt in formats:
            out += [f"{fmt}-genuine-{name}" for name in models.MODEL_NAMES]
            out += [f"{fmt}-{i}" for i in range(cases)]
            out += [f"{fmt}-use-{i}" for i in range(misuse_cases)]
        return out

    def spec(self, case: Case, timeout: float, mem_limit: int) -> dict:
        """What the child gets. Writes the case's file (a mutant, or a copy of the genuine model)."""
        model = self.models[case.model]
        for d in ("cases", "logs", "scratch"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        path = self.work / "cases" / f"{case.id}.{case.fmt}"
        path.write_bytes(case.data if case.data is not None else model.data(case.fmt))
        scratch = self.work / "scratch" / case.id
        scratch.mkdir(exist_ok=True)
        params = dict(case.params)
        for k, v in params.items():
            if v == "@other":
                other = next(n for n in models.MODEL_NAMES if n != case.model)
                params[k] = str(self.models[other].paths[case.fmt])
            elif isinstance(v, str) and v.startswith("@genuine:"):
                params[k] = str(model.paths[v.split(":", 1)[1]])
        reference = model.reference if case.reference == "model" else case.reference
        return {"id": case.id, "scenario": case.scenario, "path": str(path), "as_bytes": case.as_bytes,
                "inputs": model.inputs, "reference": reference, "params": params, "scratch": str(scratch),
                "log": str(self.work / "logs" / f"{case.id}.log"), "timeout": timeout, "mem_limit": mem_limit}

    def cleanup(self, case: Case, keep: Path | None, bad: bool) -> None:
        path = self.work / "cases" / f"{case.id}.{case.fmt}"
        log = self.work / "logs" / f"{case.id}.log"
        if keep is not None and bad:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, keep / path.name)
            if log.exists():
                shutil.copy(log, keep / log.name)
        path.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        shutil.rmtree(self.work / "scratch" / case.id, ignore_errors=True)


# ---- running the children -----------------------------------------------------------------------------
_FRAME = re.compile(r'File "([^"]*/om2gen/[^"]*)", line (\d+) in (\S+)')
_NOTABLE = re.compile(r"(Fatal Python error: .*|.*double free.*|.*corrupted.*|malloc\(\).*|free\(\).*|"
                      r".*stack smashing.*|Inconsistency detected by ld\.so.*|.*assertion.*failed.*)")


def _log_facts(path: Path) -> tuple[str, str]:
    """(the notable line, the innermost om2gen frame) of a child's log (faulthandler's dump)."""
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return "", ""
    notable = next((m.group(0).strip() for m in _NOTABLE.finditer(text)), "")
    block = text[text.rfind("Current thread"):] if "Current thread" in text else text
    frame = _FRAME.search(block) or _FRAME.search(text)
    where = ""
    if frame:
        p = frame.group(1)
        where = f"{p[p.rindex('/om2gen/') + 1:]}:{frame.group(2)} {frame.group(3)}"
    return notable[:200], where


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_SERVER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}   # no thread running in the fork server


@contextlib.contextmanager
def _starting(work: Path):
    """Around Process.start(). multiprocessing re-imports the parent's __main__ (this script, or
    pytest) in every child it starts, and the children need only fuzz.child, which the fork server
    has imported already. The fork server, started by the first start(), must import the same
    om2gen as this process (Python 3.11's fork server ignores the parent's sys.path and puts its
    working directory first: it is started in `work`, with this om2gen and tools/ on PYTHONPATH),
    and must not run OpenBLAS threads (it forks)."""
    import om2gen
    paths = [str(Path(__file__).resolve().parents[1]), str(Path(om2gen.__file__).resolve().parents[1])]
    env = dict(_SERVER_ENV, PYTHONPATH=os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    main, saved, cwd = sys.modules["__main__"], {k: os.environ.get(k) for k in env}, os.getcwd()
    sys.modules["__main__"] = types.ModuleType("__main__")
    os.environ.update(env)
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.modules["__main__"] = main
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Running:
    def __init__(self, case, spec, proc, conn):
        self.case, self.spec, self.proc, self.conn = case, spec, proc, conn
        self.start, self.stage, self.final = time.monotonic(), "start", None

    def drain(self):
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if "final" in msg:
                    self.final = msg["final"]
                else:
                    self.stage = msg["stage"]
        except (EOFError, OSError):
            pass


def _classify(r: _Running, timed_out: bool) -> Result:
    c = r.case
    res = Result(c.id, c.section, c.family, c.description, "ok", seconds=time.monotonic() - r.start)
    notable, frame = _log_facts(Path(r.spec["log"]))
    if timed_out:
        res.outcome, res.kind, res.stage, res.where, res.message = "hang", f"> {r.spec['timeout']:g} s", r.stage, \
            frame, notable
    elif r.proc.exitcode and r.proc.exitcode < 0 or r.final is None:
        code = r.proc.exitcode
        res.outcome = "crash"
        res.kind = _signal_name(code) if code and code < 0 else f"exit code {code}"
        res.stage, res.where, res.message = r.stage, frame, notable
    else:
        f = r.final
        res.outcome, res.kind, res.stage = f["outcome"], f.get("kind", ""), f.get("stage", "")
        res.where, res.message = f.get("where", ""), f.get("message", "")
    return res


def execute(ctx: Context, ids, *, jobs: int, timeout: float, mem_limit: int, keep: Path | None = None,
            progress=None) -> list[Result]:
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["numpy", "om2gen", "om2gen.runtime.model", "om2gen.acl", "fuzz.child", "fuzz.feeds"])
    import om2gen

    from . import child
    om2gen_file = om2gen.__file__
    results, running, pending = [], [], list(ids)[::-1]
    while pending or running:
        while pending and len(running) < jobs:
            case_id = pending.pop()
            try:
                case = ctx.case(case_id)
                spec = ctx.spec(case, timeout, mem_limit)
            except Exception as e:   # noqa: BLE001 - a mutator's own bug: reported, never hidden
                results.append(Result(case_id, "?", "?", "", "harness", type(e).__name__, "generate", "", str(e)[:200]))
                continue
            parent, child_end = mp.Pipe(duplex=False)
            proc = mp.Process(target=child.main, args=(spec, child_end), daemon=True)
            with _starting(ctx.work):
                proc.start()
            child_end.close()
            running.append(_Running(case, spec, proc, parent))
        wait([r.conn for r in running] + [r.proc.sentinel for r in running], timeout=0.2)
        still = []
        for r in running:
            r.drain()
            timed_out = r.proc.exitcode is None and time.monotonic() - r.start > timeout
            if timed_out:
                r.proc.kill()
            if r.proc.exitcode is None and not timed_out:
                still.append(r)
                continue
            r.proc.join()
            r.drain()
            r.conn.close()
            if r.final and r.final.get("om2gen") != om2gen_file:
                raise RuntimeError(f"the children run {r.final.get('om2gen')}, this process {om2gen_file}")
            res = _classify(r, timed_out)
            results.append(res)
            ctx.cleanup(r.case, keep, res.outcome in BAD)
            if progress:
                progress(res, len(results))
        running = still
    order = {i: n for n, i in enumerate(ids)}
    return sorted(results, key=lambda r: order.get(r.id, -1))


def run_inline(ctx: Context, case_id: str, timeout: float) -> None:
    """The case in this process, without a child: exceptions propagate with their traceback (for a
    debugger)."""
    from . import child
    case = ctx.case(case_id)
    spec = ctx.spec(case, timeout, 0)

    class _Print:
        stage = ""

        def __call__(self, stage):
            self.stage = stage
            print(f"  stage: {stage}", flush=True)
    print(f"{case.id} [{case.family}] {case.description}")
    print(child.SCENARIOS[spec["scenario"]](spec, _Print()))
