/*
 * streams.cpp -- streams of the CPU ACL runtime: aclrtCreateStream(WithConfig),
 * aclrtDestroyStream, aclrtSynchronizeStream(WithTimeout), and how every task is issued
 * (submit: run now, record into a model RI, or queue).
 *
 * The default (NULL) stream is synchronous: work issued to it runs in the calling thread
 * before the call returns. A created stream is a FIFO queue run by its own worker thread
 * (started at the first task, joined by aclrtDestroyStream, which first drains the queue,
 * so it blocks while the stream waits for an event that is never recorded).
 * A failing task does not stop the stream; aclrtSynchronizeStream returns the first error
 * and clears it.
 */
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "acl/acl_rt.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

struct StreamRegistry {
    std::mutex m;
    std::unordered_set<Stream*> all;
};

/* Keeps the first failing task's messages for the next synchronisation (s.m held), and clears
 * them from the worker thread, where nobody would read them. */
void note_stream_error(Stream& s, aclError err) {
    const char* messages = take_messages();
    if (s.first_error == ACL_SUCCESS) {
        s.first_error = err;
        snprintf(s.error_msg, sizeof s.error_msg, "%s", messages != nullptr ? messages : "(no message)");
    }
}

void stream_worker_main(Stream& s) {
    std::unique_lock<std::mutex> lock(s.m);
    for (;;) {
        s.work_cv.wait(lock, [&s] { return s.stopping || !s.queue.empty(); });
        if (s.queue.empty()) return;  // stopping, and everything ran
        const Task task = s.queue.pop();
        lock.unlock();
        aclError err;
        {
            ApiScope scope(task.api);
            err = run_task_noexcept(task, ExecContext{WaitMode::kStreamWorker, Deadline::never(), false});
        }
        if (task.event != nullptr) task.event->on_task_done();
        lock.lock();
        if (err != ACL_SUCCESS) note_stream_error(s, err);
        if (--s.unfinished == 0) s.idle_cv.notify_all();
    }
}

/* Queues `task` on `s` (s.m held). Accounting happens after the push, which may throw, and
 * before the worker can see the task, since it needs s.m to pop. */
void enqueue_locked(Stream& s, Task task) {
    if (task.type == TaskType::kEventRecord) task.counted = true;
    if (!s.worker.joinable()) {
        Stream* self = &s;
        s.worker = spawn_thread([self] { stream_worker_main(*self); });
    }
    s.queue.push(task);
    ++s.unfinished;
    if (task.event != nullptr) task.event->on_enqueue(task.type == TaskType::kEventRecord);
    if (task.type == TaskType::kModelExecute) task.model->on_async_enqueue();
}

/* Waits until everything queued on `s` ran; returns (and clears) the first task error. */
aclError synchronize_stream(Stream& s, const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(s.m);
    if (!deadline.wait(s.idle_cv, lock, [&s] { return s.unfinished == 0; })) {
        return fail(ACL_ERROR_RT_WAIT_TIMEOUT, "stream %p still has %zu unfinished tasks at the timeout",
                    static_cast<void*>(&s), s.unfinished);
    }
    if (s.first_error == ACL_SUCCESS) return ACL_SUCCESS;
    const aclError err = s.first_error;
    s.first_error = ACL_SUCCESS;
    push_message(s.error_msg);  // the task's own messages, below the summary
    return fail(err, "a task queued on stream %p failed", static_cast<void*>(&s));
}

void destroy_stream(Stream* s) {
    {
        std::lock_guard<std::mutex> lock(bind_mutex());
        if (s->bound != nullptr) unbind_locked(*s->bound, *s);  // recorded tasks stay replayable
    }
    {
        StreamRegistry& reg = leaked_singleton<StreamRegistry>();
        std::lock_guard<std::mutex> lock(reg.m);
        reg.all.erase(s);
    }
    {
        std::unique_lock<std::mutex> lock(s->m);
        s->idle_cv.wait(lock, [s] { return s->unfinished == 0; });
        s->stopping = true;
    }
    s->work_cv.notify_all();
    if (s->worker.joinable()) s->worker.join();
    delete s;
}

aclError create_stream(aclrtStream* out, uint32_t priority, uint32_t flags) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output stream pointer is NULL");
    auto s = std::make_unique<Stream>();
    s->priority = priority;  // accepted for fidelity; the CPU has no stream priorities
    s->flags = flags;
    StreamRegistry& reg = leaked_singleton<StreamRegistry>();
    live_handles<Stream>().add(s.get());  // may throw: nothing refers to s yet
    try {
        std::lock_guard<std::mutex> lock(reg.m);
        reg.all.insert(s.get());
    } catch (...) {
        live_handles<Stream>().take(s.get());
        throw;
    }
    *out = s.release();
    return ACL_SUCCESS;
}

}  // namespace

aclError submit(Stream* s, const Task& task) {
    if (s == nullptr) return run_task(task, ExecContext{WaitMode::kCaller, Deadline::never(), false});
    std::unique_lock<std::mutex> lock(s->m);
    if (s->bound != nullptr) {
        if (task.type == TaskType::kModelExecute) {
            return fail(ACL_ERROR_INVALID_PARAM, "stream %p is bound to model RI %p; execute on an unbound stream",
                        static_cast<void*>(s), static_cast<void*>(s->bound));
        }
        return s->bound->record(*s, task);
    }
    enqueue_locked(*s, task);
    lock.unlock();
    s->work_cv.notify_one();
    return ACL_SUCCESS;
}

aclError synchronize_all_streams() {
    StreamRegistry& reg = leaked_singleton<StreamRegistry>();
    std::lock_guard<std::mutex> lock(reg.m);
    aclError first = ACL_SUCCESS;
    for (Stream* s : reg.all) {
        const aclError err = synchronize_stream(*s, Deadline::never());
        if (first == ACL_SUCCESS) first = err;
    }
    return first;
}

aclError resolve_stream_or_default(aclrtStream handle, Stream** out) {
    *out = nullptr;
    if (handle == nullptr) return ACL_SUCCESS;  // the default stream
    return resolve(handle, "stream", out);
}

}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// streams
// =============================================================================================

extern "C" aclError aclrtCreateStream(aclrtStream* stream) {
    return guarded("aclrtCreateStream", [&] { return create_stream(stream, 0, 0); });
}

extern "C" aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
    return guarded("aclrtCreateStreamWithConfig", [&] { return create_stream(stream, priority, flag); });
}

extern "C" aclError aclrtDestroyStream(aclrtStream stream) {
    return guarded("aclrtDestroyStream", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve(stream, "stream", &s));
        // no longer live from here: later calls with it fail (and of two destroys, one does)
        if (!live_handles<Stream>().take(s)) return not_live(stream, "stream");
        destroy_stream(s);  // drains the queue first; a pending task error is dropped
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSynchronizeStream(aclrtStream stream) {
    return guarded("aclrtSynchronizeStream", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return s == nullptr ? ACL_SUCCESS : synchronize_stream(*s, Deadline::never());
    });
}

extern "C" aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    return guarded("aclrtSynchronizeStreamWithTimeout", [&]() -> aclError {
        Stream* s = nullptr;
        Deadline deadline;
        RETURN_IF_ERROR(parse_timeout(timeout, &deadline));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return s == nullptr ? ACL_SUCCESS : synchronize_stream(*s, deadline);
    });
}

