"""What lowering produces: kernel specialisations, tasks (the seeds' TaskInfo) and the memory plan.

Plain data only: every name, shape, literal and offset is decided here, so the templates that
render it only arrange text.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, TypedDict

import numpy as np

from .dtypes import DType
from .tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType


@dataclass(frozen=True, eq=False)
class Derived:
    """An array an op derives for its kernel at lowering time (weights packed into the GEMM's
    panels, a Winograd transform, an index table), with what it is made from and how:
    lower/constants.py names it and records the derivation (graph.origin traces it)."""
    array: np.ndarray
    sources: tuple[str, ...]    # the values it is computed from (none: from the shapes alone)
    transform: str


@dataclass
class KernelCall:
    """What an op's lower() returns for a node that needs a kernel."""
    template: str                       # e.g. "kernels/binary.c.j2"
    name: str                           # what the kernel is, e.g. "Add" or "Conv_Relu"
    params: dict[str, object]           # template parameters (all literals decided)
    # value names, or constants derived at compile time (a Derived, or a bare array): lowering
    # names those before anything else reads the call (lower/constants.py)
    inputs: list["str | Derived | np.ndarray"]
    outputs: list[str]
    block_dim: int = 1
    # the int64 words after the address slots, by the names of the kernel's TilingData fields (in
    # order): the one place those names are decided; the template's struct is checked against them
    tiling: dict[str, int] = field(default_factory=dict)
    workspace: int = 0                  # scratch bytes the kernel needs (one region per task)
    # a kernel of a dynamic model whose tiling the run computes (lower/dynamic.py): its tiling
    # is an address slot (OM2_TILING_SINK), written by the PREPROCESS_KERNEL task before it
    sink: bool = False
    # a data-dependent dim (NonZero's count, docs/dynamic-shapes.md) the kernel writes at run time:
    # the name of its symbol, whose entry of the symbols table is an address slot after the outputs
    count_symbol: str = ""
    # values only this node's calls make and read (per-block counts between two kernels): lowering
    # adds them to the graph, and the workspace plans them as any other tensor
    temps: list = field(default_factory=list)
    # a load task (lower/load_tasks.py): run once at load, before the capture, from constants
    # only; its outputs are buffers the model owns (ArgKind.MODEL_BUFFER), which the run reads
    at_load: bool = False


@dataclass
class TilingCall:
    """The PREPROCESS_KERNEL step before a sink kernel's step (lower/dynamic.py): it writes that
    kernel's tiling (block count first, then the fields in order) from the run's symbols."""
    kernel_step: int                    # the step of the kernel whose tiling it writes
    block_dim: object                   # int or ir.symbolic.Expr: the blocks the kernel runs
    fields: dict[str, object]           # the kernel's TilingData fields: ints and Exprs
    entry: str = ""                     # the tiling function's name in the device tiling library
    workspace: object = 0               # the kernel's scratch bytes at the run's sizes (int or Expr)

    @property
    def inputs(self) -> list:
        """No tensors: it reads the symbols and writes a tiling region (lower/dynamic.py)."""
        return []

    @property
    def outputs(self) -> list:
        return []


@dataclass
class Alias:
    """The node's output is a view of its first input (same bytes, e.g. Reshape/Flatten)."""
    source: str


@dataclass
class CustomCall:
    """A custom operator's node: a CUSTOM_KERNEL task. Its tensors live at fixed addresses
    (workspace or constants), since its Execute runs once, at capture."""
    op_type: str
    bin_name: str               # data/custom_ops/binaries_<arch>/<bin_name>
    blob: bytes = field(repr=False)     # the serialized instance
    # the sha256 of the custom-op library that registers op_type: the library itself (a live
    # registry of the runtime) stays with so_in_om.custom_libraries, which resolves the digest
    library: str
    inputs: list[str]
    outputs: list[str]


@dataclass
class Control:
    """A control task of a captured model (GE's label family): "label" marks a position, "switch"
    jumps to labels[index] with the uint32 index read from `index` at replay, "goto" jumps to
    labels[0] (a switch on a one-label list)."""
    kind: str
    labels: list[int]
    index: str = ""             # value holding the uint32 branch index (switch, goto)
    note: str = ""              # what the position is ("then", "batch_2", "end"), in the task's label


@dataclass
class ArgRef:
    kind: ArgKind
    index: int          # input/output index, constants blob index; 0 for workspace
    offset: int         # byte offset in that buffer

    def to_json(self) -> dict:
        return {"kind": self.kind.name, "index": self.index, "offset": self.offset}


@dataclass
class Kernel:
    """One compiled specialisation; tasks with identical sources share it."""
    entry: str                  # exported symbol and file stem, e.g. "Conv_3f9a0c12d4e5"
    source: str                 # the rendered C source
    template: str
    digest: str                 # sha256 of the source
    binary: bytes = b""         # filled by the toolchain
    # a tiling function of the device tiling library (kOpMasterDevice): the library's file
    # name; its binary is the library's, which holds every tiling entry (lower/dynamic.py)
    library: str = ""

    @property
    def file_name(self) -> str:
        return self.library or f"{self.entry}.o"


@dataclass(kw_only=True)
class Task:
    """The TaskInfo of one dispatch: what GE keeps in a TaskDef + KernelDef. Keyword-only: most
    fields are ints, strings or lists of them, which positional calls would let slip into each
    other's places. The defaults are those of a task that runs no kernel (a control task)."""
    task_type: ModelTaskType            # TaskDef.type
    dispatch_type: OpDispatchType       # how the executor launches it
    kernel_type: CcKernelType           # KernelContext.kernel_type (INVALID for control tasks)
    kernel: int = -1                    # index into Program.kernels; -1 for control and custom-op tasks
    block_dim: int = 1
    args: list[ArgRef] = field(default_factory=list)    # per address slot: where it points
    tiling: bytes = b""                 # the int64 words after the address slots (little-endian)
    op_name: str                        # source ONNX node name
    op_type: str
    label: str                          # e.g. "k012_Conv_Relu"
    inputs_desc: list[str] = field(default_factory=list)    # "name: float32[1,3,224,224]"
    outputs_desc: list[str] = field(default_factory=list)
    attrs_desc: str = ""                # the node's non-default attributes, for the dispatch comment
    fuses: str = ""                     # a fused node's source nodes with their op types, for the same
    args_offset: int = 0                # byte offset of this task's args in the model's args table
    roles: list[str] = field(default_factory=list)      # per address slot: "i", "o" or "ws" (args_format)
    # LABEL_SET: the label it sets; switch/goto: the index of its list in Program.label_lists;
    # CUSTOM_KERNEL: the index of its operator in Program.custom_ops
    label_ref: int = -1
    slot_bytes: list[int] = field(default_factory=list)     # per address slot: bytes the kernel may touch there
    # the names of the tiling words (empty: unknown, e.g. a task read from an OM file)
    tiling_fields: list[str] = field(default_factory=list)

    @property
    def args_size(self) -> int:
        return 8 * len(self.args) + len(self.tiling)

    @property
    def args_format(self) -> str:
        """GE's args_format: the role of each slot (not where it points), then the tiling."""
        return "".join("{%s}" % r for r in self.roles) + ("{t}" if self.tiling else "")


@dataclass
class Constant:
    name: str
    array: np.ndarray
    offset: int                 # in the constants blob
    # the model's initializers (or inputs) it comes from and the transforms that made it
    sources: tuple[str, ...] = ()
    transforms: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        return self.array.nbytes


@dataclass
class ModelBuffer:
    """A buffer the model allocates at load and frees at unload (Om2ModelTables.model_buffer_sizes):
    the output of a load task, read by the run's tasks."""
    name: str           # the value it holds
    size: int           # bytes
    node: str           # the node whose load task writes it


@dataclass
class IoDesc:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass
class PlannedBuffer:
    """A workspace region of the memory plan (lower/memplan.py): a tensor kernels produce, or a
    task's scratch region ("::scratch<task>")."""
    name: str
    offset: int
    size: int           # bytes it holds (its region is that, aligned)
    # the tasks it is live between: its writer and its last reader, or the ends of a loop it
    # lives into or out of (a Loop's body runs these tasks again; lower/workspace.py)
    first_task: int
    last_task: int


@dataclass
class View:
    """A value that is another's bytes (a Reshape's output): no region of its own."""
    name: str
    source: str         # the value it was made from
    root: str           # the value that owns the bytes (source, or what source is a view of)
    node: str           # the node that made it
    place: ArgRef | None = None   # where its bytes are (None: nothing reads them)


class TensorDesc(NamedTuple):
    """A custom operator's tensor as its library sees it: OMITTED, () at an omitted position."""
    dtype: DType
    shape: tuple[int, ...]


@dataclass
class CustomOpDef:
    """A custom operator instance a CUSTOM_KERNEL task runs (its Task.label_ref indexes these)."""
    op_type: str
    bin_name: str                       # data/custom_ops/binaries_<arch>/<bin_name>
    blob: bytes = field(repr=False)     # the serialized instance
    # the sha256 of the library registering op_type (as in CustomCall); "" for one read from an OM
    # file, whose library the loader finds by its SO_BINS name
    library: str
    input_num: int
    output_num: int
    descs: list[TensorDesc]             # the inputs', then the outputs'


# The final graph's readable dump (debug/ge_model.json, op_attr.json). A graph read from an OM
# file (formats/om/reader.py) has only what an OM keeps of it: the keys of the *Base classes.

class _ValueJsonBase(TypedDict):
    name: str
    dtype: str
    shape: list[int]


class ValueJson(_ValueJsonBase, total=False):
    const: bool
    dims: list[str]     # a dynamic model's value: its dims as expressions (shape has -1 there)
    outer: str      # a subgraph's input or output: the value outside it that it stands for
    place: dict     # a Loop body's input or output: where its bytes are (ArgRef.to_json())


class _NodeJsonBase(TypedDict):
    name: str
    op_type: str
    attrs: dict[str, object]    # JSON values, by attribute name


class NodeJson(_NodeJsonBase, total=False):
    domain: str
    inputs: list[ValueJson | None]      # None: an omitted position
    outputs: list[ValueJson | None]
    subgraphs: list["SubgraphJson"]     # a node with regions (Case, If): one per region, in order


class _SubgraphJsonBase(TypedDict):
    name: str
    inputs: list[ValueJson]
    outputs: list[ValueJson]
    nodes: list[NodeJson]


class SubgraphJson(_SubgraphJsonBase, total=False):
    """A region of a node (ir.graph.REGIONS): its key ("batch_0", "then", "body"), the values
    standing for the outer values it reads and writes, and its nodes; a Loop's body also the
    outer values its nodes read directly (reads, with their places)."""
    reads: list[ValueJson]


class _GraphJsonBase(TypedDict):
    name: str
    inputs: list[ValueJson]
    outputs: list[ValueJson]
    nodes: list[NodeJson]


class ConstantJson(TypedDict):
    name: str
    offset: int
    dtype: str
    shape: list[int]
    sources: list[str]          # the model's initializers (or inputs) it comes from
    transforms: list[str]       # how it was made from them, in order


class GraphJson(_GraphJsonBase, total=False):
    opsets: dict[str, int]
    constants: list[ConstantJson]


@dataclass(frozen=True)
class GearTable:
    """A model compiled with gears (frontend/multi_batch.py): model_meta.json's GE keys, and what
    the model library checks a run against. Inputs and outputs are the Program's, in order;
    the last input is ascend_mbatch_shape_data."""
    dynamic_type: int                           # GE's DynamicInputType: 1 batch, 2 image size, 3 dims
    values: list[list[int]]                     # per gear, the shape data (dynamic_batch_info)
    order: list[str]                            # user_designate_shape_order
    origin_dims: dict[str, list[int]]           # each user input's dims, -1 where a gear decides
    input_shapes: list[list[tuple[int, ...]]]   # per gear, every input's shape
    output_shapes: list[list[tuple[int, ...]]]  # per gear, every output's shape


@dataclass(frozen=True)
class Symbol:
    """A dynamic dim of the model (ir.symbolic.Sym): its range, and the input dim that gives its
    value at run time: that dim is `multiple` times the symbol (a `lo~hi%m` dim: the symbol counts
    the m's, and a dim m does not divide is refused). Or the node whose kernel writes it: a
    data-dependent count."""
    name: str
    lo: int
    hi: int | None
    input: int          # the model input whose dim it is (-1: a data-dependent count)
    axis: int
    multiple: int = 1
    producer: str = ""  # a data-dependent count: the node whose kernel writes it into the symbols table

    def source(self, inputs: list["IoDesc"]) -> str:
        """Where its value comes from, for the generated code's comments."""
        if self.producer:
            return f"the count node {self.producer} writes"
        per = f" / {self.multiple}" if self.multiple > 1 else ""
        return f"dim {self.axis} of input {inputs[self.input].name}{per}"


@dataclass
class DynamicInfo:
    """What a dynamic model's code needs besides the tasks (docs/dynamic-shapes.md): the symbols,
    where their values live in the workspace, each input's and output's dims as expressions
    (ints and Exprs), and the device tiling library that the PREPROCESS_KERNEL tasks run."""
    symbols: list[Symbol]
    symbols_offset: int                         # workspace offset of the int64[len(symbols)] table
    input_dims: list[tuple]                     # per input: ints and Exprs
    output_dims: list[tuple]
    tiling_library: str                         # its file name (data/so_bins, kOpMasterDevice)
    tilings: list[TilingCall] = field(default_factory=list)   # its functions, in task order
    tiling_source: str = ""                     # its C source (codegen/tiling_library.py)
    tiling_binary: bytes = b""                  # filled by the toolchain
    # the RT2 plan of a classic .om (lower/host_ops.py) and its host op library (kSpaceRegistry)
    host_plan: object = None
    host_source: str = ""
    host_library: str = ""
    host_binary: bytes = b""
    assumptions: list = field(default_factory=list)   # symbolic.Assumption: what the run's guard checks
    autofuse_library: str = ""                  # the autofuse library's file name (kAutofuse, vendors/om2gen)
    autofuse_source: str = ""                   # its C source (codegen/autofuse_library.py)
    autofuse_binary: bytes = b""
    guard_check_source: str = ""                # guard_check.so's C source
    guard_check_so_data: bytes = b""            # GE's _guard_check_so_data: guard_check.so's bytes
    guard_function: str = ""                    # its check as the model library's tables compile it in


@dataclass
class Program:
    """What lowering (or formats/om/reader.py) hands code generation, the writers and the runtime:
    plain data, holding no handle of a native object (the runtime makes its own from it:
    runtime/tables.py)."""
    name: str
    inputs: list[IoDesc]
    outputs: list[IoDesc]
    kernels: list[Kernel]
    tasks: list[Task]
    constants: list[Constant]
    constants_size: int
    work_size: int
    args_size: int
    source_digest: str
    opsets: dict[str, int]
    graph_json: GraphJson = field(default_factory=dict)   # {} only until formats/om/reader.py has read the ops
    label_num: int = 0
    label_lists: list[list[int]] = field(default_factory=list)
    custom_ops: list[CustomOpDef] = field(default_factory=list)
    source_format: str = "ONNX"                            # what source_digest is the digest of
    buffers: list[PlannedBuffer] = field(default_factory=list)   # the workspace plan, by offset
    views: list[View] = field(default_factory=list)
    gears: GearTable | None = None              # None: a static model
    dynamic: DynamicInfo | None = None          # None: every shape static (or one per gear)
    # tasks GertModelLoad runs once before the capture (their args in the same args table), and
    # the buffers they write (what ArgKind.MODEL_BUFFER slots index)
    load_tasks: list[Task] = field(default_factory=list)
    model_buffers: list[ModelBuffer] = field(default_factory=list)


@dataclass
class LowerContext:
    """What lowering (and the passes that ask an op how it would lower) know besides the graph.
    render_kernel turns a KernelCall into its Kernel (codegen.kernels.render, which the pipeline
    passes in: lowering decides what to run, code generation writes it). fusion and winograd are
    the compile options of the same names (pipeline.Options), resolved: no pass or op reads the
    environment."""
    target: object          # toolchain.targets.Target
    generator: str
    render_kernel: Callable[["KernelCall", "LowerContext"], "Kernel"] | None = None
    fusion: bool = True                 # run the graph rewrites (passes/optimize.py)
    winograd: int | None = None         # None: the cost model chooses; 0: off; 2 or 4: forced tile size
    winograd_weights: str = "auto"      # "stored", "load" (a load task) or "auto" (ops/winograd.weights_at_load)
    derived: dict = field(default_factory=dict, repr=False)   # derive()'s results of this compile

    def derive(self, how: tuple, weight: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """make(weight), computed once per compile for equal weights and equal `how` (what make
        does, with its parameters): the gears of a model hold equal weights, one copy per gear's
        graph, and lower/constants.py stores equal results once."""
        weight = np.ascontiguousarray(weight)
        flat = weight.reshape(-1).view(np.uint8)
        key = (how, weight.dtype.str, weight.shape, zlib.crc32(flat))
        for seen, result in self.derived.get(key, ()):
            if np.array_equal(seen, flat):
                return result
        result = make(weight)
        self.derived.setdefault(key, []).append((flat, result))
        return result
