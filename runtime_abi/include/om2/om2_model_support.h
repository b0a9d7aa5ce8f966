/*
 * om2_model_support.h -- small helpers of the generated load-and-run code: the thread-local
 * last-error record and the checks around ACL calls. Kept here (not re-emitted per model).
 */
#ifndef OM2_OM2_MODEL_SUPPORT_H
#define OM2_OM2_MODEL_SUPPORT_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

#include "acl/acl.h"
#include "om2/om2_model_api.h"
#include "om2/om2_model_tables.h"

namespace om2 {

inline std::string &LastError() {
    static thread_local std::string message;
    return message;
}

inline int32_t Fail(int32_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
inline int32_t Fail(int32_t code, const char *format, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof(buffer), format, args);
    va_end(args);
    LastError() = buffer;
    return code;
}

}  // namespace om2

/* Runs an ACL call; on failure records "<what>: <call> returned <code> (<runtime message>)". */
#define OM2_CHECK_ACL(call, what)                                                                    \
    do {                                                                                             \
        const aclError om2_rc_ = (call);                                                             \
        if (om2_rc_ != ACL_SUCCESS) {                                                                \
            const char *om2_msg_ = aclGetRecentErrMsg();                                             \
            return ::om2::Fail(om2_rc_, "%s: %s returned %d (%s)", (what), #call, om2_rc_,           \
                               om2_msg_ != nullptr ? om2_msg_ : "no runtime message");               \
        }                                                                                            \
    } while (0)

#endif /* OM2_OM2_MODEL_SUPPORT_H */
