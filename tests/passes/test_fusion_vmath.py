"""om2/om2_vmath.h (the vectorizable expf/erff/tanhf of fused kernels) against float64 references
over the whole float range: random bit patterns, dense grids around the branch points, specials."""
import ctypes
import math
import platform
import shutil
import subprocess

import numpy as np
import pytest

from om2gen.toolchain.compiler import include_dir

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

SOURCE = """
#include "om2/om2_vmath.h"
#define MAP(name) void name##_array(const float *x, float *y, long n) { for (long i = 0; i < n; ++i) y[i] = name(x[i]); }
MAP(om2_expf)
MAP(om2_erff)
MAP(om2_tanhf)
"""


@pytest.fixture(scope="module", params=["-march=native", "-march=x86-64"] if platform.machine() == "x86_64"
                else ["-march=native"])
def lib(request, tmp_path_factory):
    """The functions built for this CPU (fused multiply-adds where it has them) and, on x86-64,
    for the baseline ISA (no FMA: a multiply and an add)."""
    d = tmp_path_factory.mktemp("vmath")
    (d / "v.c").write_text(SOURCE)
    subprocess.run(["cc", "-std=c11", "-O3", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Wextra", "-Werror",
                    request.param, "-shared", "-fPIC", "-I", str(include_dir()), "-o", str(d / "v.so"),
                    str(d / "v.c"), "-lm"], check=True)
    return ctypes.CDLL(str(d / "v.so"))


def run(lib, name, x):
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    fn = getattr(lib, f"{name}_array")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    fn(x.ctypes.data, y.ctypes.data, x.size)
    return y


def samples(lo, hi, breaks):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits[np.isnan(bits)] = np.nan   # quiet NaNs (numpy's float64 cast signals on the others)
    grids = [np.linspace(lo, hi, 400_001, dtype=np.float32)]
    for b in breaks:   # every float next to a branch point
        grids.append(np.nextafter(np.float32(b), np.float32(np.inf)) + np.arange(-2000, 2000) * np.spacing(np.float32(b)))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 3.4e38, -3.4e38], np.float32)
    return np.concatenate([bits, *[g.astype(np.float32) for g in grids], special, -special])


def ulps(got, ref):
    """Error in units of the last place of the float nearest the reference (subnormal-aware)."""
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


def check(got, ref, x, what, max_ulp, abs_tol=0.0, ulp_below=np.inf):
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    inf = np.isinf(ref)
    assert np.array_equal(got[inf], ref[inf].astype(np.float32)), f"{what}: infinities differ"
    fin = ~nan & ~inf
    err = ulps(got[fin], ref[fin])
    in_ulp = np.abs(x[fin]) < ulp_below
    worst = float(err[in_ulp].max()) if in_ulp.any() else 0.0
    assert worst <= max_ulp, f"{what}: {worst:.2f} ulp at x={x[fin][in_ulp][np.argmax(err[in_ulp])]!r}"
    if abs_tol:
        absolute = np.abs(got[fin][~in_ulp].astype(np.float64) - ref[fin][~in_ulp])
        assert absolute.max(initial=0.0) <= abs_tol, f"{what}: absolute error {absolute.max():.3g}"
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0])) or what == "expf", f"{what}: sign of zero"


def test_expf(lib):
    x = samples(-110, 95, [-104.0, 89.0, -87.3, 88.7])
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64))
        ref[np.isinf(ref.astype(np.float32))] = np.inf   # beyond float's range
    got = run(lib, "om2_expf", x)
    # results below the normal range keep their absolute accuracy only (subnormals have fewer bits)
    normal = ref >= np.finfo(np.float32).tiny
    check(got[normal | np.isnan(ref) | np.isinf(ref)], ref[normal | np.isnan(ref) | np.isinf(ref)],
          x[normal | np.isnan(ref) | np.isinf(ref)], "expf", 2.0)
    sub = ~normal & ~np.isnan(ref)
    assert np.abs(got[sub].astype(np.float64) - ref[sub]).max() <= 2 * 2.0 ** -149
    assert np.all(got[x > 88.8] == np.inf) and np.all(got[x < -104] == 0.0)


def test_erff(lib):
    x = samples(-5, 5, [1.0, -1.0, 4.0, -4.0])
    ref = np.array([math.erf(v) if not np.isnan(v) else np.nan for v in x.astype(np.float64).tolist()])
    check(run(lib, "om2_erff", x), ref, x, "erff", 3.0, abs_tol=2e-7, ulp_below=1.0)


def test_tanhf(lib):
    x = samples(-12, 12, [0.625, -0.625, 10.0, -10.0])
    check(run(lib, "om2_tanhf", x), np.tanh(x.astype(np.float64)), x, "tanhf", 3.0, abs_tol=3e-7, ulp_below=0.625)
