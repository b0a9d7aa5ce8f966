"""The outcome table (rows per family, columns per outcome), one line per bad case, and the bad cases
grouped by what went wrong and where."""
from __future__ import annotations

import collections

from . import misuse, mutate_om, mutate_om2, runner

COLUMNS = (("typed", "typed om2gen error"), ("other", "other exception"), ("crash", "crash"), ("hang", "hang"),
           ("wrong", "silent wrong result"), ("ok", "ok-and-correct"))
SECTIONS = (("om2", ".om2 mutants", mutate_om2.FAMILIES), ("om", ".om mutants", mutate_om.FAMILIES),
            ("misuse", "run-time misuse (both formats)", misuse.FAMILIES))


def _cell(rs, outcome: str) -> str:
    hit = [r for r in rs if r.outcome == outcome]
    if not hit:
        return "0"
    if outcome in ("other", "crash"):
        kinds = collections.Counter(r.kind for r in hit)
        return f"{len(hit)} ({', '.join(f'{k} {n}' if len(kinds) > 1 else k for k, n in kinds.most_common())})"
    return str(len(hit))


def table(results) -> str:
    head = "| family | tried | " + " | ".join(title for _, title in COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * (len(COLUMNS) + 1)]
    for section, title, families in SECTIONS:
        rows = [r for r in results if r.section == section]
        if not rows:
            continue
        for family in (runner.GENUINE,) + tuple(families):
            rs = [r for r in rows if r.family == family]
            if rs:
                lines.append(f"| {family} | {len(rs)} | " + " | ".join(_cell(rs, o) for o, _ in COLUMNS) + " |")
        lines.append(f"| **{title}, all** | **{len(rows)}** | " + " | ".join(f"**{_cell(rows, o)}**" for o, _ in COLUMNS)
                     + " |")
    harness = [r for r in results if r.outcome == "harness"]
    if harness:
        lines.append(f"\n{len(harness)} case(s) failed in the harness itself (not om2gen): "
                     + ", ".join(f"{r.id} ({r.kind}: {r.message[:80]})" for r in harness[:5]))
    return "\n".join(lines)


def _outcome(r) -> str:
    return {"other": f"other exception {r.kind}", "crash": f"crash {r.kind}", "hang": f"hang {r.kind}",
            "wrong": f"silent wrong result ({r.kind})", "harness": f"harness error {r.kind}"}.get(r.outcome, r.outcome)


def details(results) -> list[str]:
    bad = [r for r in results if r.outcome in ("other", "crash", "hang", "wrong", "harness")]
    return [f"{r.id}  [{r.family}] {r.description}  -> {_outcome(r)} at {r.stage or '?'}"
            f"{' in ' + r.where if r.where else ''}{': ' + r.message[:160] if r.message else ''}" for r in bad]


def groups(results) -> list[str]:
    """Bad cases grouped by (family, outcome, exception or signal, om2gen frame)."""
    by = collections.defaultdict(list)
    for r in results:
        if r.outcome in ("other", "crash", "hang", "wrong", "harness"):
            by[(r.family, r.outcome, r.kind, r.stage, r.where)].append(r)
    out = []
    for (family, outcome, kind, stage, where), rs in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = rs[0]
        out.append(f"{len(rs):4d} x [{family}] {_outcome(ex)} at {stage or '?'}{' in ' + where if where else ''}; "
                   f"e.g. {', '.join(r.id for r in rs[:3])}: {ex.description[:110]}"
                   f"{' | ' + ex.message[:120] if ex.message else ''}")
    return out
