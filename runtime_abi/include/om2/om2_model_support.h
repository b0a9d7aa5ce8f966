/*
 * om2_model_support.h -- small helpers of the generated load-and-run code: the thread-local
 * last-error record, the checks around ACL calls and the executor's run reports. Kept here (not
 * re-emitted per model).
 */
#ifndef OM2_OM2_MODEL_SUPPORT_H
#define OM2_OM2_MODEL_SUPPORT_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstddef>

#include "acl/acl.h"
#include "om2/om2_model_api.h"
#include "om2/om2_model_tables.h"

namespace om2 {

/* The thread-local last-error record. A fixed buffer, trivially destructible, on purpose: a
 * thread_local with a destructor (a std::string) registers that destructor with
 * __cxa_thread_atexit, and glibc then keeps the model library mapped until every thread that
 * touched the record exits -- dlclose of a model would unmap nothing in a long-running process. */
constexpr size_t kLastErrorCap = 1024;

inline char *LastErrorBuffer() {
    static thread_local char message[kLastErrorCap];
    return message;
}

inline const char *LastError() { return LastErrorBuffer(); }
inline bool HasLastError() { return LastErrorBuffer()[0] != '\0'; }
inline void ClearLastError() { LastErrorBuffer()[0] = '\0'; }

inline void SetLastError(const char *message) {
    std::snprintf(LastErrorBuffer(), kLastErrorCap, "%s", message != nullptr ? message : "");
}

inline int32_t Fail(int32_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
inline int32_t Fail(int32_t code, const char *format, ...) {
    char buffer[kLastErrorCap];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof(buffer), format, args);
    va_end(args);
    SetLastError(buffer);
    return code;
}

enum class RunReport { kPreprocess, kPostprocess };

/* Calls the executor's GertModelRunCallbacks (GertModelRunConfig.run_callbacks; GE's executor
 * passes them when profiling is on) around a run, as GE's generated Run does: preprocess once the
 * run's addresses are in the args table and before the replay is launched, postprocess once the
 * replay is done (GertModelRun) or queued on the caller's stream (GertModelRunAsync). A NULL
 * run_callbacks or callback is skipped. The report carries the load config's model_id, the
 * stream the run was issued on (NULL for GertModelRun: aclmdlRIExecute takes none) and is_async.
 * A non-zero return fails the run with that code, as any other run error: a failing preprocess
 * means no replay, a failing postprocess comes after it. */
inline int32_t ReportRun(RunReport when, const GertModelRunConfig &run, const GertModelLoadConfig &model,
                         aclrtStream stream, bool async) {
    if (run.run_callbacks == nullptr) return ACL_SUCCESS;
    const bool pre = when == RunReport::kPreprocess;
    const GertModelRunCallbacks &callbacks = *run.run_callbacks;
    const auto report = pre ? callbacks.report_run_info_preprocess : callbacks.report_run_info_postprocess;
    if (report == nullptr) return ACL_SUCCESS;
    const GertModelRunReportInfo info = {sizeof(GertModelRunReportInfo), model.model_id, stream, async ? 1u : 0u};
    const int32_t rc = report(model.instance_handle, &info);
    if (rc == 0) return ACL_SUCCESS;
    return Fail(rc, "%s: the executor's report_run_info_%s returned %d", async ? "GertModelRunAsync" : "GertModelRun",
                pre ? "preprocess" : "postprocess", rc);
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
