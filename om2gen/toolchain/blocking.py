"""The packed GEMM's register tile and cache blocking per target (runtime_abi/include/om2/om2_gemm.h
takes them as OM2_GEMM_* defines): the layout om2gen packs constant operands in
(ops/gemm_pack.py), the workspace it reserves, and the configuration the kernel library is
compiled with (toolchain/kernel_lib.py)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import uarch


@dataclass(frozen=True)
class Blocking:
    mr: int     # rows of the register tile (broadcast A values)
    nr: int     # columns of the register tile (a multiple of the vector length)
    kc: int     # k rows per packed block
    nc: int     # columns per B block packed at run time (a multiple of nr)
    mc: int     # rows per A block packed at run time (a multiple of mr)
    vl: int     # floats per vector register
    l2_bytes: int = 1 << 20     # L2 per core of the CPU tuned for (Winograd's plan sizes its blocks to it)

    def defines(self) -> dict[str, int]:
        return {"OM2_GEMM_MR": self.mr, "OM2_GEMM_NR": self.nr, "OM2_GEMM_KC": self.kc, "OM2_GEMM_NC": self.nc,
                "OM2_GEMM_MC": self.mc}


# Measured on Zen 4 for ResNet-50/BERT shapes (benchmarks/bench_kernels.py): 16x16 zmm and 6x16 ymm
# tiles both reach ~90% of the FMA peak; the portable ones keep 8-16 accumulators in 16/32 registers.
# mc is the most rows a packed A block has; blocking() shrinks it to the tuned CPU's A block.
BLOCKING = {
    "x86_64-avx512": Blocking(16, 16, 256, 256, 256, 16),
    "x86_64-avx2": Blocking(6, 16, 256, 256, 252, 8),
    "x86_64": Blocking(4, 8, 256, 256, 256, 4),
    "aarch64": Blocking(8, 8, 256, 256, 256, 4),
}


def blocking(target) -> Blocking:
    """The target ISA's register tile and blocking, mc within the A block of its tuning's CPU
    and that CPU's L2 (toolchain/uarch.py: Zen 1-3's smaller L2 takes fewer rows than Zen 4's)."""
    bl = BLOCKING[target.name]
    tuning = uarch.tuning(target.tune)
    rows = tuning.a_block_kib * 1024 // (bl.kc * 4)
    return replace(bl, mc=max(bl.mr, min(bl.mc, rows // bl.mr * bl.mr)), l2_bytes=tuning.l2_kib * 1024)
