"""Einsum (opset 12) with one or two operands, as one generic contraction kernel.

The equation is planned here: every index letter (and each dim an ellipsis covers) gets a size
and, per operand, an element stride (the sum of the strides of the operand's dims carrying that
letter, so a repeated letter such as "ii->i" walks the diagonal; 0 where an ellipsis dim is
broadcast). The output letters form the parallel index space and the other letters the
contracted one. One dim is walked innermost: the last output dim (an axpy over the output row)
when every operand walks it with stride 0 or 1, otherwise a contracted dim that they walk
contiguously (a dot product per output element).

In a dynamic model the sizes and strides that hold a dynamic dim are tiling fields
(common.tiling_field); a dim is dropped, or taken as broadcast, only where it is 1 whatever the
run's sizes.
"""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import KernelCall
from . import common
from .registry import REQUIRED, Op, register

_DTYPES = {"float32", "float64", "int32", "int64"}


def _is(a, b) -> bool:
    """a == b whatever the run's sizes (False where only the run decides)."""
    return symbolic.decided(lambda: a == b, False)


class _Plan:
    """The parsed equation: sizes and strides of every label, which labels the output keeps."""

    def __init__(self, node, equation: str, shapes: list[tuple[int, ...]]):
        self.node = node
        eq = "".join(equation.split())
        if eq.count("->") > 1:
            self.fail(f"equation {equation!r} has more than one '->'")
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            self.fail(f"equation {equation!r} names {len(terms)} operands, the node has {len(shapes)}")
        parsed = [self.split(t) for t in terms]
        ell = 0
        for (before, after, has_ell), shape in zip(parsed, shapes):
            n = len(shape) - len(before) - len(after)
            if n < 0 or (n > 0 and not has_ell):
                self.fail(f"term {''.join(before)}{'...' if has_ell else ''}{''.join(after)!s} does not match "
                          f"an operand of rank {len(shape)}", shape=True)
            ell = max(ell, n)
        self.ell_labels = [f"...{i}" for i in range(ell)]
        self.sizes: dict[str, int] = {}
        self.strides: list[dict[str, int]] = []
        order: list[str] = []
        for (before, after, _), shape in zip(parsed, shapes):
            n = len(shape) - len(before) - len(after)
            labels = before + self.ell_labels[ell - n:] + after
            contiguous = [common.prod(shape[i + 1:]) for i in range(len(shape))]
            strides: dict[str, int] = {}
            for label, size, stride in zip(labels, shape, contiguous):
                self.size_of(label, size)
                if label not in order:
                    order.append(label)
                broadcast = label.startswith("...") and _is(size, 1)
                strides[label] = strides.get(label, 0) + (0 if broadcast else stride)
            self.strides.append(strides)
        if arrow:
            before, after, has_ell = self.split(rhs)
            self.out = before + (self.ell_labels if has_ell else []) + after
            if len(set(self.out)) != len(self.out):
                self.fail(f"output term {rhs!r} repeats an index")
            for label in self.out:
                if label not in self.sizes:
                    self.fail(f"output index {label!r} appears in no operand")
        else:   # implicit mode: broadcast dims, then the letters used exactly once, sorted
            letters = [c for before, after, _ in parsed for c in before + after]
            self.out = self.ell_labels + sorted(c for c in set(letters) if letters.count(c) == 1)
        self.contracted = [label for label in order if label not in self.out]

    def fail(self, what: str, shape: bool = False):
        cls = ShapeError if shape else UnsupportedOpError
        raise cls(f"node {self.node.name!r} (Einsum): {what}")

    def split(self, term: str) -> tuple[list[str], list[str], bool]:
        before, ell, after = term.partition("...")
        for c in before + after:
            if not c.isalpha():
                self.fail(f"invalid character {c!r} in equation term {term!r}")
        return list(before), list(after), bool(ell)

    def size_of(self, label: str, size: int) -> None:
        known = self.sizes.get(label)
        if known is None or _is(known, 1) and label.startswith("..."):
            self.sizes[label] = size
        elif not _is(size, known) and not (_is(size, 1) and label.startswith("...")):
            self.fail(f"index {label!r} has sizes {known} and {size}", shape=True)

    def dim(self, label: str) -> dict:
        return {"size": self.sizes[label], "strides": [s.get(label, 0) for s in self.strides]}

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.sizes[label] for label in self.out)


@register("Einsum", since=12)
class Einsum(Op):
    dynamic_shapes = True
    attrs = {"equation": REQUIRED}

    def plan(self, node, ins) -> _Plan:
        if not 1 <= len(ins) <= 2:
            raise UnsupportedOpError(f"node {node.name!r} (Einsum): {len(ins)} operands; om2gen compiles Einsum "
                                     "with one or two operands (split longer contractions into pairs)")
        dtype = ins[0].dtype
        if dtype.name not in _DTYPES or any(v.dtype != dtype for v in ins):
            raise UnsupportedOpError(f"node {node.name!r} (Einsum): operands are "
                                     f"{', '.join(v.dtype.name for v in ins)}; supported: one dtype of "
                                     f"{', '.join(sorted(_DTYPES))}")
        return _Plan(node, str(self.attr(node, "equation")), [v.shape for v in ins])

    def infer(self, node, ins):
        return [common.out(ins[0].dtype, self.plan(node, ins).out_shape)]

    def lower(self, node, ins, outs, ctx):
        plan = self.plan(node, ins)
        out_dims = [plan.dim(label) for label in plan.out if not _is(plan.sizes[label], 1)]
        red_dims = [plan.dim(label) for label in plan.contracted if not _is(plan.sizes[label], 1)]
        if any(_is(plan.sizes[label], 0) for label in plan.contracted):
            red_dims = [{"size": 0, "strides": [0] * len(ins)}]    # an empty sum: the output is zero

        def contiguous(d):
            return all(_is(s, 0) or _is(s, 1) for s in d["strides"])

        inner_red = [d for d in red_dims if contiguous(d)]
        if out_dims and (contiguous(out_dims[-1]) or not inner_red):
            mode, inner, outer = "axpy", out_dims[-1], out_dims[:-1]
        elif red_dims:
            inner = max(inner_red or red_dims[-1:], key=lambda d: sum(_is(s, 1) for s in d["strides"]))
            red_dims = [d for d in red_dims if d is not inner]
            mode, outer = "dot", out_dims
        else:
            mode, inner, outer = "axpy", {"size": 1, "strides": [0] * len(ins)}, out_dims
        items = common.prod([d["size"] for d in outer])
        reduce = common.prod([d["size"] for d in red_dims])
        tiling: dict = {"items": items}

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)

        def fields(dims, prefix: str) -> list[dict]:   # innermost first, for the div/mod walk from a flat index
            return [{"size": field(d["size"], f"{prefix}{i}"), "strides": [field(x, f"{prefix}{i}_s{j}")
                                                                        for j, x in enumerate(d["strides"])]}
                    for i, d in enumerate(reversed(dims))]
        equation = "".join(str(self.attr(node, "equation")).split())
        params = {
            "summary": f"Einsum {equation}: {', '.join(v.describe() for v in ins)} -> {outs[0].describe()}",
            "ctype": ins[0].dtype.c_type, "out_slot": len(ins), "n_addr": len(ins) + 1, "mode": mode,
            "N": field(inner["size"], "N"), "inner": [field(x, f"inner_s{j}") for j, x in enumerate(inner["strides"])],
            "R": field(reduce, "R"), "outer": fields(outer, "o"), "red": fields(red_dims, "r"),
        }
        params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/einsum.c.j2", "Einsum", params, [v.name for v in ins], [outs[0].name],
                          block_dim=common.block_dim_for(items, reduce * inner["size"]), tiling=tiling)
