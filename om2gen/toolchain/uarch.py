"""The CPU's microarchitecture, for tuning what the ISA flags alone do not decide.

Two CPUs with the same ISA flags run the same kernels at different speeds: Zen 1 executes each
256-bit AVX2 operation as two 128-bit halves and has a 512 KiB L2, Zen 4 runs 256-bit operations
whole (512-bit ones as two halves) with a 1 MiB L2. What a tuning changes: the compiler's
-mtune (when it knows the name), the GEMM's A block and the L2 size that Winograd's plan
assumes (ops/gemm_pack.py, ops/winograd.py). The compiler reads the host's vendor, family
and model (as cpuid reports them; /proc/cpuinfo) for the default target, and `--target
x86_64-avx2:znver1` names a microarchitecture to tune for. The names are GCC's -march/-mtune
names; what each one changes is listed in its Tuning and in docs/performance.md.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import lru_cache

from ..errors import AbiError

GENERIC = "generic"


@dataclass(frozen=True)
class Tuning:
    name: str               # GCC's -mtune name (also what --target takes after the colon)
    a_block_kib: int        # the GEMM's run-time packed A block at most (it stays in L2 while B streams)
    l2_kib: int             # L2 per core: Winograd's tile blocks and weight streaming are sized to it
    what: str


# A blocks: 256 KiB (256 rows of k 256) measured best on Zen 4's 1 MiB L2 (benchmarks/bench_kernels.py);
# the others are BLIS's float blockings at k 256 (config/zen: MC 144 for Zen 1-3's 512 KiB L2,
# config/haswell: MC 168 for Intel's 256 KiB), not measured here.
TUNINGS = {t.name: t for t in (
    Tuning(GENERIC, 256, 1024, "no particular CPU (the ISA's defaults, measured on Zen 4)"),
    Tuning("znver1", 144, 512, "AMD Zen 1 / Zen+ (EPYC 7001, Ryzen 1000/2000): 256-bit ops as two halves"),
    Tuning("znver2", 144, 512, "AMD Zen 2 (EPYC 7002, Ryzen 3000)"),
    Tuning("znver3", 144, 512, "AMD Zen 3 (EPYC 7003, Ryzen 5000)"),
    Tuning("znver4", 256, 1024, "AMD Zen 4 (EPYC 9004, Ryzen 7000)"),
    Tuning("znver5", 256, 1024, "AMD Zen 5 (EPYC 9005, Ryzen 9000)"),
    Tuning("haswell", 168, 256, "Intel Haswell / Broadwell"),
    Tuning("skylake", 168, 256, "Intel Skylake client (AVX2)"),
    Tuning("skylake-avx512", 256, 1024, "Intel Skylake-SP / Cascade Lake"),
    Tuning("icelake-server", 256, 1280, "Intel Ice Lake-SP"),
    Tuning("sapphirerapids", 256, 2048, "Intel Sapphire / Emerald Rapids"),
)}


@dataclass(frozen=True)
class Cpu:
    vendor: str
    family: int
    model: int
    name: str


def parse_cpuinfo(text: str) -> Cpu:
    """The first processor's vendor, family, model and model name of /proc/cpuinfo's text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())

    def number(key):
        try:
            return int(fields.get(key, ""), 0)
        except ValueError:
            return -1
    return Cpu(fields.get("vendor_id", ""), number("cpu family"), number("model"), fields.get("model name", ""))


@lru_cache(maxsize=1)
def host_cpu() -> Cpu:
    try:
        with open("/proc/cpuinfo") as f:
            return parse_cpuinfo(f.read())
    except OSError:
        return Cpu("", -1, -1, "")


# Intel family 6 models (Intel's SDM, volume 4, table 2-1) by tuning
_INTEL = {"haswell": (0x3C, 0x3F, 0x45, 0x46, 0x3D, 0x47, 0x4F, 0x56),
          "skylake": (0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6),
          "skylake-avx512": (0x55,),
          "icelake-server": (0x6A, 0x6C),
          "sapphirerapids": (0x8F, 0xCF)}


def uarch_of(cpu: Cpu) -> str:
    """The tuning name of a CPU, GENERIC for one this table does not know. AMD family 17h models
    below 30h are Zen 1 / Zen+, the rest Zen 2; family 19h models 10h-1Fh, 60h-7Fh and A0h-AFh
    are Zen 4, the others Zen 3; family 1Ah is Zen 5 (AMD's revision guides)."""
    if cpu.vendor == "AuthenticAMD":
        if cpu.family == 0x17:
            return "znver1" if cpu.model < 0x30 else "znver2"
        if cpu.family == 0x19:
            zen4 = 0x10 <= cpu.model <= 0x1F or 0x60 <= cpu.model <= 0x7F or 0xA0 <= cpu.model <= 0xAF
            return "znver4" if zen4 else "znver3"
        if cpu.family == 0x1A:
            return "znver5"
    if cpu.vendor == "GenuineIntel" and cpu.family == 6:
        return next((name for name, models in _INTEL.items() if cpu.model in models), GENERIC)
    return GENERIC


def host_uarch() -> str:
    return uarch_of(host_cpu())


def tuning(name: str) -> Tuning:
    if name not in TUNINGS:
        raise AbiError(f"unknown microarchitecture {name!r} in --target; choose one of: {', '.join(TUNINGS)}")
    return TUNINGS[name]


@lru_cache(maxsize=None)
def compiler_knows(cc: str, tune: str) -> bool:
    """Whether the C compiler cc takes -mtune=tune (GCC 12 has no znver4)."""
    try:
        proc = subprocess.run([cc, f"-mtune={tune}", "-x", "c", "-fsyntax-only", "-"], input="", capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def mtune_flag(name: str, cc: str = "gcc") -> str:
    """-mtune= for a tuning: its own name when the compiler knows it, else generic (then only
    om2gen's own choices, such as the GEMM's blocking, are tuned)."""
    return f"-mtune={name if name == GENERIC or compiler_knows(cc, name) else GENERIC}"


ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")


def isa_flags(features) -> list[str]:
    """The vector-ISA flags of a CPU feature set that matter to the kernels (and to peers'
    kernels: VNNI for int8, BF16 and AMX), in a fixed order."""
    return [f for f in ISA_FLAGS if f in features]
