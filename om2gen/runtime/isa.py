"""Which kernel set of a model runs on this CPU (docs/archive-format.md §2, *Several kernel sets*).

An archive compiled with `--target x86_64-avx2,x86_64-avx512` carries one model per target; the
executor runs the best this CPU supports: of those whose ISA features it has, the one needing the
most. `om2gen.load(path, isa=...)` or $OM2GEN_ISA forces one (to compare sets, or to keep a
server on the set it was validated with); a forced set the model does not carry, or that this
CPU cannot run, is an error, never a silent fallback. An archive of one set (every archive
before format 1.3) runs that set, as it always did.
"""
from __future__ import annotations

import os

from ..errors import AbiError, ArchiveError
from ..toolchain import targets

ISA_ENV = "OM2GEN_ISA"


def forced(isa: str | None) -> tuple[str | None, str]:
    """The set the user forces and how they said it: the load option, else $OM2GEN_ISA (empty: none)."""
    if isa is not None:
        if not isinstance(isa, str) or not isa:
            raise AbiError(f"isa={isa!r}: give a kernel set's name, such as x86_64-avx2, or None for the best this "
                           "CPU supports")
        return isa, f"isa={isa!r}"
    env = os.environ.get(ISA_ENV, "").strip()
    return (env or None), f"{ISA_ENV}={env}"


def sets_of(manifest: dict, where: str) -> list[dict]:
    """The kernel sets of an OM2 manifest, one target description per model in order."""
    models = manifest["models"]
    if len(models) == 1:
        return [models[0].get("target") or manifest["target"]]
    if not models or not all(isinstance(m.get("target"), dict) for m in models):
        raise ArchiveError(f"{where}: holds {len(models)} models that are not kernel sets of one model (each "
                           "models[] entry names its target); om2gen.load runs single-model archives")
    return [m["target"] for m in models]


def choose(sets: list[dict], where: str, isa: str | None = None) -> int:
    """The index of the set to run: the forced one (isa=, else $OM2GEN_ISA), else the best this
    CPU runs. Raises AbiError naming the sets when none fits."""
    names = [s["name"] for s in sets]
    want, said = forced(isa)
    if want is not None:
        if want not in names:
            carry = f" (recompile with --target {','.join([*names, want])} to carry it)" \
                if want in targets.TARGETS else ""
            raise AbiError(f"{where}: {said} names a kernel set the model does not carry; it carries "
                           f"{', '.join(names)}: force one of those, or leave it unset to run the best this CPU "
                           f"supports{carry}")
        chosen = sets[names.index(want)]
        missing = targets.missing_features(chosen["arch"], chosen["isa_features"])
        if missing:
            runnable = [s["name"] for s in sets if not targets.missing_features(s["arch"], s["isa_features"])]
            raise AbiError(f"{where}: {said}, but this CPU lacks {', '.join(missing)} for it; "
                           + (f"it runs {', '.join(runnable)}" if runnable else "it runs none of the model's sets"))
        return names.index(want)
    runnable = [i for i, s in enumerate(sets) if not targets.missing_features(s["arch"], s["isa_features"])]
    if not runnable:
        if len(sets) == 1:
            targets.check_runs_here(where, sets[0]["name"], sets[0]["arch"], sets[0]["isa_features"])
        lacks = "; ".join(f"{s['name']} needs {', '.join(targets.missing_features(s['arch'], s['isa_features']))}"
                          for s in sets)
        raise AbiError(f"{where}: carries kernel sets {', '.join(names)}, and this CPU runs none of them ({lacks}); "
                       "recompile with --target matching this machine")
    return max(runnable, key=lambda i: len(sets[i]["isa_features"]))
