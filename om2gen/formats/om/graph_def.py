"""MODEL_DEF's graph (ge.proto.GraphDef) of a compiled Program, and the logical addresses its ops
and the tasks point at (docs/om-format.md, *Addresses* and *MODEL_DEF*).

Addresses are GE-style *logical* addresses (GE_FACTS §1.7): feature-map memory (scratch, then
the model inputs, then the model outputs) starts at `task_gen_base_addr` = FEATURE_BASE, the
weights at `task_gen_weight_addr` = WEIGHT_BASE; a loader maps them to real memory by
subtracting the base (GE's `GetRtAddress`). The graph's ops are the program's graph dump
(Program.graph_json) plus the ops GE has for what the dump has no node for: Data, Const, label
ops, NetOutput. A Loop's body is a subgraph of its own (a further ModelDef.graph entry the Loop op
names in subgraph_name), with Data ops for what it reads and a NetOutput for what it writes.
"""
from __future__ import annotations

import struct

from ...ir import dtypes
from ...ir.gears import SUFFIX, batch_label, dynamic_output_dims
from ...ir.program import ArgRef
from ...ir.tasks import ArgKind, ModelTaskType
from . import gears, proto
from .layout import FORMAT_ND, ORIGINAL_OP_NAMES
from .model_def_attrs import attr_i, attr_list_i, attr_list_s, attr_of, attr_s

FEATURE_BASE = 0x1_0000_0000     # task_gen_base_addr: logical base of feature-map memory
WEIGHT_BASE = 0x100_0000_0000    # task_gen_weight_addr: logical base of the weights
VARIABLE_BASE = 0x200_0000_0000  # task_gen_variable_addr (om2gen models have no variables)
IO_ALIGN = 512                   # alignment of each model input/output in feature-map memory

_LABEL_OP_TYPES = {
    ModelTaskType.MODEL_TASK_LABEL_SET: "LabelSet",
    ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX: "LabelSwitchByIndex",
    ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO: "LabelGotoEx",
}


def _align(n: int, a: int = IO_ALIGN) -> int:
    return (n + a - 1) // a * a


class MemoryPlan:
    """Logical addresses of everything a task can point at."""

    def __init__(self, program):
        self.work_size = program.work_size
        pos = _align(program.work_size)
        self.inputs, self.outputs = [], []
        for d in program.inputs:
            self.inputs.append(pos)
            pos = _align(pos + max(d.nbytes, 1))
        for d in program.outputs:
            self.outputs.append(pos)
            pos = _align(pos + max(d.nbytes, 1))
        self.io_start = _align(program.work_size)
        self.memory_size = pos
        self.zero_copy_size = pos - self.io_start
        self.weight_size = program.constants_size

    def address(self, ref) -> int:
        if ref.kind == ArgKind.INPUT:
            return FEATURE_BASE + self.inputs[ref.index] + ref.offset
        if ref.kind == ArgKind.OUTPUT:
            return FEATURE_BASE + self.outputs[ref.index] + ref.offset
        if ref.kind == ArgKind.WORKSPACE:
            return FEATURE_BASE + ref.offset
        if ref.kind == ArgKind.CONSTANT:
            return WEIGHT_BASE + ref.offset
        return 0   # no other kinds occur in args slots; GE leaves such slots zero

    def args(self, task) -> bytes:
        return b"".join(struct.pack("<Q", self.address(a)) for a in task.args) + bytes(task.tiling)


def _tensor_desc(val: dict, *, data_offset: int | None = None):
    dt = dtypes.BY_NAME[val["dtype"]]
    shape = [int(d) for d in val["shape"]]
    size = dt.itemsize
    for d in shape:
        size *= d
    if any(d < 0 for d in shape):   # an unknown dim: GE's unknown size (formats/om/dynamic_shapes.py)
        size = -1
    td = proto.TensorDescriptor(name=val["name"], dtype=dt.ge_proto, shape=proto.ShapeDef(dim=shape), layout="ND",
                                size=size, real_dim_cnt=len(shape))
    td.attr["format_for_int"].CopyFrom(attr_i(FORMAT_ND))
    td.attr["origin_format"].CopyFrom(attr_s("ND"))
    td.attr["origin_format_for_int"].CopyFrom(attr_i(FORMAT_ND))
    td.attr["origin_data_type"].CopyFrom(attr_s(dt.ge_string[3:]))
    td.attr["origin_shape"].CopyFrom(attr_list_i(shape))
    td.attr["origin_shape_initialized"].CopyFrom(proto.AttrDef(b=True))
    if data_offset is not None:
        td.data_offset = data_offset
        td.weight_size = size
    return td


# ---------------------------------------------------------------------------------------------
# MODEL_DEF graph

class _Scope:
    """One GraphDef being built (the root graph, a gear's subgraph or a Loop's body) and where its
    values come from: each graph reads only what its own ops produce, as GE's subgraphs do."""

    def __init__(self, name: str, label: str | None = None):
        self.graph = proto.GraphDef(name=name)
        self.producer: dict[str, str] = {}      # value name -> "op:idx"
        self.label = label                      # a gear's subgraph: its _batch_label, "Batch_<i>"


class _LoopBody:
    """A Loop node's body subgraph being built, the node's graph dump, and the labels its tasks
    set (known from its first switch: [body, exit])."""

    def __init__(self, scope: _Scope, node: dict):
        self.scope, self.node = scope, node
        self.labels: list[int] = []


class GraphBuilder:
    """The GraphDefs of a program: the root graph, then (a gear model) one subgraph per gear and
    one body subgraph per Loop, in the order they are made.
    build() makes the ops of the graph dump, op_for_task() the op each task belongs to, in task
    order, and finish() the NetOutputs and the OpDef ids (unique over all graphs, in order)."""

    def __init__(self, program, graph_json, mem: MemoryPlan):
        self.program, self.g, self.mem = program, graph_json, mem
        self.root = _Scope(graph_json.get("name") or program.name)
        self.scopes = [self.root]               # the root, then each gear's subgraph and Loop body, as made
        self.gear_scopes: list[_Scope] = []     # each gear's subgraph
        self.scope = self.root                  # where the next task's op goes (op_for_task)
        self.names: set[str] = set()
        self.ops: dict[str, object] = {}        # graph node name -> its OpDef
        self.constants = {c.name: c for c in program.constants}
        self.case = None                        # a gear model's Case node (graph dump)
        self.gear_labels: list[int] = []        # the labels its switch jumps to, one per gear
        self.loops: dict[str, _LoopBody] = {}   # Loop node name -> its body
        self.outside: list[_Scope] = []         # the scopes around the loop bodies entered so far

    def unique(self, name: str) -> str:
        base, n = name or "op", 1
        while name in self.names or not name:
            name = f"{base}_{n}"
            n += 1
        self.names.add(name)
        return name

    def add_op(self, name: str, op_type: str, scope: _Scope | None = None):
        scope = scope or self.root
        op = scope.graph.op.add(name=name, type=op_type, stream_id=0)
        if scope.label:
            op.attr[gears.BATCH_LABEL].CopyFrom(attr_s(scope.label))
        return op

    def build(self):
        g, table = self.g, self.program.gears
        if table is not None:
            self.case = next(n for n in g["nodes"] if n["op_type"] == "Case" and n.get("subgraphs"))
            assert len(self.case["subgraphs"]) == len(table.values), "a gear model's Case has a region per gear"
        for n in g["nodes"] + [m for s in (self.case or {}).get("subgraphs", []) for m in s["nodes"]]:
            self.names.add(n["name"])   # graph nodes keep their names; synthetic ops give way

        # Data ops, one per model input
        for i, v in enumerate(g["inputs"]):
            op = self.add_op(self.unique(v["name"]), "Data")
            op.attr["index"].CopyFrom(attr_i(i))
            if table is not None:
                gears.set_attrs(op, gears.shape_data_attrs() if i == len(g["inputs"]) - 1
                                else gears.user_input_attrs(table, v["name"], self.case["name"]))
            self._data_op(self.root, op, v, i)

        self._const_ops(self.root, [n for n in g["nodes"] if n is not self.case])
        for n in g["nodes"]:
            if n is self.case:
                self._case_op(n)
            else:
                self._graph_node(self.root, n)
        for i, sub in enumerate(self.case["subgraphs"] if self.case else []):
            self._gear_subgraph(i, sub)

    def _graph_node(self, scope: _Scope, n: dict) -> None:
        """The op of graph node `n` in `scope`; a Loop's with its body subgraph. The ops of an If's
        branches are made as their tasks come (op_for_task), in the If's graph; a Loop in a
        branch gets its op and body now, since its tasks need them."""
        if n["op_type"] == "Loop" and n.get("subgraphs"):
            self._loop_op(scope, n)
            return
        self._node_op(scope, n)
        self._branch_loops(scope, n)

    def _branch_loops(self, scope: _Scope, n: dict) -> None:
        for sub in n.get("subgraphs", []):
            for m in sub["nodes"]:
                if m["op_type"] == "Loop" and m.get("subgraphs"):
                    self._loop_op(scope, m)
                else:
                    self._branch_loops(scope, m)

    def _loop_op(self, scope: _Scope, n: dict) -> None:
        """The Loop op (its inputs M, cond, the initial values and the outer values the body
        reads) and its body subgraph `<loop>/body`: a Data op per body input (index i;
        `_parent_node_index` the Loop input it starts from: cond 1, carried value j 2 + j; an outer
        value read, its own position; iteration_num has none, the loop makes it), each at the
        address of its bytes, Const ops, the body's nodes; NetOutput at the end (finish)."""
        op = self._node_op(scope, n)
        sub = n["subgraphs"][0]
        body = _Scope(self.unique(f"{n['name']}/body"), scope.label)   # in a gear's subgraph: its _batch_label too
        op.subgraph_name.append(body.graph.name)
        self.scopes.append(body)
        self.loops[n["name"]] = _LoopBody(body, n)
        position = {v["name"]: k for k, v in enumerate(n["inputs"]) if v}
        reads = [(v, i if i and v.get("outer") else None) for i, v in enumerate(sub["inputs"])]
        reads += [(v, position[v["name"]]) for v in sub.get("reads", [])]
        for i, (v, parent) in enumerate(reads):
            d = self.add_op(self.unique(v["name"]), "Data", body)
            d.attr["index"].CopyFrom(attr_i(i))
            if parent is not None:
                d.attr[gears.PARENT_NODE_INDEX].CopyFrom(attr_i(parent))
            d.output_desc.append(_tensor_desc(v))
            addr = self._address(v)
            if addr is not None:
                d.output_i.append(addr)
            body.producer[v["name"]] = f"{d.name}:0"
            body.graph.input.append(f"{d.name}:0")
        self._const_ops(body, sub["nodes"])
        for m in sub["nodes"]:
            self._graph_node(body, m)

    def _address(self, v: dict) -> int | None:
        """The logical address of a subgraph input's or output's bytes (its "place")."""
        p = v.get("place")
        return None if p is None else self.mem.address(ArgRef(ArgKind[p["kind"]], p["index"], p["offset"]))

    def _data_op(self, scope: _Scope, op, v: dict, index: int) -> None:
        """A Data op standing for model input `index` (value `v` in `scope`)."""
        op.input_desc.append(_tensor_desc(v))
        op.output_desc.append(_tensor_desc(v))
        op.input_i.append(FEATURE_BASE + self.mem.inputs[index])
        op.output_i.append(FEATURE_BASE + self.mem.inputs[index])
        scope.producer[v["name"]] = f"{op.name}:0"
        scope.graph.input.append(f"{op.name}:0")

    def _const_ops(self, scope: _Scope, nodes: list[dict], suffix: str = "") -> None:
        """Const ops for the initializers `nodes` read that none of them produces (a gear's
        copies are named with its suffix, as GE clones them; all point at the one stored copy)."""
        produced = {o["name"] for n in nodes for o in n["outputs"] if o}
        for n in nodes:
            for v in n["inputs"]:
                if not v or v["name"] in scope.producer or v["name"] in produced or not v.get("const"):
                    continue
                c = self.constants.get(v["name"])
                op = self.add_op(self.unique(v["name"] + suffix), "Const", scope)
                op.output_desc.append(_tensor_desc(v, data_offset=c.offset if c else None))
                if c is not None:
                    op.output_i.append(WEIGHT_BASE + c.offset)
                scope.producer[v["name"]] = f"{op.name}:0"

    def _node_op(self, scope: _Scope, n: dict):
        """The op of graph node `n`: its plain attributes, inputs from the ops of `scope`."""
        op = self.add_op(n["name"], n["op_type"], scope)
        self.ops[n["name"]] = op
        for k, v in sorted(n.get("attrs", {}).items()):
            a = attr_of(v)
            if a is not None:
                op.attr[k].CopyFrom(a)
        if n.get("domain"):
            op.attr["_onnx_domain"].CopyFrom(attr_s(n["domain"]))
        if n.get("fused_from"):
            op.attr[ORIGINAL_OP_NAMES].CopyFrom(attr_list_s(n["fused_from"]))
        for v in n["inputs"]:
            if v is None:
                op.input.append("")
                continue
            op.input.append(scope.producer.get(v["name"], ""))
            op.input_desc.append(_tensor_desc(v))
            op.is_input_const.append(bool(v.get("const")))
        self._outputs(scope, op, n)
        return op

    def _outputs(self, scope: _Scope, op, n: dict) -> None:
        for k, v in enumerate(n["outputs"]):
            if v is None:   # an omitted optional output keeps its position, as in GE's OpDesc
                op.output_desc.append(proto.TensorDescriptor(dtype=proto.DT_UNDEFINED, layout="ND"))
                continue
            op.output_desc.append(_tensor_desc(v))
            scope.producer[v["name"]] = f"{op.name}:{k}"

    def _case_op(self, n: dict) -> None:
        """GE's Case: it reads the gear index and the model's inputs (each gear's subgraph takes
        them by _parent_node_index), names a subgraph per gear and holds the gear table."""
        op = self.add_op(n["name"], "Case")
        self.ops[n["name"]] = op
        if n.get("domain"):
            op.attr["_onnx_domain"].CopyFrom(attr_s(n["domain"]))
        gears.set_attrs(op, gears.case_attrs(self.program.gears))
        index = n["inputs"][0]
        for v in [index] + self.g["inputs"][:-1]:
            op.input.append(self.root.producer.get(v["name"], ""))
            op.input_desc.append(_tensor_desc(v))
        op.subgraph_name.extend(batch_label(i) for i in range(len(n["subgraphs"])))
        self._outputs(self.root, op, n)

    def _gear_subgraph(self, i: int, sub: dict) -> None:
        """Gear i's subgraph Batch_<i>: Data ops for the model inputs at the gear's shapes (at the
        inputs' addresses), Const ops, the gear's nodes; label ops and NetOutput come later."""
        scope = _Scope(batch_label(i), batch_label(i))
        self.scopes.append(scope)
        self.gear_scopes.append(scope)
        names = [v["name"] for v in self.g["inputs"]]
        for v in sub["inputs"]:
            k = names.index(v["outer"])
            op = self.add_op(self.unique(v["name"]), "Data", scope)
            gears.set_attrs(op, {"index": k, gears.PARENT_NODE_INDEX: k + 1,
                                 **gears.origin_dims_attrs(self.program.gears, v["outer"])})
            self._data_op(scope, op, v, k)
        self._const_ops(scope, sub["nodes"], SUFFIX + str(i))
        for n in sub["nodes"]:
            self._graph_node(scope, n)

    def op_for_task(self, task):
        """The OpDef a task belongs to; control tasks and tasks of nodes the compiler added (e.g.
        output copies) get an op of their own, in the graph the task runs in: a gear's tasks, from
        its LabelSet on, in the gear's subgraph; the switch in the first gear's, as GE's
        CaseOpLabelMaker puts it."""
        case = self.case is not None and task.op_name == self.case["name"]
        tt = task.task_type
        if task.op_type == "Loop" and task.op_name in self.loops:
            return self._loop_task_op(self.loops[task.op_name], task)
        if case and tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX:
            self.gear_labels = list(self.program.label_lists[task.label_ref])
            self.scope = self.gear_scopes[0]
        elif case and tt == ModelTaskType.MODEL_TASK_LABEL_SET and task.label_ref in self.gear_labels:
            self.scope = self.gear_scopes[self.gear_labels.index(task.label_ref)]
        scope = self.scope
        if tt in _LABEL_OP_TYPES:
            op = self.add_op(self.unique(f"{task.op_name}/{task.label}"), _LABEL_OP_TYPES[tt], scope)
            if case and tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX:
                op.input.append(self._switch_index(scope, task))
            elif case and tt == ModelTaskType.MODEL_TASK_LABEL_SET and task.label_ref not in self.gear_labels:
                self.scope = self.root      # the Case's end: what follows runs in the root graph
            return op
        if task.op_name not in self.ops:
            self.ops[task.op_name] = self.add_op(self.unique(task.op_name), task.op_type, scope)
        return self.ops[task.op_name]

    def _loop_task_op(self, loop: _LoopBody, task):
        """A task of the Loop node itself gets an op of its own (`<loop>/<task label>`, typed by what
        it runs: Copy, LoopEnter, LoopNext, LoopScan, the label ops): from the body's LabelSet to
        the switch back, in the body subgraph; the ones before (initial copies, LoopEnter, the
        entry switch) and the exit LabelSet in the graph around it."""
        tt = task.task_type
        if tt == ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX and not loop.labels:
            loop.labels = list(self.program.label_lists[task.label_ref])
        elif tt == ModelTaskType.MODEL_TASK_LABEL_SET and loop.labels and task.label_ref == loop.labels[0]:
            self.outside.append(self.scope)
            self.scope = loop.scope
        elif tt == ModelTaskType.MODEL_TASK_LABEL_SET and loop.labels and task.label_ref == loop.labels[-1]:
            self.scope = self.outside.pop()
        kind = _LABEL_OP_TYPES.get(tt) or task.label.split("_", 1)[-1]
        return self.add_op(self.unique(f"{task.op_name}/{task.label}"), kind, self.scope)

    def _switch_index(self, scope: _Scope, task) -> str:
        """GE's SwitchIndexData: the first gear's Data op for the Case's input 0, the gear index
        the switch reads."""
        op = self.add_op(self.unique(f"{self.case['name']}/SwitchIndexData"), "Data", scope)
        op.attr[gears.PARENT_NODE_INDEX].CopyFrom(attr_i(0))
        index = self.case["inputs"][0]
        op.output_desc.append(_tensor_desc(index))
        op.output_i.append(self.mem.address(task.args[0]))
        return f"{op.name}:0"

    def _net_output(self, scope: _Scope, outputs: list[tuple[dict, int]], name: str, parent_index: bool):
        """A NetOutput writing each (value of `scope`, model output index) at that output's
        address; in a subgraph each input says which Case output it is (_parent_node_index)."""
        op = self.add_op(self.unique(name), "NetOutput", scope)
        for v, j in outputs:
            src = scope.producer.get(v["name"], "")
            op.input.append(src)
            td = op.input_desc.add()
            td.CopyFrom(_tensor_desc(v))
            if parent_index:
                td.attr[gears.PARENT_NODE_INDEX].CopyFrom(attr_i(j))
            op.input_i.append(FEATURE_BASE + self.mem.outputs[j])
            scope.graph.output.append(src)
        return op

    def _body_output(self, loop: _LoopBody) -> None:
        """A Loop body's NetOutput: the body's outputs (cond, the carried values, the scan values),
        each at its bytes' address; input j >= 1 has `_parent_node_index` j - 1, the Loop output
        it becomes (cond has none)."""
        scope = loop.scope
        op = self.add_op(self.unique(f"{loop.node['name']}/body/NetOutput"), "NetOutput", scope)
        for j, v in enumerate(loop.node["subgraphs"][0]["outputs"]):
            src = scope.producer.get(v["name"], "")
            op.input.append(src)
            td = op.input_desc.add()
            td.CopyFrom(_tensor_desc(v))
            if v.get("outer"):
                td.attr[gears.PARENT_NODE_INDEX].CopyFrom(attr_i(j - 1))
            addr = self._address(v)
            op.input_i.append(0 if addr is None else addr)
            scope.graph.output.append(src)

    def finish(self) -> list:
        """The GraphDefs, root first, with every op's id set (tasks refer to ops by id)."""
        outputs = [v["name"] for v in self.g["outputs"]]
        net = self._net_output(self.root, [(v, j) for j, v in enumerate(self.g["outputs"])], "NetOutput", False)
        if self.case is not None:
            net.attr[gears.DYNAMIC_OUTPUT_DIMS].CopyFrom(
                attr_list_s(dynamic_output_dims(self.program.gears.output_shapes)))
            for i, sub in enumerate(self.case["subgraphs"]):
                self._net_output(self.gear_scopes[i], [(v, outputs.index(v["outer"])) for v in sub["outputs"]],
                                 f"NetOutput{SUFFIX}{i}", True)
        for loop in self.loops.values():
            self._body_output(loop)
        ops = [op for s in self.scopes for op in s.graph.op]
        for i, op in enumerate(ops):
            op.id = i
        return [s.graph for s in self.scopes]


def fill_addresses(op, task, mem: MemoryPlan) -> None:
    """input_i / output_i / workspace of an op from its (first) task's address slots."""
    if op.input_i or op.output_i or op.workspace:
        return
    for role, ref in zip(task.roles, task.args):
        addr = mem.address(ref)
        if role == "i":
            op.input_i.append(addr)
        elif role == "o":
            op.output_i.append(addr)
        elif role == "ws":
            op.workspace.append(addr)
