"""What a dynamic model's classic .om runs at each run the RT2 way (docs/dynamic-shapes.md,
om2/om2_op_host.h): per kernel task, its tensors' dims as the lowering's expressions (InferShape)
and its block count, tiling words and scratch bytes (Tiling), and the arena buffers those tensors
live in, with the lifetimes the memory plan recorded. codegen/host_library.py prints it as the
host op library's C.

Op indices count the kernel tasks only: the .om has no PREPROCESS_KERNEL tasks, since the host
op library computes each sink kernel's tiling on the host (RT2), not the device tiling library.
The run is the plan's steps: a launch per op, and the switches and gotos of an If or a Loop
(their labels resolved to the step after them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UnsupportedOpError
from ..ir.program import Control, KernelCall, TilingCall
from ..ir.tasks import ArgKind
from . import dynamic
from .args import Places
from .state import Lowering
from .workspace import Workspace, scratch_key

# Om2OpHostTensor.kind, Om2OpHostBuffer.kind (om2/om2_op_host.h)
INPUT, OUTPUT, CONSTANT, BUFFER = range(4)
TENSOR_BYTES, SCRATCH = range(2)
# Om2OpHostStep.kind
LAUNCH, SWITCH, GOTO = range(3)


@dataclass
class HostTensor:
    name: str
    kind: int
    index: int          # the input, output or buffer
    offset: int         # in the constants
    dims: tuple         # ints and Exprs
    dtype_size: int


@dataclass
class HostBuffer:
    kind: int
    ref: int            # the tensor, or the op
    first_op: int
    last_op: int


@dataclass
class HostOp:
    name: str
    op_type: str
    task: int                   # its step (the task index of the .om2's task list)
    slots: list[int]            # tensor per address slot: inputs, then outputs
    writes: list[int]           # the tensors its InferShape writes (outputs, then views it reads)
    checks: list[int]           # the tensors whose dims its InferShape checks
    block_dim: object           # int or Expr
    tiling: dict                # word name -> int or Expr
    workspace: object           # scratch bytes: int or Expr
    sink: bool
    max_block_dim: int
    scratch_buffer: int = -1
    count_symbol: int = -1      # the data-dependent count (a symbol) its kernel writes, -1 none


@dataclass
class HostStep:
    kind: int
    task: int                   # its step (the task index of the .om2's task list)
    op: int = -1                # LAUNCH: the op
    index: int = -1             # SWITCH: the tensor of its uint32 branch index
    targets: list[int] = field(default_factory=list)   # steps (labels, until describe resolves them)


@dataclass
class HostPlan:
    symbols: list               # ir.program.Symbol
    tensors: list[HostTensor] = field(default_factory=list)
    buffers: list[HostBuffer] = field(default_factory=list)
    ops: list[HostOp] = field(default_factory=list)
    input_tensors: list[int] = field(default_factory=list)    # per model input: its tensor, -1 if no op reads it
    output_tensors: list[int] = field(default_factory=list)
    output_writes: list[int] = field(default_factory=list)   # output tensors no op writes
    unsupported: list[str] = field(default_factory=list)     # nodes the RT2 path cannot run yet
    steps: list[HostStep] = field(default_factory=list)

    def check(self) -> None:
        """UnsupportedOpError naming the nodes an .om's RT2 path cannot run yet."""
        if self.unsupported:
            raise UnsupportedOpError(f"a dynamic model compiled to a classic .om runs each op the RT2 way, which takes "
                                     f"no custom operators yet: {', '.join(self.unsupported)}; compile "
                                     "it to an .om2 archive")


def describe(state: Lowering, work: Workspace, places: Places) -> HostPlan:
    """The RT2 plan of a dynamic model's steps: kernels, and the control of If and Loop. A model
    with a custom operator has no RT2 path yet; its plan names those nodes (`unsupported`), and
    compiling it to an .om is refused (check)."""
    values = state.graph.values
    plan = HostPlan(dynamic.symbols(state))
    plan.unsupported = sorted({s.node.name for s in state.steps
                               if not isinstance(s.call, (KernelCall, TilingCall, Control))})
    if plan.unsupported:
        return plan
    kernel_steps = [t for t, s in enumerate(state.steps) if isinstance(s.call, KernelCall)]
    tensor_of: dict[str, int] = {}
    written: set[int] = set()

    def tensor(name: str) -> int:
        if name in tensor_of:
            return tensor_of[name]
        v = values[name]
        ref = places.ref(name)
        kind = {ArgKind.INPUT: INPUT, ArgKind.OUTPUT: OUTPUT, ArgKind.CONSTANT: CONSTANT}.get(ref.kind, BUFFER)
        root = state.root(name)
        index = ref.index
        if kind == BUFFER and root != name:   # a view's bytes are its root's buffer: the root (and buffer) first
            index = plan.tensors[tensor(root)].index
        t = tensor_of[name] = len(plan.tensors)
        plan.tensors.append(HostTensor(name, kind, index, ref.offset if kind == CONSTANT else 0, tuple(v.shape),
                                       v.dtype.itemsize))
        if kind == BUFFER and root == name:   # the buffer this tensor owns, live as the memory plan says
            b = next(b for b in work.buffers if b.name == root)
            plan.tensors[t].index = len(plan.buffers)
            plan.buffers.append(HostBuffer(TENSOR_BYTES, t, _first_op(b.first_task, kernel_steps),
                                           _last_op(b.last_task, kernel_steps)))
        return t

    model_inputs = set(state.graph.inputs)
    for k, t in enumerate(kernel_steps):
        step = state.steps[t]
        call: KernelCall = step.call
        ins = [n for n in call.inputs if n]
        slots = [tensor(n) for n in ins] + [tensor(n) for n in call.outputs]
        outs = slots[len(ins):]
        pending = [x for x in slots[:len(ins)] if x not in written and plan.tensors[x].name not in model_inputs]
        checks = [x for x in slots[:len(ins)] if x not in pending]
        # a buffer's bytes are its root tensor's: an op that writes into a view writes the root's dims too
        roots = [plan.buffers[plan.tensors[x].index].ref for x in outs if plan.tensors[x].kind == BUFFER]
        writes = list(dict.fromkeys(outs + pending + [r for r in roots if r not in written]))
        written.update(writes)
        tiling_step = state.steps[t - 1].call if t > 0 else None
        sink = call.sink and isinstance(tiling_step, TilingCall) and tiling_step.kernel_step == t
        op = HostOp(step.node.name, step.node.op_type, t, slots, writes, checks,
                    tiling_step.block_dim if sink else call.block_dim,
                    dict(tiling_step.fields) if sink else dict(call.tiling),
                    tiling_step.workspace if sink else call.workspace, sink, max(1, int(call.block_dim)))
        if call.count_symbol:   # (its address slot follows the outputs, as in its task)
            op.count_symbol = next(i for i, s in enumerate(plan.symbols) if s.name == call.count_symbol)
        if call.workspace:
            op.scratch_buffer = len(plan.buffers)
            plan.buffers.append(HostBuffer(SCRATCH, k, k, k))
            assert scratch_key(t) in work.offsets
        plan.ops.append(op)
    plan.steps = _steps(state, kernel_steps, tensor)
    plan.input_tensors = [tensor_of.get(name, -1) for name in state.graph.inputs]
    for name in state.graph.outputs:
        t = tensor(name)
        plan.output_tensors.append(t)
        if t not in written:
            plan.output_writes.append(t)
            written.add(t)
    return plan


def _steps(state: Lowering, kernel_steps: list[int], tensor) -> list[HostStep]:
    """The run's steps in task order: a launch per kernel step, a switch or goto per jump, each
    label the step after it."""
    op_of = {t: k for k, t in enumerate(kernel_steps)}
    steps, at = [], {}
    for t, step in enumerate(state.steps):
        call = step.call
        if t in op_of:
            steps.append(HostStep(LAUNCH, t, op=op_of[t]))
        elif isinstance(call, Control) and call.kind == "label":
            at[call.labels[0]] = len(steps)
        elif isinstance(call, Control):
            steps.append(HostStep(SWITCH if call.kind == "switch" else GOTO, t,
                                  index=tensor(call.index) if call.kind == "switch" else -1, targets=list(call.labels)))
    for s in steps:
        s.targets = [at[label] for label in s.targets]
    return steps


def _first_op(step: int, kernel_steps: list[int]) -> int:
    """The first kernel op at or after `step` (a buffer's writer)."""
    return next((k for k, t in enumerate(kernel_steps) if t >= step), len(kernel_steps) - 1)


def _last_op(step: int, kernel_steps: list[int]) -> int:
    """The last kernel op at or before `step` (a buffer's last reader)."""
    return max((k for k, t in enumerate(kernel_steps) if t <= step), default=0)
