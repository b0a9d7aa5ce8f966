"""om2gen.ir.symbolic: dynamic sizes as canonical integer expressions, and the decisions on them
that hold for every value in range or are refused."""
import operator
import random

import pytest

from om2gen.ir import symbolic as sy
from om2gen.ir.symbolic import Undecidable, ceildiv, evaluate, smax, smin, sym

N = sym("N", 1, 16)
S = sym("S", 1, 512)
H = sym("H", 32, None)


def test_constants_fold_and_equal_paths_compare_equal():
    assert N * S * 768 // (N * S) == 768 and isinstance(N * S * 768 // (N * S), int)
    assert (2 * H + 1) // 2 == H
    assert N - N == 0 and isinstance(N - N, int)
    assert (N + 1) * (N - 1) == N * N - 1
    assert hash(N * S) == hash(S * N) and {N * S: 1}[S * N] == 1
    assert smin(N, 16) == N and smax(N, 1) == N and sy.text(smin(N, 8)) == "min(8, N)"
    assert smin(smin(N, S), 3) == smin(N, S, 3)
    assert (N * S + S) // S == N + 1 and evaluate((N * S + 1) // S, {"N": 3, "S": 5}) == 3


def test_decisions_hold_in_range_or_are_refused():
    assert N == N and N >= 1 and N <= 16 and H + 2 > H and bool(N) and not (N > 16)
    for question in (lambda: N == 1, lambda: N > 8, lambda: S < N, lambda: int(N), lambda: bool(N - 1)):
        with pytest.raises(Undecidable):
            question()
    with pytest.raises(Undecidable):
        N // (N - 1)     # the divisor may be 0
    with pytest.raises(Undecidable):
        [0] * N          # a list of dynamic length
    assert max(N, 0) == N and min(S + 1, 0) == 0


def test_text_and_c():
    e = (H + 2 * N - 3) // 2 + 1
    assert sy.text(3 * N * S - 1) == "3*N*S - 1"
    c = sy.c_expr(e, lambda s: f"d[{s.name}]")
    assert "om2_floordiv" in c and "d[H]" in c and "d[N]" in c
    assert sy.c_expr(1 << 40, str) == "INT64_C(1099511627776)"
    assert sy.symbols([e, 4, S]) == {next(iter(sy.symbols(N))), next(iter(sy.symbols(H))), next(iter(sy.symbols(S)))}


def _c_eval(c: str, values: dict) -> int:
    """A C expression of c_expr evaluated in Python (om2_floordiv is floor division)."""
    env = {"om2_floordiv": lambda a, b: a // b, "om2_min": min, "om2_max": max, "INT64_C": int, **values}
    return eval(c, env)  # noqa: S307 - our own printer's output


OPS = [operator.add, operator.sub, operator.mul, lambda a, b: a // 3, lambda a, b: a // 8,
       lambda a, b: smin(a, b), lambda a, b: smax(a, b), lambda a, b: ceildiv(a, 4), lambda a, b: a % 5]


def _run(program, leaves):
    """The values of a straight-line program of (op, i, j) steps over leaves (Exprs or ints)."""
    vals = list(leaves)
    for op, i, j in program:
        vals.append(op(vals[i], vals[j]))
    return vals


@pytest.mark.parametrize("seed", range(40))
def test_random_expressions_evaluate_like_python_ints(seed):
    rng = random.Random(seed)
    consts = [1, 2, 3, 7, 64]
    program = []
    for step in range(12):
        n = 3 + len(consts) + step
        program.append((rng.choice(OPS), rng.randrange(n), rng.randrange(n)))
    exprs = _run(program, [N, S, H, *consts])
    for _ in range(20):
        values = {"N": rng.randint(1, 16), "S": rng.randint(1, 512), "H": rng.randint(32, 4000)}
        ints = _run(program, [values["N"], values["S"], values["H"], *consts])
        for e, want in zip(exprs, ints):
            assert evaluate(e, values) == want, (sy.text(e), values)
            lo, hi = sy.bounds(e)
            assert lo <= want <= hi, (sy.text(e), values, lo, hi)
            assert _c_eval(sy.c_expr(e, lambda s: s.name), values) == want, sy.c_expr(e, lambda s: s.name)


@pytest.mark.parametrize("seed", range(20))
def test_decided_comparisons_are_true_at_every_sampled_value(seed):
    rng = random.Random(1000 + seed)
    exprs = [N, S, H, N * S, H // 2, H - 31, smin(N, S), 2 * N + 1, (H - 1) // 2 + 1, 5]
    for a in exprs:
        for b in exprs:
            for cmp in (operator.lt, operator.le, operator.eq, operator.ge, operator.gt):
                try:
                    decided = cmp(a, b)
                except Undecidable:
                    continue
                for _ in range(10):
                    values = {"N": rng.randint(1, 16), "S": rng.randint(1, 512), "H": rng.randint(32, 4000)}
                    assert cmp(evaluate(a, values), evaluate(b, values)) == decided, (sy.text(a), cmp, sy.text(b))


def test_ranges_are_checked():
    with pytest.raises(ValueError):
        sym("x", 5, 2)
    with pytest.raises(ValueError):
        sym("x", 3, 3)
