/*
 * init.cpp -- process and device calls of the CPU ACL runtime: aclInit / aclFinalize, the
 * device (aclrtSetDevice ... aclrtSynchronizeDevice) and aclDataTypeSize.
 *
 * There is one device, 0. aclrtSetDevice/aclrtResetDevice with another id fail with
 * ACL_ERROR_INVALID_PARAM; aclrtGetDevice always reports 0. aclInit is optional (every
 * call initialises what it needs lazily); a second aclInit without aclFinalize returns
 * ACL_ERROR_REPEAT_INITIALIZE as in ACL. aclFinalize synchronises all streams and stops the
 * kernel workers (they restart if the process launches again).
 */
#include <cerrno>
#include <cstdio>
#include <mutex>

#include "acl/acl_rt.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

struct InitState {
    std::mutex m;
    bool initialized = false;  // by an explicit aclInit (everything else initialises lazily)
};

aclError check_device_id(int32_t device_id) {
    if (device_id != 0) {
        return fail(ACL_ERROR_INVALID_PARAM, "device %d does not exist: the CPU runtime has one device, 0", device_id);
    }
    return ACL_SUCCESS;
}

aclError check_config_file(const char* path) {
    if (path == nullptr || path[0] == '\0') return ACL_SUCCESS;
    FILE* f = fopen(path, "rb");  // the contents (dump/profiling options) do not apply here
    if (f == nullptr) {
        char buf[128];
        return fail(ACL_ERROR_INVALID_FILE, "cannot open config file '%s': %s", path, errno_text(errno, buf, sizeof buf));
    }
    fclose(f);
    return ACL_SUCCESS;
}

}  // namespace
}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// acl_base.h
// =============================================================================================

extern "C" size_t aclDataTypeSize(aclDataType dataType) {
    const long long type = enum_value(dataType);
    switch (type) {
        case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
        case ACL_FLOAT16: case ACL_INT16: case ACL_UINT16: case ACL_BF16: return 2;
        case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
        case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64: return 8;
        case ACL_COMPLEX128: return 16;
        case ACL_STRING: case ACL_DT_UNDEFINED: return 0;  // no fixed element size
        default: {
            ApiScope scope("aclDataTypeSize");
            fail(ACL_ERROR_INVALID_PARAM, "%lld is not an aclDataType", type);
            return 0;
        }
    }
}

// =============================================================================================
// init / device
// =============================================================================================

extern "C" aclError aclInit(const char* configPath) {
    return guarded("aclInit", [&]() -> aclError {
        InitState& st = leaked_singleton<InitState>();
        std::lock_guard<std::mutex> lock(st.m);
        if (st.initialized) return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit was already called");
        RETURN_IF_ERROR(check_config_file(configPath));
        st.initialized = true;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclFinalize(void) {
    return guarded("aclFinalize", [&]() -> aclError {
        const aclError err = synchronize_all_streams();
        stop_kernel_workers();
        InitState& st = leaked_singleton<InitState>();
        std::lock_guard<std::mutex> lock(st.m);
        st.initialized = false;
        return err;
    });
}

extern "C" aclError aclrtSetDevice(int32_t deviceId) {
    return guarded("aclrtSetDevice", [&] { return check_device_id(deviceId); });
}

extern "C" aclError aclrtResetDevice(int32_t deviceId) {
    return guarded("aclrtResetDevice", [&]() -> aclError {
        RETURN_IF_ERROR(check_device_id(deviceId));
        return synchronize_all_streams();
    });
}

extern "C" aclError aclrtGetDevice(int32_t* deviceId) {
    return guarded("aclrtGetDevice", [&]() -> aclError {
        if (deviceId == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "deviceId is NULL");
        *deviceId = 0;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtGetRunMode(aclrtRunMode* runMode) {
    return guarded("aclrtGetRunMode", [&]() -> aclError {
        if (runMode == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "runMode is NULL");
        *runMode = ACL_HOST;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSynchronizeDevice(void) {
    return guarded("aclrtSynchronizeDevice", [&] { return synchronize_all_streams(); });
}

