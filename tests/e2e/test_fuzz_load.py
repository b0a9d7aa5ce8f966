"""The load-side fuzzing harness (tools/fuzz_load.py, issue 12) at a small size: mutants of .om2
and .om files and run-time misuse, each case in a child process. The genuine models must load and
run correctly, and no case may crash, hang, return a silently wrong result or raise anything but
an om2gen.Om2Error.

One test, so that the cases run once under pytest-xdist too. OM2GEN_TEST_SCALE=N runs N times as
many; the full run is `python tools/fuzz_load.py --cases 10000 --details` (docs/fuzzing.md)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from fuzz import report, runner  # noqa: E402

SCALE = max(1, int(os.environ.get("OM2GEN_TEST_SCALE", "1")))
MUTANTS, MISUSE = 200 * SCALE, 40 * SCALE   # per format


def test_damaged_and_misused_models_fail_with_om2gen_errors(tmp_path):
    ctx = runner.Context(tmp_path, seed=12)
    ids = ctx.ids(("om2", "om"), MUTANTS, MISUSE)
    results = runner.execute(ctx, ids, jobs=os.cpu_count() or 1, timeout=10.0, mem_limit=6144 << 20)
    genuine = [r for r in results if r.family == runner.GENUINE]
    assert len(genuine) == 6 and all(r.outcome == "ok" for r in genuine), "\n".join(report.details(genuine))
    bad = [r for r in results if r.outcome in runner.BAD]   # crash, hang, wrong, other exception, harness
    assert not bad, (f"{len(bad)} of {len(results)} cases crashed, hung, gave a silent wrong result or raised "
                     f"something other than an Om2Error:\n{report.table(results)}\n\n" + "\n".join(report.groups(bad))
                     + "\n\n" + "\n".join(report.details(bad)[:60]))
