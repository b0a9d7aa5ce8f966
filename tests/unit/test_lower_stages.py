"""The lowering stages one by one (om2gen/lower/): what each decides, without a compiler."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from om2gen.codegen import kernels
from om2gen.frontend.onnx_import import import_onnx
from om2gen.ir.program import ArgRef, LowerContext, Task
from om2gen.ir.tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType
from om2gen.lower import args, bind, constants, emit, workspace
from om2gen.lower.lowering import lower_graph
from om2gen.lower.state import Lowering, OutputCopy
from om2gen.toolchain import targets
from om2gen.version import GENERATOR

mk = helper.make_node


def _state(nodes, inits=(), outputs=("y",)):
    """A Lowering of a float32[1,8] model, its nodes emitted and derived constants named."""
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("x", *outputs)]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    state = Lowering(import_onnx(model), LowerContext(targets.default_target(), GENERATOR, kernels.render))
    emit.emit(state, state.graph.nodes)
    constants.name_derived(state)
    return state


def test_an_output_that_is_a_model_input_gets_a_copy_into_its_own_buffer():
    state = _state([mk("Identity", ["x"], ["y"], name="id")])
    assert state.steps == [] and state.root("y") == "x"      # Identity is a view: nothing to launch
    assert bind.bind_outputs(state) == {"y::out0": 0}
    (step,) = state.steps
    assert step.node == OutputCopy("copy_to_output:y") and step.call.outputs == ["y::out0"]


def test_an_output_its_producer_can_write_is_bound_in_place():
    state = _state([mk("Relu", ["x"], ["y"], name="relu")])
    assert bind.bind_outputs(state) == {"y": 0} and len(state.steps) == 1


def test_the_same_value_as_two_outputs_is_written_once_and_copied_once():
    state = _state([mk("Relu", ["x"], ["y"], name="relu"), mk("Identity", ["y"], ["z"], name="id")],
                   outputs=("y", "z"))
    assert bind.bind_outputs(state) == {"y": 0, "z::out1": 1}


def test_constants_are_placed_aligned_in_first_use_order():
    inits = [helper.make_tensor("b", TensorProto.FLOAT, [8], np.arange(8, dtype=np.float32)),
             helper.make_tensor("a", TensorProto.FLOAT, [3], np.ones(3, np.float32))]
    state = _state([mk("Add", ["x", "b"], ["t"], name="add"), mk("Mul", ["t", "b"], ["y"], name="mul")], inits)
    blob = constants.place(state)
    assert [(c.name, c.offset) for c in blob.constants.values()] == [("b", 0)]   # "a" is never read
    assert blob.size == 64                                                       # 32 bytes, aligned


def test_arrays_an_op_derives_become_named_constants():
    state = _state([mk("Relu", ["x"], ["y"], name="relu")])
    call = state.steps[0].call
    call.inputs.append(np.arange(4, dtype=np.float32))    # as an op's lower() may hand one in
    constants.name_derived(state)
    assert call.inputs[-1] == "relu.packed_input1"
    value = state.graph.values["relu.packed_input1"]
    assert value.is_const and value.shape == (4,) and value.dtype.name == "float32"


def test_the_workspace_holds_intermediates_only_while_they_are_live():
    state = _state([mk("Relu", ["x"], ["a"], name="r1"), mk("Relu", ["a"], ["b"], name="r2"),
                    mk("Relu", ["b"], ["y"], name="r3")])
    output_of = bind.bind_outputs(state)
    work = workspace.plan(state, output_of, constants.place(state).constants)
    assert [(b.name, b.offset, b.first_task, b.last_task) for b in work.buffers] == [("a", 0, 0, 1), ("b", 64, 1, 2)]
    assert work.offsets == {"a": 0, "b": 64} and work.size == 128    # both live at task 1: no reuse


def test_places_point_each_value_at_its_buffer():
    state = _state([mk("Relu", ["x"], ["a"], name="r1"), mk("Relu", ["a"], ["y"], name="r2")])
    output_of = bind.bind_outputs(state)
    blob = constants.place(state)
    work = workspace.plan(state, output_of, blob.constants)
    places = args.Places(state.root, state.input_index, output_of, blob.constants, work.offsets)
    assert places.ref("x") == ArgRef(ArgKind.INPUT, 0, 0)
    assert places.ref("y") == ArgRef(ArgKind.OUTPUT, 0, 0)
    assert places.ref("a") == ArgRef(ArgKind.WORKSPACE, 0, work.offsets["a"])
    assert places.placed("nothing") is None


@pytest.mark.parametrize("slots,tiling,offsets,size", [([1, 2], 0, [0, 8], 24), ([1, 1], 3, [0, 16], 24),
                                                      ([0, 0, 5], 0, [0, 0, 0], 40)])
def test_args_are_laid_out_in_task_order_8_aligned(slots, tiling, offsets, size):
    """`tiling`: bytes of tiling the first task carries (3: its args end off the 8-byte grid)."""
    ref = ArgRef(ArgKind.WORKSPACE, 0, 0)
    tasks = [Task(task_type=ModelTaskType.MODEL_TASK_KERNEL, dispatch_type=OpDispatchType.AICORE,
                  kernel_type=CcKernelType.TE, args=[ref] * n, tiling=bytes(tiling if i == 0 else 0),
                  op_name=f"n{i}", op_type="Relu", label=f"k{i:03d}_Relu") for i, n in enumerate(slots)]
    assert args.lay_out(tasks) == size
    assert [t.args_offset for t in tasks] == offsets


def test_lower_graph_runs_the_stages_in_order():
    state = _state([mk("Identity", ["x"], ["y"], name="id")])
    program = lower_graph(state.graph, state.ctx)
    (task,) = program.tasks
    assert task.op_name == "copy_to_output:y" and task.label.startswith("k000_")
    assert [a.kind for a in task.args] == [ArgKind.INPUT, ArgKind.OUTPUT] and program.args_size == task.args_size
