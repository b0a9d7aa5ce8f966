"""Integer expressions over a dynamic model's dims: the sizes that only the run knows.

A dim the user marks dynamic (`--input-shape "x:1~16,3,-1,-1"`) is a `Sym` with a range; every
size computed from it (an output dim, a tiling field, a block count, a buffer's bytes) is an
`Expr`. Arithmetic on ints and Exprs gives an int when the result is a constant, so code written
for static shapes runs on dynamic ones unchanged wherever its decisions do not depend on what
the run will bring.

Decisions are the point. `a == b`, `a < b`, `bool(a)`, `int(a)` answer when the answer holds for
every value in the symbols' ranges (`N == N`; `N >= 1` for N in 1~16; `H + 2 > H`), and raise
`Undecidable` otherwise (`N == 1` for N in 1~16). Lowering catches that and names the node: an op
whose static code asks such a question has no dynamic support (yet), which is a compile-time
error, never a silently wrong shape.

Canonical form: a sum of monomials with integer coefficients, a monomial being a product of
atoms (a Sym, or an opaque floor division, min or max). Equal sums print and hash equally, so
`N * S * 768 // (N * S)` is 768 and two paths to the same dim compare equal. `c_expr` prints an
Expr as C (int64_t arithmetic, om2_floordiv/om2_min/om2_max from om2/om2_dims.h).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Callable, Union

INF = math.inf


class Undecidable(Exception):
    """A question about dynamic sizes whose answer depends on the run (`question` says which)."""

    def __init__(self, question: str):
        super().__init__(question)
        self.question = question


# --------------------------------------------------------------------------------------------
# atoms


@dataclass(frozen=True)
class Sym:
    """A dynamic dim: name, and the range [lo, hi] the model is compiled for (hi None: no bound)."""
    name: str
    lo: int = 0
    hi: int | None = None

    def key(self) -> tuple:
        return (0, self.name)

    def bounds(self) -> tuple[float, float]:
        return (self.lo, INF if self.hi is None else self.hi)

    def text(self) -> str:
        return self.name

    def c(self, name_of: Callable[["Sym"], str]) -> str:
        return name_of(self)

    def evaluate(self, values: dict) -> int:
        return int(values[self.name])


@dataclass(frozen=True)
class _Fn:
    """An opaque atom: floordiv(a, b), min(a, b, ...) or max(...), arguments canonical."""
    fn: str
    args: tuple

    def key(self) -> tuple:
        return (1, self.fn, tuple(_key(a) for a in self.args))

    def bounds(self) -> tuple[float, float]:
        bs = [bounds(a) for a in self.args]
        if self.fn == "min":
            return (min(b[0] for b in bs), min(b[1] for b in bs))
        if self.fn == "max":
            return (max(b[0] for b in bs), max(b[1] for b in bs))
        (alo, ahi), (blo, bhi) = bs      # floordiv by a positive divisor (the only kind made)
        los = [_fdiv(alo, blo), _fdiv(alo, bhi)]
        his = [_fdiv(ahi, blo), _fdiv(ahi, bhi)]
        return (min(los), max(his))

    def text(self) -> str:
        if self.fn == "floordiv":
            return f"{_paren(self.args[0])} // {_paren(self.args[1])}"
        return f"{self.fn}({', '.join(text(a) for a in self.args)})"

    def c(self, name_of) -> str:
        name = {"floordiv": "om2_floordiv", "min": "om2_min", "max": "om2_max"}[self.fn]
        out = c_expr(self.args[0], name_of)
        for a in self.args[1:]:
            out = f"{name}({out}, {c_expr(a, name_of)})"
        return out

    def evaluate(self, values: dict) -> int:
        vals = [evaluate(a, values) for a in self.args]
        if self.fn == "floordiv":
            return vals[0] // vals[1]
        return min(vals) if self.fn == "min" else max(vals)


def _fdiv(a: float, b: float) -> float:
    if math.isinf(a):
        return a if b > 0 else -a
    if math.isinf(b):
        return 0
    return a // b


Atom = Union[Sym, _Fn]


# --------------------------------------------------------------------------------------------
# the expression: sum of coefficient * product of atom ** power


class Expr:
    """A canonical, non-constant integer expression. Never built directly: arithmetic on Syms,
    Exprs and ints makes them (and gives ints for constants)."""
    __slots__ = ("terms", "_hash")

    def __init__(self, terms: tuple):
        self.terms = terms           # ((monomial, coefficient), ...) sorted; monomial ((atom, power), ...)
        self._hash = hash(tuple((tuple((_key(a), p) for a, p in m), c) for m, c in terms))

    # arithmetic (with ints, Syms and Exprs; anything else is not ours to combine) --------------
    def __add__(self, other):
        return _poly_add(_terms(self), _terms(other)) if _operand(other) else NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        return _poly_add(_terms(self), _scaled(_terms(other), -1)) if _operand(other) else NotImplemented

    def __rsub__(self, other):
        return _poly_add(_terms(other), _scaled(_terms(self), -1)) if _operand(other) else NotImplemented

    def __neg__(self):
        return _make(_scaled(self.terms, -1))

    def __mul__(self, other):
        return _poly_mul(_terms(self), _terms(other)) if _operand(other) else NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other) if _operand(other) else NotImplemented

    def __rfloordiv__(self, other):
        return floordiv(other, self) if _operand(other) else NotImplemented

    def __mod__(self, other):
        return self - other * floordiv(self, other) if _operand(other) else NotImplemented

    def __rmod__(self, other):
        return other - self * floordiv(other, self) if _operand(other) else NotImplemented

    # decisions -------------------------------------------------------------------------------
    def __eq__(self, other):
        if not _operand(other):
            return NotImplemented
        diff = self - other
        if isinstance(diff, int):
            return diff == 0
        lo, hi = bounds(diff)
        if lo > 0 or hi < 0:
            return False
        if _assumed(self, other):
            return True
        raise Undecidable(f"{text(self)} == {text(other)}")

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __lt__(self, other):
        return _positive(other - self, f"{text(self)} < {text(other)}")

    def __le__(self, other):
        return _positive(other - self + 1, f"{text(self)} <= {text(other)}")

    def __gt__(self, other):
        return _positive(self - other, f"{text(self)} > {text(other)}")

    def __ge__(self, other):
        return _positive(self - other + 1, f"{text(self)} >= {text(other)}")

    def __bool__(self):
        return self != 0

    def __int__(self):
        raise Undecidable(f"the value of {text(self)}")

    __index__ = __int__

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return text(self)

    __str__ = __repr__


Dim = Union[int, Expr]


def sym(name: str, lo: int = 0, hi: int | None = None) -> Expr:
    """The Expr of one dynamic dim in [lo, hi] (hi None: unbounded)."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"dim {name}: range {lo}~{hi} is empty or negative")
    if hi == lo:
        raise ValueError(f"dim {name}: range {lo}~{hi} is one value; use the int")
    return Expr((((((Sym(name, lo, hi), 1),), 1),)))


def is_static(d) -> bool:
    """Whether a dim (or every dim of a shape) is known at compile time."""
    if isinstance(d, (list, tuple)):
        return all(is_static(x) for x in d)
    return not isinstance(d, Expr)


def symbols(d) -> set[Sym]:
    """The Syms an int, Expr or sequence of them depends on."""
    if isinstance(d, (list, tuple)):
        return set().union(*(symbols(x) for x in d)) if d else set()
    if not isinstance(d, Expr):
        return set()
    out: set[Sym] = set()
    for mono, _ in d.terms:
        for atom, _ in mono:
            out |= {atom} if isinstance(atom, Sym) else symbols(list(atom.args))
    return out


def _operand(x) -> bool:
    """An int (numpy's too), Sym or Expr: what arithmetic with an Expr accepts."""
    return isinstance(x, (Expr, Sym)) or (hasattr(x, "__index__") and not isinstance(x, bool) and
                                          not hasattr(x, "__len__"))


def _key(x) -> tuple:
    if isinstance(x, int):
        return (-1, x)
    if isinstance(x, Expr):
        return (2, tuple((tuple((a.key(), p) for a, p in m), c) for m, c in x.terms))
    return x.key()


def _terms(x) -> tuple:
    if isinstance(x, Expr):
        return x.terms
    if isinstance(x, Sym):
        return ((((x, 1),), 1),)
    return (((), int(x)),) if int(x) else ()


def _make(terms: tuple):
    """The int or Expr of a term list (zero coefficients dropped, sorted)."""
    terms = tuple(sorted(((m, c) for m, c in terms if c), key=lambda t: _mono_key(t[0])))
    if not terms:
        return 0
    if len(terms) == 1 and terms[0][0] == ():
        return terms[0][1]
    return Expr(terms)


def _mono_key(m: tuple) -> tuple:
    return (len(m), tuple((a.key(), p) for a, p in m))


def _poly_add(a: tuple, b: tuple):
    acc: dict = {}
    for m, c in a + b:
        acc[m] = acc.get(m, 0) + c
    return _make(tuple(acc.items()))


def _scaled(t: tuple, k: int) -> tuple:
    return tuple((m, c * k) for m, c in t)


def _mono_mul(x: tuple, y: tuple) -> tuple:
    powers: dict = {}
    for a, p in x + y:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0].key()))


def _poly_mul(a: tuple, b: tuple):
    acc: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = _mono_mul(ma, mb)
            acc[m] = acc.get(m, 0) + ca * cb
    return _make(tuple(acc.items()))


def _atom_expr(atom) -> Expr:
    return Expr(((((atom, 1),), 1),))


def _positive(x, question: str) -> bool:
    """x > 0 for every value in range (True), for none (False), else Undecidable."""
    if isinstance(x, int):
        return x > 0
    lo, hi = bounds(x)
    if lo > 0:
        return True
    if hi <= 0:
        return False
    raise Undecidable(question)


# --------------------------------------------------------------------------------------------
# floor division, min, max


def floordiv(a, b):
    """a // b (Python's floor division) for a divisor that is positive at every value in range."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if isinstance(b, int):
        if b <= 0:
            raise Undecidable(f"({text(a)}) // {b}: om2gen divides dynamic sizes by positive numbers only")
        if b == 1:
            return a
        # a = b*Q + R, Q the terms whose coefficients b divides: a // b = Q + R // b
        q = tuple((m, c // b) for m, c in _terms(a) if c % b == 0)
        r = tuple((m, c) for m, c in _terms(a) if c % b)
        rest = _make(r)
        if isinstance(rest, int):
            return _poly_add(q, _terms(rest // b))
        lo, hi = bounds(rest)
        if lo >= 0 and hi < b:
            return _make(q)
        return _poly_add(q, _terms(_atom_expr(_Fn("floordiv", (rest, b)))))
    lo, _ = bounds(b)
    if lo <= 0:
        raise Undecidable(f"({text(a)}) // ({text(b)}): the divisor may be 0 or negative")
    # a divisor that is one monomial dividing every term of a: the exact quotient
    bt = _terms(b)
    if len(bt) == 1:
        (bm, bc), = bt
        quotient = []
        for m, c in _terms(a):
            rest = _mono_div(m, bm)
            if rest is None or c % bc:
                break
            quotient.append((rest, c // bc))
        else:
            return _make(tuple(quotient))
    return _atom_expr(_Fn("floordiv", (a, b)))


def _mono_div(m: tuple, d: tuple) -> tuple | None:
    powers = dict(m)
    for a, p in d:
        if powers.get(a, 0) < p:
            return None
        powers[a] -= p
    return tuple(sorted(((a, p) for a, p in powers.items() if p), key=lambda ap: ap[0].key()))


def ceildiv(a, b):
    """-(-a // b): the number of b-sized pieces that cover a."""
    return -floordiv(-a, b) if isinstance(a, int) and isinstance(b, int) else floordiv(a + b - 1, b)


def smin(*xs):
    """min() that is symbolic where it must be: the smallest where the ranges decide it."""
    return _extreme("min", xs)


def smax(*xs):
    return _extreme("max", xs)


def _extreme(fn: str, xs) -> Dim:
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = tuple(xs[0])
    flat = []
    for x in xs:        # min(min(a, b), c) is min(a, b, c)
        atom = _single_atom(x)
        flat.extend(atom.args if isinstance(atom, _Fn) and atom.fn == fn else (x,))
    better = (lambda a, b: a <= b) if fn == "min" else (lambda a, b: a >= b)
    kept: list = []
    for x in flat:
        if any(_decided(better, k, x) for k in kept):
            continue                                     # a kept one is always at least as good
        kept = [k for k in kept if not _decided(better, x, k)] + [x]
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=_key)
    return _atom_expr(_Fn(fn, tuple(kept)))


def _single_atom(x):
    """The atom x is (coefficient 1, power 1), or None."""
    if isinstance(x, Expr) and len(x.terms) == 1:
        (mono, c), = x.terms
        if c == 1 and len(mono) == 1 and mono[0][1] == 1:
            return mono[0][0]
    return None


def decided(question: Callable[[], bool], otherwise: bool) -> bool:
    """question()'s answer where the ranges decide it, else `otherwise`: for a choice that is
    right either way and only better one way (a kernel variant, a fast path)."""
    try:
        return bool(question())
    except Undecidable:
        return otherwise


def _decided(better, a, b) -> bool:
    try:
        return bool(better(a, b))
    except Undecidable:
        return False


# --------------------------------------------------------------------------------------------
# reading an expression


def bounds(x) -> tuple[float, float]:
    """[lo, hi] of x over its symbols' ranges (hi may be inf): sound, not always tight."""
    if isinstance(x, int):
        return (x, x)
    if isinstance(x, Sym):
        return x.bounds()
    lo = hi = 0
    for mono, c in x.terms:
        mlo, mhi = 1, 1
        for atom, p in mono:
            alo, ahi = atom.bounds()
            if alo < 0:   # only floordiv/min/max of negative parts get here: take the wide box
                cands = [_pow(alo, p), _pow(ahi, p)]
                alo_p, ahi_p = (min(cands + [0]) if p % 2 else 0), max(cands)
            else:
                alo_p, ahi_p = _pow(alo, p), _pow(ahi, p)
            prods = [mlo * alo_p, mlo * ahi_p, mhi * alo_p, mhi * ahi_p]
            prods = [0 if math.isnan(v) else v for v in prods]
            mlo, mhi = min(prods), max(prods)
        tlo, thi = (c * mlo, c * mhi) if c > 0 else (c * mhi, c * mlo)
        lo, hi = lo + tlo, hi + thi
    return (lo, hi)


def _pow(v: float, p: int) -> float:
    return v ** p if not math.isinf(v) else (v if p % 2 or v > 0 else INF)


def upper_bound(x) -> int | None:
    """The largest value x takes over the ranges, or a bound on it; None if unbounded."""
    hi = bounds(x)[1]
    return None if math.isinf(hi) else int(hi)


def evaluate(x, values: dict) -> int:
    """x at the given symbol values ({name: int})."""
    if isinstance(x, int):
        return x
    if isinstance(x, Sym):
        return x.evaluate(values)
    total = 0
    for mono, c in x.terms:
        v = c
        for atom, p in mono:
            v *= atom.evaluate(values) ** p
        total += v
    return total


def text(x) -> str:
    """x as a person reads it: 2*N*S + 1, (H - 1) // 2 + 1, min(N, 16)."""
    if isinstance(x, int):
        return str(x)
    if isinstance(x, Sym):
        return x.name
    if not isinstance(x, Expr):
        return str(x)
    parts = []
    for mono, c in reversed(x.terms):     # the constant last
        body = "*".join(a.text() + (f"**{p}" if p > 1 else "") for a, p in mono)
        if not body:
            parts.append((c < 0, str(abs(c))))
        else:
            parts.append((c < 0, body if abs(c) == 1 else f"{abs(c)}*{body}"))
    out = ("-" if parts[0][0] else "") + parts[0][1]
    for neg, p in parts[1:]:
        out += (" - " if neg else " + ") + p
    return out


def _paren(x) -> str:
    t = text(x)
    return t if isinstance(x, int) or (isinstance(x, Expr) and len(x.terms) == 1 and len(x.terms[0][0]) <= 1
                                        and x.terms[0][1] == 1) else f"({t})"


def c_expr(x, name_of: Callable[[Sym], str]) -> str:
    """x as an int64_t C expression; name_of(sym) is the C lvalue holding a symbol's value."""
    if isinstance(x, int):
        return f"INT64_C({x})" if abs(x) > 0x7FFFFFFF else str(x)
    if isinstance(x, Sym):
        return name_of(x)
    parts = []
    for mono, c in reversed(x.terms):
        factors = []
        for atom, p in mono:
            factors += [_c_atom(atom, name_of)] * p
        body = " * ".join(factors)
        if not body:
            parts.append((c < 0, c_expr(abs(c), name_of)))
        else:
            parts.append((c < 0, body if abs(c) == 1 else f"{c_expr(abs(c), name_of)} * {body}"))
    out = ("-" if parts[0][0] else "") + parts[0][1]
    for neg, p in parts[1:]:
        out += (" - " if neg else " + ") + p
    return f"({out})" if len(parts) > 1 or parts[0][0] else out


def _c_atom(atom, name_of) -> str:
    return atom.c(name_of)


# --- unbounded dims in a classic .om (the RT2 path, docs/dynamic-shapes.md) -------------------

# An .om sizes its memory at each run, so it takes dims without an upper bound. Where a choice
# needs a largest size (a tile shape, a planned offset), those dims are planned at PLANNING_SIZE
# (or their lower bound, if larger): set by the pipeline while it lowers for an .om.
UNBOUNDED_PLANNED = contextvars.ContextVar("om2gen_unbounded_planned", default=False)
PLANNING_SIZE = 64


def planned_bound(x) -> int | None:
    """upper_bound(x), or, while UNBOUNDED_PLANNED, x with its unbounded symbols at PLANNING_SIZE
    (their lower bound if larger) and the others at their upper bound; None when unbounded otherwise."""
    hi = upper_bound(x)
    if hi is not None or not UNBOUNDED_PLANNED.get():
        return hi
    return max(0, evaluate(x, {s.name: max(s.lo, PLANNING_SIZE) if s.hi is None else s.hi for s in symbols(x)}))


def unbounded(x) -> bool:
    """Whether x has no upper bound over its ranges."""
    return upper_bound(x) is None


# --------------------------------------------------------------------------------------------
# assumptions: what a compile takes to hold and the run must check (the guards of guard_check.so)


@dataclass(frozen=True)
class Assumption:
    """`left == right` for two dynamic dims the ranges do not relate (S and T, each 1~512, where
    [N, S] meets [N, T]), taken by node `node` so that it compiles; the run checks it."""
    node: str
    left: Expr
    right: Expr

    def text(self) -> str:
        return f"{text(self.left)} == {text(self.right)}"


_ASSUMING: contextvars.ContextVar[list | None] = contextvars.ContextVar("om2gen_assuming", default=None)


@contextlib.contextmanager
def assuming():
    """Within: assume_equal may take two symbols to be equal; yields the list of Assumptions made
    (in order), and `==` answers True for a pair taken equal."""
    made: list[Assumption] = []
    token = _ASSUMING.set(made)
    try:
        yield made
    finally:
        _ASSUMING.reset(token)


def assume_equal(a, b, node: str) -> bool:
    """Takes a == b (recorded for `node`) where both are single symbols with overlapping ranges
    and an assuming() block is active; False otherwise (the question stays Undecidable)."""
    made = _ASSUMING.get()
    x, y = _single_atom(a), _single_atom(b)
    if made is None or not isinstance(x, Sym) or not isinstance(y, Sym) or x == y:
        return False
    (xlo, xhi), (ylo, yhi) = x.bounds(), y.bounds()
    if xhi < ylo or yhi < xlo:
        return False
    if not _assumed(a, b):
        made.append(Assumption(node, a, b))
    return True


def _assumed(a, b) -> bool:
    made = _ASSUMING.get()
    if not made:
        return False
    pair = {text(a), text(b)}
    return any({text(m.left), text(m.right)} == pair for m in made)
