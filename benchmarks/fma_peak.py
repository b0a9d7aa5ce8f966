"""Builds and runs fma_peak.c: this CPU's float32 FMA peak in GFLOP/s, one core and all cores,
for AVX-512 and AVX2 (independent accumulator chains; see the C file).

    python benchmarks/fma_peak.py [--threads N] [--seconds S] [--json]

The executable is built once with the system C compiler ($CC, else cc/gcc) and cached by the
digest of its source and the compiler's version under $OM2GEN_CACHE_DIR/bench.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("fma_peak.c")


class FmaPeakError(RuntimeError):
    pass


def _compiler() -> str:
    for name in ([os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc"]):
        path = shutil.which(name)
        if path:
            return path
    raise FmaPeakError("fma_peak: no C compiler (set CC, or install gcc: apt-get install build-essential)")


def build() -> Path:
    from om2gen.toolchain.compiler import cache_dir
    cc = _compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    flags = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *version, *flags]).encode()).hexdigest()[:16]
    exe = cache_dir() / "bench" / f"fma_peak-{key}"
    if exe.is_file():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="om2gen-fma-") as tmp:
        out = Path(tmp) / "fma_peak"
        proc = subprocess.run([cc, *flags, "-o", str(out), str(SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise FmaPeakError(f"fma_peak: building {SOURCE.name} failed:\n{proc.stderr}")
        shutil.move(str(out), exe)
    return exe


def measure(threads: int | None = None, seconds: float = 0.2) -> dict:
    """{"avx512": {1: GFLOP/s, N: GFLOP/s}, "avx2": {...}}; a variant this CPU lacks is absent."""
    threads = threads or os.cpu_count() or 1
    proc = subprocess.run([str(build()), str(threads), str(seconds)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise FmaPeakError(f"fma_peak failed ({proc.returncode}): {proc.stderr.strip()}")
    peaks: dict = {}
    for line in proc.stdout.splitlines():
        isa, *rest = line.split()
        if rest and rest[0] != "unsupported":
            peaks.setdefault(isa, {})[int(rest[0])] = float(rest[1])
    return peaks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, help="all-core thread count (default: all CPUs)")
    p.add_argument("--seconds", type=float, default=0.2, help="length of one timed round (default: 0.2)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    try:
        peaks = measure(args.threads, args.seconds)
    except FmaPeakError as exc:
        sys.exit(str(exc))
    if args.json:
        print(json.dumps(peaks, indent=1))
        return
    for isa, by_threads in peaks.items():
        for n, g in sorted(by_threads.items()):
            print(f"{isa:7} {n:3} thread(s) {g:9.1f} GFLOP/s")


if __name__ == "__main__":
    main()
