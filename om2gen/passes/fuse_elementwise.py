"""Element-wise fusion: chains and DAGs of element-wise nodes become one om2gen.FusedElementwise
node, a single kernel that evaluates every member per element (om2gen/ops/fused.py).

Groups grow from consumers to producers (nodes visited in reverse order). A producer joins the
group of its consumers when
  - it is element-wise (passes/pointwise.py) and in the same region (each branch of an If and
    each Loop body is fused on its own; values a region reads count as read by its node, outside
    any group);
  - its output has the group's element count (then it may also be written out, for readers
    outside the group or as a graph output), or it broadcasts to the group's shape, is cheap to
    recompute (no transcendental call, and few extra evaluations: RECOMPUTE_BUDGET) and nothing
    outside the group reads it;
  - when it is also read outside the group, no path leads from those readers back into the group
    (groups contracted), so the fused graph stays acyclic.
Data-movement nodes that only re-index (Reshape and the other aliases, Transpose, Slice, Expand,
a Gather of one index: passes/views.py) between a value and the groups that read it are absorbed:
the fused kernel reads the value through strides instead of a copy. A group is rewritten when it
saves a launch (two element-wise members, or an absorbed copy); every covered node is listed in
the fused node's fused_from, which the debug graph shows and the task label names.

In a dynamic model (docs/dynamic-shapes.md) each of those questions is asked of one node and one
group: where the ranges do not decide it (symbolic.Undecidable: whether [S] meets [T], whether a
broadcast producer's recomputation stays within the budget at every size) that node does not join
that group, and every other group is still made. Data-movement nodes over dynamic shapes are not
absorbed (their copies' strides are the run's).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..errors import Om2Error
from ..ir import symbolic
from ..ir.graph import REGIONS, Graph, Node
from ..ir.program import Alias
from ..ops import registry
from ..ops.fused import DOMAIN, OP_TYPE, SPEC, FusedSpec, Operand, Step
from ..ops.movement import c_value
from . import pointwise, rewrite, views
from .pointwise import Pointwise

# Ops whose lowering may be a view of their input (an Alias, a strided or transposing copy);
# what each node actually lowers to decides (views.of_lowering).
MOVEMENT = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose", "Slice", "Expand",
            "Gather", "Tile", "DepthToSpace", "SpaceToDepth", "Cast", "CastLike", "Pad"}
# A smaller producer (a broadcast [1,C,1,1] gate, say) joins a bigger group only if recomputing it
# at every element of the group costs at most this many extra evaluations (about one launch).
RECOMPUTE_BUDGET = 4096
MAX_STEPS = 64                  # members per fused kernel (keeps sources and compile times small)


@dataclass
class _Group:
    shape: tuple[int, ...]
    members: list[Node] = field(default_factory=list)
    reads_copy: bool = False    # absorbs a strided/transposed copy (not only aliases)


def run(graph: Graph, ctx) -> int:
    """Fuses the graph's element-wise nodes, and those of each region (If branch, Loop body) on
    their own (a group never spans a region boundary); returns the number of fused nodes made."""
    made = _Fuser(graph, ctx).run()
    for node in graph.nodes:
        for key, (nodes, names) in list(node.attrs.get(REGIONS, {}).items()):
            region = Graph(f"{graph.name}/{node.name}/{key}", graph.values, list(nodes), [], list(names), graph.opsets)
            made += run(region, ctx)
            node.attrs[REGIONS][key] = (region.nodes, names)
    return made


class _Fuser:
    def __init__(self, graph: Graph, ctx):
        self.graph = graph
        self.ctx = ctx
        self.nodes = list(graph.nodes)
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        self.users = graph.consumers()
        self.producer = {o: n for n in self.nodes for o in n.outputs if o}
        self.graph_outputs = set(graph.outputs)
        self.pw: dict[int, Pointwise] = {}
        self.view_result: dict[int, object] = {}    # data-movement nodes: their lowering
        self.group_of: dict[int, int] = {}
        self.groups: list[_Group] = []
        self.absorbed: dict[int, set[int]] = {}     # view node -> the groups reading through it
        self.same_as: dict[str, str] = {}           # transparent view output -> the member output it shows

    # --- classification --------------------------------------------------------------------------
    def classify(self) -> None:
        for n in self.nodes:
            p = pointwise.describe(n, self.graph, self.ctx)
            if p is not None:
                self.pw[id(n)] = p
                continue
            result = self._movement(n)
            if result is not None:
                self.view_result[id(n)] = result

    def _movement(self, n: Node):
        """The lowering of a single-input, single-output node that only re-indexes its input."""
        if n.op_type not in MOVEMENT or n.domain or REGIONS in n.attrs or len(n.outputs) != 1 or not n.outputs[0]:
            return None
        data = [i for i in n.inputs[:1] if i]
        if not data:
            return None
        src, out = self.graph.values[data[0]], self.graph.values[n.outputs[0]]
        if not (src.is_static and out.is_static) or src.dtype != out.dtype or out.is_const or out.size == 0:
            return None
        try:
            result = registry.lookup(n).lower(n, [self.graph.values[i] if i else None for i in n.inputs], [out],
                                              self.ctx)
        except Om2Error:
            return None
        probe = views.of_lowering(result, views.whole(src.name, src.shape), out.shape)
        return result if probe is not None else None

    def _view(self, n: Node, source: views.View) -> views.View | None:
        """The view node n makes of `source` (the view its input is read through), or None."""
        out_shape = self.graph.values[n.outputs[0]].shape
        if n.op_type == "Transpose":   # any source: a permutation of its strides
            return views.permute(source, registry.lookup(n).perm(n, len(source.shape)))
        return views.of_lowering(self.view_result[id(n)], source, out_shape)

    # --- grouping ----------------------------------------------------------------------------------
    def group(self) -> None:
        for n in reversed(self.nodes):
            if id(n) in self.pw:
                self._place(n)
            elif id(n) in self.view_result:
                self._absorb(n)

    def _place(self, n: Node) -> None:
        out = n.outputs[0]
        users = self.users.get(out, [])
        inside: list[int] = []          # groups reading `out`, directly or through a transparent view
        transparent: dict[int, int] = {}
        shown: dict[int, list[str]] = {}
        through_views: set[int] = set()  # groups reading `out` re-indexed (n cannot join those)
        for u in users:
            g = self.group_of.get(id(u))
            if g is None and id(u) in self.absorbed and u.inputs[0] == out:
                found = _unless_undecidable(self._transparent, u, out)
                if found is None:
                    through_views |= self.absorbed[id(u)]
                    continue
                g, shown[id(u)] = found
                transparent[id(u)] = g
            if g is not None and g not in inside:
                inside.append(g)
        for g in inside:
            if g in through_views or len(self.groups[g].members) >= MAX_STEPS:
                continue
            others = [u for u in users if self.group_of.get(id(u)) != g and transparent.get(id(u)) != g]
            written = bool(others) or out in self.graph_outputs
            if not _unless_undecidable(self._fits, n, self.groups[g], written):
                continue
            if written and self._reaches(others, g):
                continue
            self.groups[g].members.append(n)
            self.group_of[id(n)] = g
            for u in users:
                if transparent.get(id(u)) == g:
                    self.same_as.update((name, out) for name in shown[id(u)])
            return
        self.group_of[id(n)] = len(self.groups)
        self.groups.append(_Group(self.graph.values[out].shape, [n]))

    def _transparent(self, v: Node, src: str) -> tuple[int, list[str]] | None:
        """(group, view outputs) if absorbed view v of `src`, and the absorbed views after it, are
        read by one group only, at the very elements it would read `src` itself (an Identity, a
        Reshape adding unit dims, an Expand along broadcast dims); else None."""
        shape = self.graph.values[src].shape
        groups, seen, shown = set(), [], []
        stack = [(v, views.whole(src, shape))]
        while stack:
            w, source = stack.pop()
            view = self._view(w, source)
            if view is None or view.offset:
                return None
            shown.append(w.outputs[0])
            for x in self.users.get(w.outputs[0], []):
                if id(x) in self.group_of:
                    groups.add(self.group_of[id(x)])
                    seen.append(view)
                elif id(x) in self.absorbed and x.inputs[0] == w.outputs[0]:
                    stack.append((x, view))
                else:
                    return None
        if len(groups) != 1:
            return None
        g = groups.pop()
        direct = views.broadcast(views.whole(src, shape), self.groups[g].shape)
        if direct is None or any(views.broadcast(view, self.groups[g].shape) != direct for view in seen):
            return None
        return g, shown

    def _fits(self, n: Node, g: _Group, written: bool) -> bool:
        p = self.pw[id(n)]
        shape = p.out.shape
        if views.broadcast(views.whole("", shape), g.shape) is None:
            return False
        extra = views.whole("", g.shape).size - p.out.size
        if isinstance(extra, int) and extra == 0:
            return True
        # recomputed at every element of the group: only cheap ops, and only where that costs less
        # than a launch of their own (at every size in the ranges)
        return not written and p.cheap and symbolic.decided(lambda: extra <= RECOMPUTE_BUDGET, False)

    def _reaches(self, starts: list[Node], g: int) -> bool:
        """Whether any of `starts` leads into group g, groups contracted to single nodes."""
        seen_nodes: set[int] = set()
        seen_groups: set[int] = set()
        stack = list(starts)
        while stack:
            x = stack.pop()
            h = self.group_of.get(id(x))
            if h == g:
                return True
            if h is not None:
                if h in seen_groups:
                    continue
                seen_groups.add(h)
                members = self.groups[h].members
            else:
                if id(x) in seen_nodes:
                    continue
                seen_nodes.add(id(x))
                members = [x]
                if id(x) in self.absorbed and g in self.absorbed[id(x)]:
                    return True
            for m in members:
                for o in m.outputs:
                    if o:
                        stack.extend(self.users.get(o, []))
        return False

    def _absorb(self, v: Node) -> None:
        out = v.outputs[0]
        users = self.users.get(out, [])
        if not users or out in self.graph_outputs:
            return
        readers: set[int] = set()
        for u in users:
            if id(u) in self.group_of:
                readers.add(self.group_of[id(u)])
            elif id(u) in self.absorbed:
                readers |= self.absorbed[id(u)]
            else:
                return
        self.absorbed[id(v)] = readers

    def merge_consumers(self) -> None:
        """A group that reads what another group of the same shape writes joins it (a second
        output computed from the same intermediates, say), unless a path between the two leads
        through other nodes (it would become a cycle)."""
        order = sorted(range(len(self.groups)), key=lambda g: min(self.index[id(m)] for m in self.groups[g].members))
        for h in order:
            grp = self.groups[h]
            member_ids = {id(m) for m in grp.members}
            sources = []
            for m in sorted(grp.members, key=lambda m: self.index[id(m)]):
                for i in m.inputs:
                    p = self.producer.get(i)
                    g = self.group_of.get(id(p)) if p is not None and id(p) not in member_ids else None
                    if g is not None and g != h and g not in sources:
                        sources.append(g)
            for g in sources:
                target = self.groups[g]
                if not _unless_undecidable(lambda: target.shape == grp.shape) or \
                        len(target.members) + len(grp.members) > MAX_STEPS:
                    continue
                leaving = [u for m in target.members for o in m.outputs for u in self.users.get(o, [])
                           if self.group_of.get(id(u)) not in (g, h)]
                if self._reaches(leaving, h):
                    continue
                for m in grp.members:
                    self.group_of[id(m)] = g
                target.members.extend(grp.members)
                grp.members = []
                for readers in self.absorbed.values():
                    if h in readers:
                        readers.discard(h)
                        readers.add(g)
                break

    # --- which groups pay off ------------------------------------------------------------------------
    def settle(self) -> set[int]:
        """Groups worth a fused kernel; views read by any other group are kept as nodes."""
        for v, readers in self.absorbed.items():
            if not isinstance(self.view_result[v], Alias):
                for g in readers:
                    self.groups[g].reads_copy = True
        kept = {g for g, grp in enumerate(self.groups) if len(grp.members) >= 2 or grp.reads_copy}
        for v in list(self.absorbed):
            if not self.absorbed[v] <= kept:
                del self.absorbed[v]
        return kept

    def final_views(self) -> dict[str, views.View]:
        """The view of every absorbed node's output, in graph order. Where a view cannot be composed
        with its source's (the source is not one strided run), it reads the source as stored, and
        the source's absorbed nodes are kept (their views stay valid for their other readers)."""
        result: dict[str, views.View] = {}
        for n in self.nodes:
            if id(n) not in self.absorbed:
                continue
            src = n.inputs[0]
            view = self._view(n, result[src]) if src in result else None
            if view is None:
                view = self._view(n, views.whole(src, self.graph.values[src].shape))
                p = self.producer.get(src)
                while p is not None and id(p) in self.absorbed:   # src must now be computed
                    del self.absorbed[id(p)]
                    p = self.producer.get(p.inputs[0])
            result[n.outputs[0]] = view
        return result

    # --- rewriting -----------------------------------------------------------------------------------
    def run(self) -> int:
        self.classify()
        if not self.pw:
            return 0
        self.group()
        self.merge_consumers()
        kept = self.settle()
        view_of = self.final_views()
        via = self._via(view_of)
        fused: dict[int, Node] = {}
        for g in sorted(kept):
            fused[g] = self._fused_node(self.groups[g], view_of, via)
        self._reorder(fused)
        return len(fused)

    def _via(self, view_of) -> dict[str, tuple[str, ...]]:
        """For each absorbed output, the absorbed nodes it is read through (source first)."""
        chain: dict[str, tuple[str, ...]] = {}
        for n in self.nodes:
            if id(n) in self.absorbed:
                chain[n.outputs[0]] = chain.get(n.inputs[0], ()) + (n.name,)
        return chain

    def _fused_node(self, grp: _Group, view_of, via) -> Node:
        members = sorted(grp.members, key=lambda m: self.index[id(m)])
        member_ids = {id(m) for m in members}
        covered_ids = set(member_ids)
        # a member nothing computes from (CastLike reads only its second input's dtype) is dropped
        needed = {m.outputs[0] for m in members if self._written(m, member_ids)}
        for m in reversed(members):
            if m.outputs[0] in needed:
                needed.update(self.same_as.get(x, x) for x in self.pw[id(m)].operands if isinstance(x, str))
        members = [m for m in members if m.outputs[0] in needed]
        step_of = {m.outputs[0]: i for i, m in enumerate(members)}
        for shown, src in self.same_as.items():
            if src in step_of:
                step_of[shown] = step_of[src]
        operands: list[Operand] = []
        literals: list[tuple[str, str]] = []
        key_of: dict[tuple, int] = {}
        steps = []
        for m in members:
            p = self.pw[id(m)]
            args = []
            for i, (item, shape) in enumerate(zip(p.operands, p.shapes)):
                if isinstance(item, str) and item in step_of:
                    args.append(("step", step_of[item]))
                    continue
                if isinstance(item, np.ndarray):
                    item = self._constant(m, i, item)
                view = view_of.get(item) or views.whole(item, self.graph.values[item].shape)
                base = self.graph.values[view.base]
                if base.is_const and base.size == 1:
                    literal = (base.dtype.c_type, c_value(base.dtype, np.asarray(base.const).reshape(-1)[0]))
                    if literal not in literals:
                        literals.append(literal)
                    args.append(("lit", literals.index(literal)))
                    continue
                view = views.reshape(view, shape) if view.shape != tuple(shape) else view
                strides = views.broadcast(view, grp.shape) if view is not None else None
                assert strides is not None, (m.name, item, shape, grp.shape)
                operand = Operand(view.base, strides, view.offset, via.get(item, ()))
                key = (operand.name, operand.strides, operand.offset)
                if key not in key_of:
                    key_of[key] = len(operands)
                    operands.append(operand)
                args.append(("in", key_of[key]))
            steps.append(Step(m.name, m.op_type, p.expr, tuple(args), tuple(p.in_ctypes), p.out_ctype, p.out.name,
                              p.out.dtype.name, tuple(p.out.shape)))
        outputs = tuple(i for i, m in enumerate(members) if self._written(m, covered_ids))
        spec = FusedSpec(tuple(grp.shape), tuple(operands), tuple(literals), tuple(steps), outputs)
        shown = {o for o, src in self.same_as.items() if src in step_of}
        covered_nodes = [n for n in self.nodes if id(n) in covered_ids or
                         (id(n) in self.absorbed and (any(n.name in o.via for o in operands) or n.outputs[0] in shown))]
        covered = rewrite.sources(*covered_nodes)
        root = members[-1]
        name = root.name if len(covered) == 1 else f"{root.name}::fused{len(covered)}"
        return Node(name, OP_TYPE, [o.name for o in operands], [steps[i].output for i in outputs], {SPEC: spec},
                    DOMAIN, 1, fused_from=covered)

    def _written(self, m: Node, member_ids: set[int]) -> bool:
        """Whether the member's output is read outside the group (or is a graph output)."""
        out = m.outputs[0]
        def inside(u):   # a member, or a transparent view the group reads as this member's step
            return id(u) in member_ids or (id(u) in self.absorbed and self.same_as.get(u.outputs[0]) == out)
        return out in self.graph_outputs or not all(inside(u) for u in self.users.get(out, []))

    def _constant(self, node: Node, i: int, arr: np.ndarray) -> str:
        """A constant the op derived at lowering time (e.g. BatchNormalization's scale), as a value."""
        return rewrite.add_constant(self.graph, f"{node.name}::operand{i}", arr,
                                    sources=[x for x in node.inputs if x and self.graph.values[x].is_const],
                                    transform=f"operand {i} {node.op_type} {node.name!r} derives for its fused step")

    def _reorder(self, fused: dict[int, Node]) -> None:
        """The new node list, topologically sorted with ties in original order."""
        units: list[tuple[int, Node]] = []
        for n in self.nodes:
            g = self.group_of.get(id(n))
            if id(n) in self.absorbed:
                continue
            if g is not None and g in fused:
                continue
            units.append((self.index[id(n)], n))
        for g, node in fused.items():
            units.append((min(self.index[id(m)] for m in self.groups[g].members), node))
        made_by = {o: k for k, (_, n) in enumerate(units) for o in n.outputs if o}
        deps = {k: {made_by[i] for i in n.inputs if i in made_by and made_by[i] != k} for k, (_, n) in enumerate(units)}
        waiting_on = {k: len(d) for k, d in deps.items()}
        unblocks: dict[int, list[int]] = {}
        for k, d in deps.items():
            for j in d:
                unblocks.setdefault(j, []).append(k)
        ready = [(units[k][0], k) for k, c in waiting_on.items() if c == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, k = heapq.heappop(ready)
            order.append(units[k][1])
            for j in unblocks.get(k, []):
                waiting_on[j] -= 1
                if waiting_on[j] == 0:
                    heapq.heappush(ready, (units[j][0], j))
        assert len(order) == len(units), "element-wise fusion made a cycle"
        self.graph.nodes = order
        for n in self.nodes:   # values only absorbed or fused-away nodes produced
            if id(n) in self.absorbed or (self.group_of.get(id(n)) in fused and n.outputs[0] not in made_by):
                self.graph.values.pop(n.outputs[0], None)


def _unless_undecidable(question, *args):
    """question(*args), or None where the ranges of a dynamic model do not decide it: the one
    node or group it was asked about is then left as it is."""
    try:
        return question(*args)
    except symbolic.Undecidable:
        return None
