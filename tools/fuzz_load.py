#!/usr/bin/env python3
"""Load-side fuzzing of om2gen (issue 12): damaged and hostile .om2 / .om files through load + run +
close, and run-time misuse, each case in a child process so that a crash or a hang is counted.

    python tools/fuzz_load.py --cases 1500 --jobs 2 --details          # 1500 mutants per format
    python tools/fuzz_load.py --only om2-17 [--keep DIR] [--inline]   # one case again

Outcomes: a typed om2gen error (an om2gen.Om2Error), another exception (its type), a crash (the
signal), a hang (no end within --timeout), a silent wrong result (it ran, but the outputs, or
what the model says it takes and returns, differ from the compiled model's beyond 1e-4 relative),
ok-and-correct (a mutant that does not matter, or a misuse run() accepts correctly).
The package tools/fuzz/ holds the parts; docs/fuzzing.md explains the families."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="mutants per format (default 200)")
    ap.add_argument("--misuse", type=int, default=None, help="misuse cases per format (default: --cases / 5)")
    ap.add_argument("--seed", type=int, default=0, help="the seed of the models and of every case (default 0)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="children at once (default: every core)")
    ap.add_argument("--format", choices=("om2", "om", "both"), default="both")
    ap.add_argument("--only", action="append", default=[], help="run only this case id (repeat, or comma-separate)")
    ap.add_argument("--family", default="", help="only families whose name contains this text")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang (default 20)")
    ap.add_argument("--mem-limit-mb", type=int, default=6144, help="address-space limit of each child (default 6144)")
    ap.add_argument("--details", action="store_true", help="one line per bad case, then the bad cases grouped")
    ap.add_argument("--json", type=Path, help="write every result to this file")
    ap.add_argument("--keep", type=Path, help="copy the file and log of every bad case into this directory")
    ap.add_argument("--work", type=Path, help="working directory (default: a fresh temporary one)")
    ap.add_argument("--inline", action="store_true", help="with --only: run the case in this process (no child)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    from fuzz import report, runner

    work = args.work or Path(tempfile.mkdtemp(prefix="om2gen-fuzz-"))
    started = time.monotonic()
    ctx = runner.Context(work, args.seed)
    formats = ("om2", "om") if args.format == "both" else (args.format,)
    only = [i for chunk in args.only for i in chunk.split(",") if i]
    if args.inline:
        for case_id in only:
            runner.run_inline(ctx, case_id, args.timeout)
        return 0
    misuse_cases = args.misuse if args.misuse is not None else max(args.cases // 5, 1)
    ids = only or ctx.ids(formats, args.cases, misuse_cases)
    if args.family:
        ids = [i for i in ids if args.family in ctx.case(i).family]

    def progress(res, done):
        if not args.quiet and sys.stderr.isatty():
            print(f"\r{done}/{len(ids)} cases, {time.monotonic() - started:.0f} s", end="", file=sys.stderr, flush=True)

    results = runner.execute(ctx, ids, jobs=args.jobs, timeout=args.timeout, mem_limit=args.mem_limit_mb << 20,
                             keep=args.keep, progress=progress)
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"om2gen load fuzzing: seed {args.seed}, {len(results)} cases, {args.jobs} jobs, "
          f"{time.monotonic() - started:.0f} s\n")
    print(report.table(results))
    if args.details or only:
        lines = report.details(results) if not only else [
            f"{r.id}  [{r.family}] {r.description}  -> {r.outcome} {r.kind} at {r.stage}"
            f"{' in ' + r.where if r.where else ''}{': ' + r.message if r.message else ''}" for r in results]
        print("\nBad cases (rerun one with --only ID):" if not only else "")
        print("\n".join(lines) or "none")
        if not only:
            print("\nGrouped by family, outcome, exception or signal, and the om2gen frame:")
            print("\n".join(report.groups(results)) or "none")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    if args.work is None:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(r.outcome in runner.BAD for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
