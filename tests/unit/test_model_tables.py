"""ir/model_tables.py: a Program flattened into the rows both the generated C++ and the
in-memory tables of the classic-OM executor are made of (issue 13)."""
from om2gen.ir import model_tables
from om2gen.ir.dtypes import BY_NAME
from om2gen.ir.program import ArgRef, IoDesc, Program, Task
from om2gen.ir.tasks import ArgKind, CcKernelType, ModelTaskType, OpDispatchType


def _task(args, words, kernel=0, dispatch=OpDispatchType.AICORE, label_ref=-1, args_offset=0):
    tiling = b"".join(w.to_bytes(8, "little", signed=True) for w in words)
    return Task(task_type=ModelTaskType.MODEL_TASK_KERNEL, dispatch_type=dispatch, kernel_type=CcKernelType.TE,
                kernel=kernel, block_dim=1, args=args, tiling=tiling, op_name="n", op_type="Relu", label="k000_Relu",
                inputs_desc=[], outputs_desc=[], args_offset=args_offset, label_ref=label_ref)


def _program(tasks, label_lists=()):
    x = IoDesc("x", "float32", (2, 3), 24)
    return Program(name="m", inputs=[x], outputs=[IoDesc("y", "float16", (), 2)], kernels=[], tasks=tasks,
                   constants=[], constants_size=0, work_size=64, args_size=0, source_digest="", opsets={},
                   label_lists=list(label_lists))


def test_each_task_points_at_its_part_of_the_flat_arrays():
    a = _task([ArgRef(ArgKind.INPUT, 0, 0), ArgRef(ArgKind.WORKSPACE, 0, 16)], [7, -1])
    b = _task([ArgRef(ArgKind.CONSTANT, 0, 8), ArgRef(ArgKind.OUTPUT, 0, 0)], [3], args_offset=32)
    t = model_tables.flatten(_program([a, b]))
    assert [(o.first_slot, o.slot_num, o.first_tiling, o.tiling_num) for o in t.op_defs] == [(0, 2, 0, 2), (2, 2, 2, 1)]
    assert t.tiling_data == (7, -1, 3) and t.tiling_of(t.op_defs[1]) == (3,)
    assert [s.args_offset for s in t.slots_of(t.op_defs[1])] == [32, 40]
    assert t.io_slot_num == 2                       # the input and the output slot, not workspace or constant
    assert t.args_size == model_tables.MIN_ARGS_SIZE and t.constant_num == 1
    assert t.outputs[0] == model_tables.IoDesc("y", BY_NAME["float16"], 2, ())


def test_label_tasks_index_their_label_list():
    switch = _task([], [], kernel=-1, dispatch=OpDispatchType.LABEL_SWITCH_BY_INDEX, label_ref=1)
    t = model_tables.flatten(_program([switch], label_lists=[[0], [1, 2]]))
    assert t.op_defs[0].kernel == 1
    assert t.label_lists == (model_tables.LabelList(0, 1), model_tables.LabelList(1, 2))
    assert t.label_list_entries == (0, 1, 2)
