"""A dynamic-shape classic .om, run the RT2 way (docs/dynamic-shapes.md): the model's host op
library (kSpaceRegistry, om2/om2_op_host.h) gives every op's InferShape and Tiling, and the
native executor (runtime_abi/src/om2_rt2.cpp) runs them, plans this run's arena and launches the
kernels. Python does two calls per run: prepare (the shapes: output dims and bytes come back)
and execute (the addresses); between them the caller's outputs are allocated at their inferred
sizes.

At load the host op library's table is read (its version first) and checked against TASK_INFO:
one op per kernel task, in order, each with the address slots its task has, pointing where the
task's do (inputs, outputs, constants; the arena's buffers are placed per run).
"""
from __future__ import annotations

from ..errors import AbiError, ArchiveError, InputError, RuntimeFailure
from ..ir.tasks import ArgKind, ModelTaskType
from ..native import ffi, lib, string
from ..so_in_om.loading import OP_HOST_ENTRY
from .dynamic import Dynamic, SymbolDim

_ERR_LEN = 1024
_KIND = {ArgKind.INPUT: lib.OM2_OP_HOST_INPUT, ArgKind.OUTPUT: lib.OM2_OP_HOST_OUTPUT,
         ArgKind.CONSTANT: lib.OM2_OP_HOST_CONSTANT, ArgKind.WORKSPACE: lib.OM2_OP_HOST_BUFFER}


def host_table(so, where: str):
    """The Om2OpHostTable of a loaded host op library (so_in_om.loading.LoadedSo), version-checked."""
    address = so.symbol(OP_HOST_ENTRY)
    if not address:
        raise AbiError(f"{where}: the host op library {so.name} exports no Om2OpHostGetTable")
    table = ffi.cast("Om2OpHostGetTableFunc", address)()
    if table == ffi.NULL or table.version != lib.OM2_OP_HOST_VERSION:
        version = "none" if table == ffi.NULL else table.version
        raise AbiError(f"{where}: the host op library {so.name} has table version {version}, this executor runs "
                       f"version {lib.OM2_OP_HOST_VERSION}; recompile the model with this om2gen")
    return table


def dynamic_of(table, inputs: list[dict]) -> Dynamic:
    """What runtime/dynamic.py checks a run's shapes by, from the table's symbols."""
    writers = {int(op.count_symbol): ffi.string(op.name).decode() for op in (table.ops[k] for k in range(table.op_num))
               if op.count_symbol != lib.OM2_OP_HOST_NONE}   # a count: the node that writes it, input and axis -1
    symbols = tuple(SymbolDim(ffi.string(s.name).decode(), int(s.lo), None if s.hi < 0 else int(s.hi),
                              -1 if k in writers else int(s.input), -1 if k in writers else int(s.axis),
                              multiple=int(s.multiple), producer=writers.get(k, ""))
                    for k, s in ((k, table.symbols[k]) for k in range(table.symbol_num)))
    # (a lo~hi%m dim reads m*symbol, as an .om2's model_meta writes it)
    named = {(s.input, s.axis): s.name if s.multiple == 1 else f"{s.multiple}*{s.name}" for s in symbols}
    dims = tuple(tuple(named.get((i, a), str(d) if d >= 0 else "?") for a, d in enumerate(io["shape"]))
                 for i, io in enumerate(inputs))
    return Dynamic(symbols, dims, (), "")


def max_shapes(ranges: dict, inputs: list[dict]) -> list[tuple | None]:
    """Each input's (or output's) largest shape, from MODEL_DEF's shape_range (None: a dim is
    unbounded)."""
    out = []
    for i, io in enumerate(inputs):
        rows = ranges.get(i)
        if -1 not in io["shape"] or rows is None or any(hi < 0 for _, hi in rows):
            out.append(None)
            continue
        out.append(tuple(d if d >= 0 else hi for d, (_, hi) in zip(io["shape"], rows)))
    return out


def check_tasks(table, program, where: str) -> None:
    """The table's ops are TASK_INFO's kernel tasks, in order, slot by slot; its symbols and its
    inputs' and outputs' tensors have MODEL_DEF's ranks (the executor reads the run's dims by them)."""
    ranks = [len(d.shape) for d in program.inputs]
    for k in range(table.symbol_num):
        s = table.symbols[k]
        if s.input == lib.OM2_OP_HOST_NONE and s.axis == lib.OM2_OP_HOST_NONE:   # a count (the executor checks it)
            continue
        if s.input >= len(ranks) or s.axis >= ranks[s.input] or s.multiple < 1:
            raise ArchiveError(f"{where}: symbol {ffi.string(s.name).decode('utf-8', 'replace')} of its host op library "
                               "is bound to a dim the model does not have; the OM is inconsistent: recompile it")
    ios = [(table.input_tensors[i], len(d.shape)) for i, d in enumerate(program.inputs)]
    ios += [(table.output_tensors[j], len(d.shape)) for j, d in enumerate(program.outputs)]
    for tensor, rank in ios:
        if tensor != lib.OM2_OP_HOST_NONE and (tensor >= table.tensor_num or table.tensors[tensor].rank != rank):
            raise ArchiveError(f"{where}: its host op library's inputs and outputs do not have MODEL_DEF's ranks; "
                               "the OM is inconsistent: recompile it")
    tasks = program.tasks
    kernels = [i for i, t in enumerate(tasks) if t.task_type == ModelTaskType.MODEL_TASK_KERNEL]
    bad = [t for t in tasks if t.task_type not in _RUNS]
    if bad:
        raise ArchiveError(f"{where}: task {tasks.index(bad[0])} ({bad[0].op_name}) is a {bad[0].task_type.name}; a "
                           "dynamic-shape OM runs kernel and label tasks only: the OM is corrupt or not om2gen's")
    if table.op_num != len(kernels):
        raise ArchiveError(f"{where}: its host op library has {table.op_num} ops, TASK_INFO {len(kernels)} kernel "
                           "tasks; the OM is inconsistent: recompile it")
    _check_steps(table, tasks, program.label_lists, where)
    for k, at in enumerate(kernels):
        task, op = tasks[at], table.ops[k]
        name = ffi.string(op.name).decode("utf-8", "replace")
        extra = int(op.count_symbol != lib.OM2_OP_HOST_NONE) + int(op.scratch_buffer != lib.OM2_OP_HOST_NONE) + int(op.sink)
        # (a task of a Loop node itself is op "<node>/<task label>" in the OM's graph)
        if op.task != at or op.slot_num + extra != len(task.args) or not (
                name == task.op_name or task.op_name.startswith(name + "/")):
            raise ArchiveError(f"{where}: op {k} of its host op library ({name}, {op.slot_num + extra} slots) is not "
                               f"task {at} of TASK_INFO ({task.op_name}, {len(task.args)} slots); the OM is "
                               "inconsistent: recompile it")
        for s in range(op.slot_num):
            ref, tensor = task.args[s], table.tensors[op.slots[s]]
            same = tensor.kind == _KIND[ref.kind] and (
                ref.kind == ArgKind.WORKSPACE or (ref.kind == ArgKind.CONSTANT and tensor.offset == ref.offset)
                or (ref.kind != ArgKind.CONSTANT and tensor.index == ref.index))
            if not same:
                raise ArchiveError(f"{where}: op {k} ({name}) slot {s} points at another tensor than its task's "
                                   f"({ref.kind.name} {ref.index}+{ref.offset}); the OM is inconsistent: recompile it")


_RUNS = {ModelTaskType.MODEL_TASK_KERNEL, ModelTaskType.MODEL_TASK_LABEL_SET,
         ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX, ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO}
_JUMPS = {lib.OM2_OP_HOST_SWITCH: ModelTaskType.MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX,
          lib.OM2_OP_HOST_GOTO: ModelTaskType.MODEL_TASK_STREAM_LABEL_GOTO}


def _check_steps(table, tasks, label_lists, where: str) -> None:
    """The table's steps are TASK_INFO's kernel, switch and goto tasks, in order; each jump goes
    where its task's labels do (the executor checks the indices themselves)."""
    runs = [i for i, t in enumerate(tasks) if t.task_type != ModelTaskType.MODEL_TASK_LABEL_SET]
    at, steps = {}, 0   # label -> the step after it
    for t in tasks:
        if t.task_type == ModelTaskType.MODEL_TASK_LABEL_SET:
            at[t.label_ref] = steps
        else:
            steps += 1
    if table.step_num != len(runs):
        raise ArchiveError(f"{where}: its host op library has {table.step_num} steps, TASK_INFO {len(runs)} kernel, "
                           "switch and goto tasks; the OM is inconsistent: recompile it")
    for j, i in enumerate(runs):
        step, task = table.steps[j], tasks[i]
        want = _JUMPS.get(step.kind, ModelTaskType.MODEL_TASK_KERNEL)
        targets = [int(step.targets[x]) for x in range(step.target_num)] if step.kind in _JUMPS else []
        labels = label_lists[task.label_ref] if step.kind in _JUMPS and 0 <= task.label_ref < len(label_lists) else []
        if step.task != i or task.task_type != want or targets != [at.get(label, -1) for label in labels]:
            raise ArchiveError(f"{where}: step {j} of its host op library is not task {i} of TASK_INFO "
                               f"({task.op_name}, {task.task_type.name}); the OM is inconsistent: recompile it")


class Rt2Runner:
    """The native RT2 model of one loaded OM; the Model orders its calls (one run at a time)."""

    def __init__(self, table, program, weights, where: str):
        self.where = where
        self.op_num = int(table.op_num)
        self._keep = [table]
        self.input_ranks = [len(d.shape) for d in program.inputs]
        self.output_ranks = [int(table.tensors[table.output_tensors[j]].rank) for j in range(table.output_num)]
        bins = [ffi.from_buffer(k.binary) for k in program.kernels]
        launches = [t for t in program.tasks if t.task_type == ModelTaskType.MODEL_TASK_KERNEL]
        entries = [ffi.new("char[]", program.kernels[t.kernel].entry.encode()) for t in launches]
        bin_data = ffi.new("const void *[]", bins or [ffi.NULL])
        bin_size = ffi.new("uint64_t[]", [len(k.binary) for k in program.kernels] or [0])
        op_bins = ffi.new("uint32_t[]", [t.kernel for t in launches] or [0])
        op_entries = ffi.new("const char *[]", entries or [ffi.NULL])
        handle = ffi.new("void **")
        self._err = ffi.new("char[]", _ERR_LEN)
        if lib.om2x_rt2_load(table, bin_data, bin_size, len(bins), op_bins, op_entries, weights, handle, self._err,
                             _ERR_LEN) != 0:
            raise RuntimeFailure(f"{where}: loading the model the RT2 way failed: {string(self._err)}")
        self.handle = handle[0]
        for b in bins:   # the runtime copied the kernels
            ffi.release(b)
        self._in_rows = [ffi.new("int64_t[]", max(1, r)) for r in self.input_ranks]
        self._in_dims = ffi.new("const int64_t *[]", self._in_rows or [ffi.NULL])
        self._out_rows = [ffi.new("int64_t[]", max(1, r)) for r in self.output_ranks]
        self._out_dims = ffi.new("int64_t *[]", self._out_rows or [ffi.NULL])
        n_out = max(1, len(self.output_ranks))
        self._out_bytes = ffi.new("uint64_t[]", n_out)
        self._in_ptrs = ffi.new("void *[]", max(1, len(self.input_ranks)))
        self._out_ptrs = ffi.new("void *[]", n_out)
        self._capacity = ffi.new("uint64_t[]", n_out)

    def prepare(self, shapes) -> list[tuple[tuple[int, ...], int]]:
        """InferShape and Tiling of every op and this run's arena plan for input `shapes`; each
        output's (dims, bytes). A shape the model cannot take is an InputError."""
        for row, shape in zip(self._in_rows, shapes):
            for a, d in enumerate(shape):
                row[a] = d
        if lib.om2x_rt2_prepare(self.handle, self._in_dims, self._out_dims, self._out_bytes, self._err, _ERR_LEN) != 0:
            raise InputError(f"{self.where}: {string(self._err)}")
        return [(tuple(self._out_rows[j][0:r]), int(self._out_bytes[j])) for j, r in enumerate(self.output_ranks)]

    def execute(self, inputs, outputs, capacities) -> list[tuple[int, ...]]:
        """Launches the prepared run over buffer addresses (ints or cffi pointers); the dims the
        outputs got (a data-dependent count's, where prepare gave its bound)."""
        for i, p in enumerate(inputs):
            self._in_ptrs[i] = ffi.cast("void *", p) if isinstance(p, int) else p
        for j, (p, c) in enumerate(zip(outputs, capacities)):
            self._out_ptrs[j] = ffi.cast("void *", p) if isinstance(p, int) else p
            self._capacity[j] = c
        if lib.om2x_rt2_execute(self.handle, self._in_ptrs, self._out_ptrs, self._capacity, self._out_dims, self._err,
                                _ERR_LEN) != 0:
            raise RuntimeFailure(f"{self.where}: {string(self._err)}")
        return [tuple(self._out_rows[j][0:r]) for j, r in enumerate(self.output_ranks)]

    def stats(self) -> dict:
        s = ffi.new("Om2xRt2Stats *")
        lib.om2x_rt2_stats(self.handle, s)
        out = {k: int(getattr(s, k)) for k in ("arena_bytes", "arena_grows", "plan_bytes", "host_ns", "plan_ns", "runs")}
        out["ops"] = self.op_num
        return out

    def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            if lib.om2x_rt2_unload(handle) != 0:
                raise RuntimeFailure(f"{self.where}: unloading the RT2 model failed")
