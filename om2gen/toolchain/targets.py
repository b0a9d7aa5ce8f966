"""Compilation targets: CPU architecture, ISA features and the compiler flags that select them."""
from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import AbiError
from . import uarch


@dataclass(frozen=True)
class Target:
    name: str                   # e.g. "x86_64-avx2"
    arch: str                   # ELF machine family, as `uname -m` prints it
    march_flags: tuple[str, ...]
    isa_features: tuple[str, ...]   # /proc/cpuinfo flags the code needs
    elf_machine: str            # pyelftools e_machine name
    tune: str = uarch.GENERIC   # the microarchitecture tuned for (toolchain/uarch.py): "x86_64-avx2:znver1"

    @property
    def spec(self) -> str:
        """The target as --target names it: the ISA target, and its tuning unless generic."""
        return self.name if self.tune == uarch.GENERIC else f"{self.name}:{self.tune}"


TARGETS = {
    t.name: t for t in (
        Target("x86_64", "x86_64", ("-march=x86-64", "-mtune=generic"), ("sse2",), "EM_X86_64"),
        Target("x86_64-avx2", "x86_64", ("-march=x86-64-v3", "-mtune=generic"), ("avx", "avx2", "fma", "bmi2"),
               "EM_X86_64"),
        Target("x86_64-avx512", "x86_64", ("-march=x86-64-v4", "-mtune=generic", "-mprefer-vector-width=512"),
               ("avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"),
               "EM_X86_64"),
        Target("aarch64", "aarch64", ("-march=armv8-a",), ("asimd",), "EM_AARCH64"),
    )
}


@lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    flags.update(value.split())
    except OSError:
        pass
    return frozenset(flags)


def host_arch() -> str:
    return platform.machine()


def default_target() -> Target:
    """The best target this machine runs, tuned for its microarchitecture."""
    arch = host_arch()
    for name in ("x86_64-avx512", "x86_64-avx2", "x86_64", "aarch64"):
        t = TARGETS[name]
        if t.arch == arch and set(t.isa_features) <= host_features():
            return replace(t, tune=uarch.host_uarch()) if arch == "x86_64" else t
    raise AbiError(f"om2gen has no target for this machine ({arch}); known targets: {', '.join(TARGETS)}")


def get_target(name: str | None) -> Target:
    """A --target: an ISA target ("x86_64-avx2", untuned), optionally with the microarchitecture
    to tune for after a colon ("x86_64-avx2:znver1"); None: this machine's (default_target)."""
    if name is None:
        return default_target()
    isa, _, tune = name.partition(":")
    if isa not in TARGETS:
        raise AbiError(f"unknown --target {name!r}; choose one of: {', '.join(TARGETS)} (optionally tuned for a "
                       f"microarchitecture: {next(iter(TARGETS))}:znver1)")
    t = TARGETS[isa]
    if not tune:
        return t
    if t.arch != "x86_64":
        raise AbiError(f"--target {name!r}: microarchitecture tunings are for x86_64 targets; give {isa} alone")
    return replace(t, tune=uarch.tuning(tune).name)


def get_targets(value) -> list[Target]:
    """The kernel sets `--target` asks for: None (this machine's best), one name, several as a
    comma string ("x86_64-avx2,x86_64-avx512") or a list. In TARGETS order whatever order they were
    given in, so that the same sets give the same archive; all of one arch (an archive's kernel
    sets are alternatives for one CPU family, picked at load)."""
    if value is None:
        return [default_target()]
    names = value.split(",") if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise AbiError(f"--target {value!r} names no target; give one or more of {', '.join(TARGETS)}, "
                       "separated by commas")
    chosen = {t.name: t for t in (get_target(n.strip()) for n in names)}   # (a tuning kept: "x86_64-avx2:znver1")
    out = [chosen[name] for name in TARGETS if name in chosen]
    if len({t.arch for t in out}) > 1:
        raise AbiError(f"--target {','.join(t.name for t in out)} mixes CPU architectures "
                       f"({', '.join(sorted({t.arch for t in out}))}); one archive carries kernel sets of one "
                       "architecture: compile one archive per architecture")
    return out


def missing_features(arch: str, features) -> list[str]:
    """What this machine lacks to run code built for (arch, features); [] if it can run it."""
    if arch != host_arch():
        return [f"arch {arch} (this machine is {host_arch()})"]
    return sorted(set(features) - host_features())


def check_runs_here(where: str, name, arch: str, isa_features) -> None:
    """A model's target CPU must be this one (or a subset of its ISA); else an AbiError."""
    missing = missing_features(arch, isa_features)
    if missing:
        raise AbiError(f"{where}: built for target {name}, but this CPU lacks {', '.join(missing)}; recompile with "
                       "--target matching this machine")
