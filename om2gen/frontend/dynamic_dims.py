"""The symbols of a dynamic model: one per dim the user marks dynamic (-1 or a range lo~hi
without a gear option, docs/dynamic-shapes.md).

A dim the ONNX model names (dim_param "batch", "sequence") is that name's symbol, the same for
every input that names it: input_ids[N, S] and attention_mask[N, S] share N and S, as ONNX
says they must. An unnamed dim is `<input>_<axis>`. -1 means any size from 1 up (a model whose
tensor is empty is not what -1 asks for; give 0~hi to allow it). `lo~hi%m`, the multiples of m
in lo~hi, is m times a symbol of the range lo/m~hi/m.
"""
from __future__ import annotations

import re

from ..advice import shape_option
from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from .pins import DimRange

MAX_DIM = (1 << 31) - 1    # the largest value a dynamic dim's range may reach


class Symbols:
    """The symbols an import makes, by name."""

    def __init__(self):
        self.by_name: dict[str, tuple[symbolic.Expr, DimRange, str]] = {}   # name -> (Expr, range, declared at)

    def dim(self, input_name: str, axis: int, d, dim_param: str):
        """The dim of a pinned input shape: an int as it is, -1 or a DimRange as a symbol. A
        multiple of m (`lo~hi%m`) is m * k, k the symbol `<name>_div<m>` in lo/m~hi/m, so that
        what the multiple decides (H // 32 * 2 == H // 16) is decided."""
        if isinstance(d, int) and d >= 0:
            return d
        rng = DimRange(1, None) if d == -1 else d
        name = c_name(dim_param) if dim_param else c_name(f"{input_name}_{axis}")
        where = f"{input_name} dim {axis}"
        if name in self.by_name:
            expr, first_rng, first = self.by_name[name]
            if rng != first_rng:
                raise ShapeError(f"{shape_option()} gives the dim {name!r} the range {rng} at {where} but "
                                 f"{first_rng} at {first}; the model says both are the same dim ({name!r}): "
                                 "give them one range")
            return expr
        if rng.hi is not None and rng.hi > MAX_DIM:
            raise ShapeError(f"{shape_option()}: {where} has the range {rng}, beyond the {MAX_DIM} a dim "
                             "may reach")
        m = rng.multiple
        expr = symbolic.sym(name, rng.lo, rng.hi) if m == 1 else \
            m * symbolic.sym(f"{name}_div{m}", rng.lo // m, None if rng.hi is None else rng.hi // m)
        self.by_name[name] = (expr, rng, where)
        return expr


def c_name(text: str) -> str:
    """A symbol name that is also a C identifier: letters, digits and _."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if name and not name[0].isdigit() else f"d_{name}"


class Failures:
    """The nodes of a dynamic model that cannot take its shapes, collected while inferring so
    that the error names every one (the nodes behind them are not inferred, nor blamed)."""

    def __init__(self):
        self.nodes: list[tuple[str, str, str | None]] = []   # (node, op type, the question it asked)
        self.values: set[str] = set()                          # outputs of those nodes and of the nodes behind

    def downstream(self, node) -> bool:
        """Whether the node reads what a refused node makes (then it is skipped too)."""
        if any(n in self.values for n in node.inputs if n):
            self.values.update(o for o in node.outputs if o)
            return True
        return False

    def refuses(self, node, ins, op) -> bool:
        """A node over dynamic shapes whose op has no dynamic support: noted, and True."""
        if getattr(op, "dynamic_shapes", False) or not any(v is not None and (not v.is_static or v.dims is not None)
                                                            for v in ins):
            return False
        self.nodes.append((node.name, node.op_type, None))
        self.values.update(o for o in node.outputs if o)
        return True

    def undecided(self, node, question: str) -> None:
        self.nodes.append((node.name, node.op_type, question))
        self.values.update(o for o in node.outputs if o)

    def check(self, graph) -> None:
        if not self.nodes:
            return
        dims = ", ".join(f"{graph_input}{_dims_text(graph.values[graph_input].shape)}"
                         for graph_input in graph.inputs if not graph.values[graph_input].is_static)
        ranges = ", ".join(_range_text(s) for s in sorted(
            symbolic.symbols([d for i in graph.inputs for d in graph.values[i].shape]), key=lambda s: s.name))
        listed = "; ".join(f"{name} ({op})" + (f": it asks {q!r}, which only the run answers" if q else "")
                           for name, op, q in self.nodes)
        what = f"dynamic shapes ({dims}; {ranges})" if dims else \
            "sizes its data decides (the count of a NonZero or NonMaxSuppression, docs/dynamic-shapes.md)"
        raise UnsupportedOpError(
            f"the model has {what} and {len(self.nodes)} node(s) cannot take them: "
            f"{listed}. Pin the shapes ({shape_option()} with every dim a number), or compile a fixed set of "
            "sizes (gears: -1 dims with a gear option), or narrow the ranges so that the question is answered")


def _range_text(s: symbolic.Sym) -> str:
    return f"{s.name} >= {s.lo}" if s.hi is None else f"{s.name} in {s.lo}~{s.hi}"


def _dims_text(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"
