"""The numbers of AscendCL that om2gen.acl returns and accepts, with their ACL names.

Values are CANN's (acl_base.h / acl_rt.h / acl_mdl.h); runtime_abi/include/acl/acl_base.h mirrors
the subset the CPU runtime uses, and tests/acl check that the two agree. pyACL itself does not
export these names (scripts define the few they need); om2gen.acl does, for convenience.
Data types are not repeated here: om2gen.ir.dtypes is their one table (its `acl` column).
"""

# ---- aclError ----
ACL_SUCCESS = 0
ACL_ERROR_NONE = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_DESERIALIZE_MODEL = 100012
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_READ_MODEL_FAILURE = 100014
ACL_ERROR_MODEL_SIZE_INVALID = 100015
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_FAILURE = 500001
ACL_ERROR_RT_FAILURE = 500003
# GE's codes, which ACL passes through for model calls (ge_error_codes.h; listed in the ACL
# documentation's aclError table as "GE return codes")
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
# runtime (rt_error_codes.h)
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_WAIT_TIMEOUT = 107019
ACL_ERROR_RT_MODEL_RUNNING = 107037

# ---- aclrtMemcpyKind ----
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_MEMCPY_DEFAULT = 4

# ---- aclrtMemMallocPolicy ----
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_HUGE_ONLY = 1
ACL_MEM_MALLOC_NORMAL_ONLY = 2

# ---- aclrtRunMode ----
ACL_DEVICE = 0
ACL_HOST = 1

# ---- aclrtEventRecordedStatus ----
ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1

# ---- aclFormat ----
ACL_FORMAT_UNDEFINED = -1
ACL_FORMAT_NCHW = 0
ACL_FORMAT_NHWC = 1
ACL_FORMAT_ND = 2

# ---- aclDataType: the values om2gen.ir.dtypes does not hold ----
ACL_DT_UNDEFINED = -1
ACL_STRING = 13

# ---- numpy C type numbers, as acl.util.ptr_to_numpy takes them (NPY_TYPES) ----
NPY_BOOL = 0
NPY_INT8 = 1
NPY_UINT8 = 2
NPY_INT16 = 3
NPY_UINT16 = 4
NPY_INT32 = 5
NPY_UINT32 = 6
NPY_INT64 = 7
NPY_UINT64 = 8
NPY_LONGLONG = 9
NPY_ULONGLONG = 10
NPY_FLOAT32 = 11
NPY_DOUBLE = 12
NPY_FLOAT16 = 23

ERROR_NAMES = {v: k for k, v in sorted(globals().items(), reverse=True)
               if k.startswith("ACL_ERROR_") and isinstance(v, int)}
ERROR_NAMES[ACL_SUCCESS] = "ACL_SUCCESS"
