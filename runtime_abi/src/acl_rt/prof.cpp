/*
 * prof.cpp -- profiling marks: aclprofMarkEx (acl/acl_prof.h) and om2rtTakeProfMarks
 * (om2/om2_cpu_runtime.h), with which the executor times GertModelLoad's stages.
 */
#include <time.h>

#include <cstring>

#include "acl/acl_prof.h"
#include "om2/om2_cpu_runtime.h"
#include "base.h"

using om2rt::fail;

namespace {

/* The calling thread's marks: a bounded ring, so a process that never reads them stays small. */
struct ProfMarks {
    Om2rtProfMark ring[OM2RT_MAX_PROF_MARKS];
    size_t first = 0;
    size_t count = 0;
};

ProfMarks& thread_prof_marks() {
    static thread_local ProfMarks marks;
    return marks;
}

}  // namespace

extern "C" aclError aclprofMarkEx(const char* msg, size_t msgLen, aclrtStream stream) {
    (void)stream;  // stamped on the host at the call: CPU "device" work is ordered with it anyway
    if (msg == nullptr || msgLen == 0 || msgLen > 127) {
        return fail(ACL_ERROR_INVALID_PARAM, "aclprofMarkEx: msg must hold 1..127 characters (msgLen %zu)", msgLen);
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    ProfMarks& marks = thread_prof_marks();
    const size_t slot = (marks.first + marks.count) % OM2RT_MAX_PROF_MARKS;
    Om2rtProfMark& mark = marks.ring[slot];
    mark.time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    const size_t n = strnlen(msg, msgLen);
    std::memcpy(mark.msg, msg, n);
    mark.msg[n] = '\0';
    if (marks.count < OM2RT_MAX_PROF_MARKS) {
        ++marks.count;
    } else {
        marks.first = (marks.first + 1) % OM2RT_MAX_PROF_MARKS;
    }
    return ACL_SUCCESS;
}

extern "C" size_t om2rtTakeProfMarks(Om2rtProfMark* out, size_t capacity) {
    ProfMarks& marks = thread_prof_marks();
    size_t n = 0;
    for (; n < marks.count && n < capacity && out != nullptr; ++n) {
        out[n] = marks.ring[(marks.first + n) % OM2RT_MAX_PROF_MARKS];
    }
    marks.first = 0;
    marks.count = 0;
    return n;
}
