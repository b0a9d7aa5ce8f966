"""Task and kernel enumerations, numbered as GE numbers them (GE_FACTS 3.7, 3.8, 5.6)."""
import enum


class ModelTaskType(enum.IntEnum):
    """GE ModelTaskType (ops_kernel_info_types.h): TaskDef.type."""
    MODEL_TASK_KERNEL = 0
    MODEL_TASK_EVENT_RECORD = 1
    MODEL_TASK_EVENT_WAIT = 2
    MODEL_TASK_FUSION_START = 3
    MODEL_TASK_FUSION_END = 4
    MODEL_TASK_KERNEL_EX = 5
    MODEL_TASK_HCCL = 6
    MODEL_TASK_STREAM_SWITCH = 7
    MODEL_TASK_STREAM_ACTIVE = 8
    MODEL_TASK_LABEL_SET = 9
    MODEL_TASK_LABEL_SWITCH = 10
    MODEL_TASK_LABEL_GOTO = 11
    MODEL_TASK_PROFILER_TRACE = 12
    MODEL_TASK_MEMCPY_ASYNC = 13
    MODEL_TASK_NOTIFY_RECORD = 14
    MODEL_TASK_NOTIFY_WAIT = 15
    MODEL_TASK_REDUCE_ASYNC = 16
    MODEL_TASK_RDMA_SEND = 17
    MODEL_TASK_EVENT_RESET = 18
    MODEL_TASK_END_GRAPH = 19
    MODEL_TASK_STREAM_SWITCH_N = 20
    MODEL_TASK_RDMA_DB_SEND = 21
    MODEL_TASK_MEMCPY_ADDR_ASYNC = 22
    MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX = 23
    MODEL_TASK_STREAM_LABEL_GOTO = 24
    MODEL_TASK_MODEL_EXIT = 25
    MODEL_TASK_ALL_KERNEL = 26
    MODEL_TASK_PROFILER_TRACE_EX = 27
    MODEL_TASK_FFTS = 28
    MODEL_TASK_FFTS_PLUS = 29
    MODEL_TASK_DSA = 30
    MODEL_TASK_CMO = 31
    MODEL_TASK_BARRIER = 32
    MODEL_TASK_NPU_GET_FLOAT_STATUS = 33
    MODEL_TASK_NPU_CLEAR_FLOAT_STATUS = 34
    MODEL_TASK_DVPP = 35
    MODEL_TASK_NPU_GET_DEBUG_FLOAT_STATUS = 36
    MODEL_TASK_NPU_CLEAR_DEBUG_FLOAT_STATUS = 37
    MODEL_TASK_CMO_ADDR = 38
    MODEL_TASK_VECTOR_KERNEL = 39
    MODEL_TASK_VECTOR_ALL_KERNEL = 40
    MODEL_TASK_UPDATE = 41
    MODEL_TASK_NOP = 42
    MODEL_TASK_PREPROCESS_KERNEL = 43
    MODEL_TASK_SUPER_KERNEL = 44
    MODEL_TASK_MEM_EVENT_RECORD = 45
    MODEL_TASK_MEM_EVENT_WAIT = 46
    MODEL_TASK_FUSION_KERNEL = 47
    MODEL_TASK_KERNEL_LAUNCH_V2 = 48
    MODEL_TASK_CCU_KERNEL = 49
    MODEL_TASK_CUSTOM_KERNEL = 50


class CcKernelType(enum.IntEnum):
    """GE ccKernelType (taskdown_common.h): KernelContext.kernel_type."""
    CCE_AI_CORE = 0
    CCE_AI_CPU = 1
    TE = 2
    CUSTOMIZED = 3
    TE_AI_CORE = 4
    TE_AI_CPU = 5
    AI_CPU = 6
    CUST_AI_CPU = 7
    HOST_CPU = 8
    DVPP = 9
    AI_CPU_KFC = 10
    MIX_AICORE = 11
    MIX_VECTOR_CORE = 12
    INVALID = 10000


class OpDispatchType(enum.IntEnum):
    """GE's OM2 codegen dispatch table kinds (om2_codegen_types.h)."""
    AICORE = 0
    AICPU = 1
    EVENT_RECORD = 2
    EVENT_WAIT = 3
    FUSION_START = 4
    FUSION_END = 5
    END_GRAPH = 6
    LABEL_SET = 7
    NOTIFY_RECORD = 8
    NOTIFY_WAIT = 9
    STREAM_ACTIVE = 10
    STREAM_SWITCH = 11
    LABEL_GOTO_EX = 12
    LABEL_SWITCH_BY_INDEX = 13
    BARRIER = 14
    CMO = 15
    MEMCPY_ASYNC = 16
    MEMCPY_ADDR_ASYNC = 17
    CMO_ADDR = 18
    DSA = 19
    KERNEL_EX = 20
    CUSTOM_KERNEL = 21


class ArgKind(enum.IntEnum):
    """Where an args slot points (GertModelArgKind numbering, plus CONSTANT for weights)."""
    INPUT = 0
    OUTPUT = 1
    WORKSPACE = 2
    TILING = 3
    CONSTANT = 7      # GERT_MODEL_ARG_CUSTOM_VALUE: resolved from the constants table at load
    MODEL_BUFFER = 16   # om2gen's own: a buffer the model allocates at load, written by its load tasks

    @property
    def c_name(self) -> str:
        """The Om2ArgKind enumerator of an args slot (om2/om2_model_tables.h, the same values)."""
        assert self in SLOT_KINDS, f"{self!r} is no args slot kind"
        return f"OM2_ARG_{self.name}"


# The kinds an args slot of the tables can have (TILING is placed by the tiling data, never a slot)
SLOT_KINDS = frozenset({ArgKind.INPUT, ArgKind.OUTPUT, ArgKind.WORKSPACE, ArgKind.CONSTANT, ArgKind.MODEL_BUFFER})
