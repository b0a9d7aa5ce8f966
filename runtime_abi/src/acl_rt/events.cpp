/*
 * events.cpp -- events of the CPU ACL runtime: aclrtCreateEvent(WithFlag), aclrtDestroyEvent,
 * aclrtRecordEvent, aclrtResetEvent, aclrtStreamWaitEvent, aclrtSynchronizeEvent and
 * aclrtQueryEventStatus. The Event object, which the tasks that record, wait for or reset it
 * update, is in tasks.h.
 *
 * Events follow Ascend's flag semantics: aclrtRecordEvent sets the flag when the stream
 * reaches it, aclrtStreamWaitEvent blocks the stream until the flag is set and no record of
 * the event is still queued, aclrtResetEvent clears the flag. A wait that runs in the
 * calling thread (NULL stream, or a replay) on an event that is neither set nor queued for
 * recording fails instead of hanging forever.
 */
#include <memory>
#include <mutex>

#include "acl/acl_rt.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {

aclError Event::wait_in_caller(const Deadline& deadline, bool replay) {
    std::unique_lock<std::mutex> lock(m);
    auto satisfied = [&] { return signaled && (replay || pending == 0); };
    auto hopeless = [&] { return !signaled && pending == 0; };  // nothing queued will set it
    if (!deadline.wait(cv, lock, [&] { return satisfied() || hopeless(); })) {
        return fail(ACL_ERROR_RT_WAIT_TIMEOUT, "timed out waiting for event %p", static_cast<void*>(this));
    }
    if (satisfied()) return ACL_SUCCESS;
    return fail(ACL_ERROR_RT_FAILURE,
                "event %p is neither recorded nor queued for recording: waiting for it here would never end",
                static_cast<void*>(this));
}

namespace {

Task event_task(TaskType type, Event* event, const char* api) {
    Task t;
    t.type = type;
    t.api = api;
    t.event = event;
    return t;
}

aclError create_event(aclrtEvent* out, uint32_t flags) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output event pointer is NULL");
    auto event = std::make_unique<Event>();
    event->flags = flags;
    live_handles<Event>().add(event.get());
    *out = event.release();
    return ACL_SUCCESS;
}

aclError issue_event_task(TaskType type, aclrtEvent event_handle, aclrtStream stream_handle, const char* api) {
    Event* event = nullptr;
    Stream* stream = nullptr;
    RETURN_IF_ERROR(resolve(event_handle, "event", &event));
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &stream));
    return submit(stream, event_task(type, event, api));
}

}  // namespace
}  // namespace om2rt

using namespace om2rt;

extern "C" aclError aclrtCreateEvent(aclrtEvent* event) {
    return guarded("aclrtCreateEvent", [&] { return create_event(event, ACL_EVENT_SYNC); });
}

extern "C" aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
    return guarded("aclrtCreateEventWithFlag", [&] { return create_event(event, flag); });
}

extern "C" aclError aclrtDestroyEvent(aclrtEvent event) {
    return guarded("aclrtDestroyEvent", [&]() -> aclError {
        Event* e = nullptr;
        RETURN_IF_ERROR(resolve(event, "event", &e));
        if (!live_handles<Event>().take(e)) return not_live(event, "event");
        e->wait_unreferenced();  // queued tasks still use it (a model RI using it must go first)
        delete e;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    return guarded("aclrtRecordEvent",
                   [&] { return issue_event_task(TaskType::kEventRecord, event, stream, "aclrtRecordEvent"); });
}

extern "C" aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    return guarded("aclrtResetEvent",
                   [&] { return issue_event_task(TaskType::kEventReset, event, stream, "aclrtResetEvent"); });
}

extern "C" aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    return guarded("aclrtStreamWaitEvent",
                   [&] { return issue_event_task(TaskType::kEventWait, event, stream, "aclrtStreamWaitEvent"); });
}

extern "C" aclError aclrtSynchronizeEvent(aclrtEvent event) {
    return guarded("aclrtSynchronizeEvent", [&]() -> aclError {
        Event* e = nullptr;
        RETURN_IF_ERROR(resolve(event, "event", &e));
        e->wait_drained();  // every record issued so far has run (at once if none was issued)
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
    return guarded("aclrtQueryEventStatus", [&]() -> aclError {
        Event* e = nullptr;
        RETURN_IF_ERROR(resolve(event, "event", &e));
        if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "status is NULL");
        *status = e->complete() ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
        return ACL_SUCCESS;
    });
}

