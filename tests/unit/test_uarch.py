"""Tuning per microarchitecture (om2gen/toolchain/uarch.py): the CPU read from /proc/cpuinfo's
vendor, family and model, `--target ISA:UARCH`, and what a tuning changes (the compiler's -mtune,
the GEMM's A block), with a tuned archive's results checked against ONNX Runtime."""
import json
import zipfile

import pytest
from helpers import check_model, make_model, rand
from onnx import helper

from om2gen.errors import AbiError
from om2gen.ops import winograd
from om2gen.toolchain import compiler, targets, uarch
from om2gen.toolchain.blocking import blocking

COVERS: set = set()   # MatMul is covered by test_gemm.py

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: {name}
flags\t\t: fpu avx2

processor\t: 1
vendor_id\t: SomethingElse
"""


@pytest.mark.parametrize("vendor, family, model, name, tune", [
    ("AuthenticAMD", 23, 1, "AMD EPYC 7551 32-Core Processor", "znver1"),
    ("AuthenticAMD", 23, 8, "AMD Ryzen 7 2700X", "znver1"),
    ("AuthenticAMD", 23, 49, "AMD EPYC 7742 64-Core Processor", "znver2"),
    ("AuthenticAMD", 25, 1, "AMD EPYC 7763 64-Core Processor", "znver3"),
    ("AuthenticAMD", 25, 33, "AMD Ryzen 9 5950X", "znver3"),
    ("AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", "znver4"),
    ("AuthenticAMD", 25, 97, "AMD Ryzen 9 7950X", "znver4"),
    ("AuthenticAMD", 26, 2, "AMD EPYC 9755", "znver5"),
    ("GenuineIntel", 6, 85, "Intel(R) Xeon(R) Platinum 8280", "skylake-avx512"),
    ("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+", "sapphirerapids"),
    ("GenuineIntel", 6, 999, "a future Intel", "generic"),
    ("HygonGenuine", 24, 1, "Hygon C86", "generic"),
])
def test_microarchitecture_from_cpuinfo(vendor, family, model, name, tune):
    cpu = uarch.parse_cpuinfo(CPUINFO.format(vendor=vendor, family=family, model=model, name=name))
    assert cpu == uarch.Cpu(vendor, family, model, name)   # the first processor's fields
    assert uarch.uarch_of(cpu) == tune


def test_target_names_a_tuning():
    t = targets.get_target("x86_64-avx2:znver1")
    assert (t.name, t.tune, t.spec) == ("x86_64-avx2", "znver1", "x86_64-avx2:znver1")
    assert t.isa_features == targets.TARGETS["x86_64-avx2"].isa_features
    plain = targets.get_target("x86_64-avx2")
    assert plain.tune == "generic" and plain.spec == "x86_64-avx2" and compiler.tune_flags(plain) == ()
    assert targets.default_target().tune == uarch.host_uarch()
    with pytest.raises(AbiError, match="unknown microarchitecture 'zen9' in --target; choose one of: generic, znver1"):
        targets.get_target("x86_64-avx2:zen9")
    with pytest.raises(AbiError, match="tunings are for x86_64 targets; give aarch64 alone"):
        targets.get_target("aarch64:znver1")
    with pytest.raises(AbiError, match="unknown --target 'x86_64-avx3:znver1'"):
        targets.get_target("x86_64-avx3:znver1")


def test_a_tuning_sets_mtune_and_the_gemm_a_block():
    zen1 = targets.get_target("x86_64-avx2:znver1")
    flags = compiler.march_flags(zen1)
    if uarch.compiler_knows("gcc", "znver1"):
        assert "-mtune=znver1" in flags and "-mtune=generic" not in flags
    assert "-march=x86-64-v3" in flags
    generic, tuned = blocking(targets.get_target("x86_64-avx2")), blocking(zen1)
    assert (generic.mr, generic.nr, generic.kc, generic.mc) == (6, 16, 256, 252)
    assert (tuned.mr, tuned.nr, tuned.kc, tuned.mc) == (6, 16, 256, 144)    # Zen 1's smaller L2
    assert blocking(targets.get_target("x86_64-avx512:znver4")) == \
        blocking(targets.get_target("x86_64-avx512"))
    assert (generic.l2_bytes, tuned.l2_bytes) == (1 << 20, 512 << 10)


def test_winograd_tile_blocks_follow_the_tuned_l2():
    """Zen 1's 512 KiB L2 holds half the transformed input of Zen 4's: a 112 x 112 image of 32
    channels (49 panels of tiles) is cut into more, smaller tile blocks."""
    g = dict(N=1, C=32, M=32, G=1, CG=32, MG=32, D=1, H=112, W=112, KD=1, KH=3, KW=3, OD=1, OH=112, OW=112, SD=1,
             SH=1, SW=1, DD=1, DH=1, DW=1, PF=0, PT=1, PL=1)
    zen4, zen1 = (blocking(targets.get_target(f"x86_64-avx2:{t}")) for t in ("znver4", "znver1"))
    p4, p1 = winograd.plan(g, 4, zen4), winograd.plan(g, 4, zen1)
    for p, bl in ((p4, zen4), (p1, zen1)):
        assert 36 * p.tile_block * g["C"] * 4 <= bl.l2_bytes * winograd.V_L2_SHARE
        assert p.tile_blocks * p.tile_block >= p.tiles
    assert p1.tile_block < p4.tile_block and p1.tile_blocks > p4.tile_blocks


@pytest.mark.needs_cc
def test_a_tuned_archive_runs_exactly_and_records_its_tuning(tmp_path):
    """Two run-time operands: A (300 rows) is packed at run time in blocks of 144 rows under the
    Zen 1 tuning, more than one block per tile; the results are ORT's."""
    x, y = rand(300, 320, seed=1), rand(320, 40, seed=2)
    model = make_model([helper.make_node("MatMul", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"])
    check_model(model, {"x": x, "y": y}, tmp_path, target="x86_64-avx2:znver1")
    with zipfile.ZipFile(tmp_path / "model.om2") as z:
        manifest = json.loads(z.read("manifest.json"))
        sources = "".join(z.read(n).decode() for n in z.namelist() if n.endswith(".c"))
    assert manifest["target"]["name"] == "x86_64-avx2" and manifest["target"]["tune"] == "znver1"
    assert manifest["options"]["target"] == "x86_64-avx2:znver1"
    assert "OM2_GEMM_MC 144" in sources
