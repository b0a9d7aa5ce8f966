/*
 * errors.cpp -- how the CPU ACL runtime reports a failure: per-thread messages for
 * aclGetRecentErrMsg (acl/acl_base.h), and the exception-to-aclError mapping every exported
 * function ends in (base.h's guarded()).
 *
 * Every exported function catches all exceptions, returns an aclError and, on failure, records
 * "<function>: <reason> (error <code>)" for aclGetRecentErrMsg: per thread, newest first, read
 * and cleared by aclGetRecentErrMsg, which returns NULL when there is nothing to report. The
 * messages live in fixed thread-local buffers, so reporting a failure (out of memory included)
 * never allocates.
 */
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <system_error>

#include "base.h"

namespace om2rt {
namespace {

thread_local const char* t_api = "om2 CPU runtime";  // the API this thread is executing
thread_local char t_stack[kMsgCap];                  // unread messages, newest first
thread_local size_t t_stack_len = 0;
thread_local char t_latest[512];                     // the newest message alone
thread_local char t_returned[kMsgCap];               // what aclGetRecentErrMsg handed out

}  // namespace

void push_message(const char* text) noexcept {
    char merged[kMsgCap];
    const int n = t_stack_len == 0 ? snprintf(merged, sizeof merged, "%s", text)
                                   : snprintf(merged, sizeof merged, "%s\n%s", text, t_stack);
    t_stack_len = std::min(static_cast<size_t>(std::max(n, 0)), kMsgCap - 1);
    memcpy(t_stack, merged, t_stack_len);
    t_stack[t_stack_len] = '\0';
}

__attribute__((format(printf, 2, 3))) aclError fail(aclError code, const char* fmt, ...) noexcept {
    char reason[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    snprintf(t_latest, sizeof t_latest, "%s: %s (error %d)", t_api, reason, code);
    push_message(t_latest);
    return code;
}

const char* take_messages() noexcept {
    if (t_stack_len == 0) return nullptr;
    memcpy(t_returned, t_stack, t_stack_len + 1);
    t_stack_len = 0;
    t_stack[0] = '\0';
    return t_returned;
}

const char* errno_text(int err, char* buf, size_t cap) noexcept { return strerror_r(err, buf, cap); }

ApiScope::ApiScope(const char* api) noexcept : prev_(t_api) { t_api = api; }

ApiScope::~ApiScope() { t_api = prev_; }

aclError error_from_current_exception() noexcept {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return fail(ACL_ERROR_BAD_ALLOC, "out of host memory");
    } catch (const std::system_error& e) {
        return fail(ACL_ERROR_RT_FAILURE, "system error: %s", e.what());
    } catch (const std::exception& e) {
        return fail(ACL_ERROR_INTERNAL_ERROR, "internal error: %s", e.what());
    } catch (...) {
        return fail(ACL_ERROR_INTERNAL_ERROR, "unknown internal exception");
    }
}

}  // namespace om2rt

extern "C" const char* aclGetRecentErrMsg(void) { return om2rt::take_messages(); }
