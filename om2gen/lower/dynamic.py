"""A dynamic model's lowering (docs/dynamic-shapes.md): the kernels whose tiling depends on the
run become tiling-sink kernels, each after a PREPROCESS_KERNEL step that computes its tiling
from the run's symbols, and every size is planned at the largest value its range gives.

The model code binds the symbols (one int64 per dynamic dim) from the input shapes before each
replay and writes them to the workspace ("::symbols"); each PREPROCESS_KERNEL task runs one
function of the device tiling library over them and writes its kernel's tiling (block count,
then the TilingData fields) to the kernel's tiling region ("::tiling<step>"); the kernel reads
it there (om2/om2_kernel.h, OM2_TILING_SINK). The captured task list is the same for every
size, so a dynamic model is loaded and captured once and replayed per run, as a static one.
"""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import KernelCall, Symbol, TilingCall
from ..ops import common
from .state import Lowering, Step

SYMBOLS = "::symbols"


def tiling_key(step: int) -> str:
    """The workspace key of the tiling region of the sink kernel at `step`."""
    return f"::tiling{step}"


def is_dynamic(state: Lowering) -> bool:
    """Dynamic inputs, or a data-dependent count (NonZero's) inside: either way sizes the run decides."""
    return any(not state.graph.values[n].is_static for n in state.graph.inputs) or bool(_counts(state))


def symbols(state: Lowering) -> list[Symbol]:
    """The model's symbols, in the order of the input dims that give them, then the data-dependent
    counts in the order of the kernels that write them."""
    out: dict[str, Symbol] = {}
    for i, name in enumerate(state.graph.inputs):
        for axis, d in enumerate(state.graph.values[name].shape):
            if isinstance(d, symbolic.Expr):
                sym, = symbolic.symbols(d)
                out.setdefault(sym.name, Symbol(sym.name, sym.lo, sym.hi, i, axis, multiple=_multiple(d)))
    for node, sym in _counts(state):
        out.setdefault(sym.name, Symbol(sym.name, sym.lo, sym.hi, -1, -1, producer=node))
    return list(out.values())


def symbol_offset(state: Lowering, workspace: dict[str, int], name: str) -> int:
    """The workspace offset of symbol `name`'s int64 in the symbols table."""
    return workspace[SYMBOLS] + 8 * [s.name for s in symbols(state)].index(name)


def _counts(state: Lowering) -> list[tuple[str, symbolic.Sym]]:
    """(node, Sym) of each data-dependent count a kernel writes (KernelCall.count_symbol). Its Sym
    is in the node's outputs' dims, where the op's infer() made it."""
    out = []
    for step in state.steps:
        name = getattr(step.call, "count_symbol", "")
        if name:
            made = symbolic.symbols([d for o in step.node.outputs if o for d in state.graph.values[o].shape])
            out.append((step.node.name, next(s for s in made if s.name == name)))
    return out


def _multiple(d: symbolic.Expr) -> int:
    """m of an input dim m * k (frontend/dynamic_dims.py: a `lo~hi%m` dim); 1 for a plain symbol."""
    (mono, m), = d.terms
    assert len(mono) == 1 and mono[0][1] == 1, f"an input dim is a symbol or a multiple of one, not {d}"
    return m


def max_bytes(size, what: str) -> int:
    """The most bytes a dynamic size takes: its upper bound over the ranges."""
    if isinstance(size, int):
        return size
    most = symbolic.upper_bound(size)
    if most is None:
        names = ", ".join(sorted(s.name for s in symbolic.symbols(size) if s.hi is None))
        raise ShapeError(f"{what} has {symbolic.text(size)} bytes, which has no upper bound ({names} can be any "
                         "size): an .om2 archive plans its memory for the largest sizes, so give each dynamic dim "
                         "a range lo~hi")
    return most


def sink(state: Lowering) -> None:
    """Every kernel call whose tiling, block count or scratch depends on the run becomes a sink
    kernel after its TilingCall step. A call whose template parameters (compiled into its code)
    depend on the run cannot be: its node is refused, with every other such node."""
    refused = list(state.refused)
    steps: list[Step] = []
    moved: dict[int, int] = {}      # old step index -> new (TilingCall steps come in before kernels)
    for old, step in enumerate(state.steps):
        moved[old] = len(steps)
        call = step.call
        compiled_in = _exprs(call.params) if isinstance(call, KernelCall) else []
        if compiled_in:
            refused.append(f"{step.node.name} ({step.node.op_type}): its kernel would compile "
                           f"{symbolic.text(compiled_in[0])} into its code")
            continue
        if not isinstance(call, KernelCall) or not _dynamic(call):
            steps.append(step)
            continue
        launch = min(common.MAX_BLOCKS, symbolic.upper_bound(call.block_dim) or common.MAX_BLOCKS)
        fields = dict(call.tiling)
        blocks = call.block_dim
        call.sink = True
        call.block_dim = max(1, launch)
        call.workspace = max_bytes(call.workspace, f"the scratch of node {step.node.name!r}")
        steps.append(Step(step.node, TilingCall(kernel_step=len(steps) + 1, block_dim=symbolic.smin(blocks, launch),
                                                fields=fields)))
        moved[old] = len(steps) - 1     # a loop body starting at the kernel starts at its tiling
        steps.append(step)
    if refused:
        if any(not state.graph.values[n].is_static for n in state.graph.inputs):
            advice = "Pin the shapes, or compile a fixed set of sizes (gears)"
        else:
            advice = ("Their sizes are a count only the run knows (NonZero's, NonMaxSuppression's, "
                      "docs/dynamic-shapes.md): move the node before the count, or leave it to the caller")
        raise UnsupportedOpError(f"{len(refused)} node(s) of this dynamic model have no shape-generic kernel yet: "
                                 f"{'; '.join(refused)}. {advice}")
    state.steps = steps
    state.loops = [(moved[lo], moved[hi]) for lo, hi in state.loops]


def _dynamic(call: KernelCall) -> bool:
    return bool(_exprs([call.block_dim, call.workspace, list(call.tiling.values())]))


def _exprs(obj) -> list:
    """The Exprs anywhere in a (nested) structure of dicts, lists and tuples."""
    if isinstance(obj, symbolic.Expr):
        return [obj]
    if isinstance(obj, dict):
        return [e for v in obj.values() for e in _exprs(v)]
    if isinstance(obj, (list, tuple)):
        return [e for v in obj for e in _exprs(v)]
    return []
