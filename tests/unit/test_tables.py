"""The enumeration tables match GE's numbering (GE_FACTS 2.6, 3.7)."""
from om2gen.ir import dtypes
from om2gen.ir.tasks import CcKernelType, ModelTaskType, OpDispatchType


def test_dtype_numberings():
    f = dtypes.BY_NAME["float32"]
    assert (f.onnx, f.ge_proto, f.acl, f.ge_string) == (1, 1, 0, "DT_FLOAT")
    i64 = dtypes.BY_NAME["int64"]
    assert (i64.onnx, i64.ge_proto, i64.acl) == (7, 8, 9)
    b = dtypes.BY_NAME["bool"]
    assert (b.onnx, b.ge_proto, b.acl) == (9, 11, 12)
    assert len({d.acl for d in dtypes.BY_NAME.values()}) == len(dtypes.BY_NAME)


def test_task_type_numbers():
    assert ModelTaskType.MODEL_TASK_KERNEL == 0
    assert ModelTaskType.MODEL_TASK_END_GRAPH == 19
    assert ModelTaskType.MODEL_TASK_PREPROCESS_KERNEL == 43
    assert ModelTaskType.MODEL_TASK_CUSTOM_KERNEL == 50
    assert CcKernelType.TE == 2 and CcKernelType.INVALID == 10000
    assert OpDispatchType.CUSTOM_KERNEL == 21
