"""Pure-Python units: C literals, identifiers, memory plan, broadcasting helpers (no compiler)."""
import math

import numpy as np
import pytest

from om2gen.codegen.literals import Identifiers, c_float, c_string
from om2gen.lower import memplan
from om2gen.ops import common


@pytest.mark.parametrize("x", [0.0, 1.0, -2.5, 0.1, 1e-45, 3.4028235e38, 6.0, 1 / 3])
def test_c_float_round_trips_exactly(x):
    lit = c_float(x)
    assert lit.endswith("f")
    assert np.float32(float(lit[:-1])) == np.float32(x)


@pytest.mark.parametrize("x", [0.0, 1.0, -2.5, 0.1, 5e-324, 1.7976931348623157e308, 1e16, 1 / 3, 49])
def test_c_double_round_trips_exactly(x):
    lit = c_float(x, double=True)
    assert not lit.endswith("f") and ("." in lit or "e" in lit)
    assert float(lit) == float(x)


def test_c_float_specials():
    assert c_float(math.inf, double=True) == "INFINITY"
    assert c_float(math.nan, double=True) == "NAN"
    assert c_float(math.inf) == "INFINITY"
    assert c_float(-math.inf) == "-INFINITY"
    assert c_float(math.nan) == "NAN"


def test_c_string_escapes():
    assert c_string('a"b\\c') == '"a\\"b\\\\c"'
    assert c_string("é") == '"\\303\\251"'
    assert c_string("??=") == '"\\077\\077="'


def test_identifiers_unique_and_legal():
    ids = Identifiers()
    a = ids("conv/1:0")
    b = ids("conv_1_0")
    assert a == "conv_1_0" and b != a and b.startswith("conv_1_0")
    assert ids("conv/1:0") == a
    assert ids("9lives").startswith("_")


def test_memplan_reuses_dead_buffers():
    bufs = [memplan.Buffer("a", 1000, 0, 1), memplan.Buffer("b", 1000, 1, 2), memplan.Buffer("c", 1000, 2, 3)]
    offsets, total = memplan.plan(bufs)
    assert offsets["a"] == offsets["c"]           # a is dead when c is written
    assert offsets["a"] != offsets["b"]           # a and b live together at task 1
    assert total == 2 * memplan.align(1000)


def test_memplan_never_overlaps_live_buffers():
    rng = np.random.default_rng(0)
    bufs = []
    for i in range(200):
        first = int(rng.integers(0, 100))
        bufs.append(memplan.Buffer(f"b{i}", int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 10))))
    offsets, total = memplan.plan(bufs)
    for x in bufs:
        assert offsets[x.key] % memplan.ALIGN == 0
        assert offsets[x.key] + x.size <= total
        for y in bufs:
            if x is y or x.last < y.first or y.last < x.first:
                continue
            assert offsets[x.key] + x.size <= offsets[y.key] or offsets[y.key] + y.size <= offsets[x.key], (x, y)


def test_broadcast_strides_and_collapse():
    assert common.broadcast_strides((3, 1), (2, 3, 4)) == [0, 1, 0]
    dims, strides = common.collapse((2, 3, 4), [[12, 4, 1], [0, 0, 1]])
    assert dims == [6, 4] and strides == [[4, 1], [0, 1]]
    dims, strides = common.collapse((2, 3, 4), [[12, 4, 1], [12, 4, 1]])
    assert dims == [24] and strides == [[1], [1]]
    dims, strides = common.collapse((), [[0]])
    assert dims == [1]


def test_block_dim_bounds():
    assert common.block_dim_for(1, 10**9) == 1
    assert common.block_dim_for(10, 1) == 1
    assert 1 < common.block_dim_for(10**6, 100) <= common.MAX_BLOCKS
