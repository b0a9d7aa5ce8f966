/*
 * model_ri.cpp -- model runtime instances (aclmdlRI): capture (aclmdlRIBuildBegin,
 * aclmdlRIBindStream, aclmdlRIUnbindStream, aclmdlRIEndTask, aclmdlRIBuildEnd), replay
 * (aclmdlRIExecute, aclmdlRIExecuteAsync) and aclmdlRIDestroy.
 *
 * A model runtime instance (aclmdlRI) records the tasks issued to its bound streams while
 * it is being built, and replays them in issue order in one thread (see ModelRI). A stream
 * can be bound to one RI (ACL_STREAM_PERSISTENT is not required); after aclmdlRIBuildEnd,
 * work issued to a still-bound stream fails with ACL_ERROR_RT_MODEL_RUNNING until the
 * stream is unbound or the RI destroyed. Destroying a bound stream unbinds it; the recorded
 * tasks stay valid. aclmdlRIDestroy fails with ACL_ERROR_RT_MODEL_RUNNING while a replay of
 * the RI runs or is queued. Kernel binaries, events and memory that recorded tasks use must
 * outlive the RI. One RI must not be replayed by two threads at once.
 *
 * Label switches recorded into an RI (labels.cpp) are resolved to task indices by
 * aclmdlRIBuildEnd and followed by the replay here.
 */
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "acl/acl_rt.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

aclError require_built(const ModelRI& ri) {
    if (!ri.built.load(std::memory_order_acquire)) {
        return fail(ACL_ERROR_INVALID_PARAM, "model RI %p is still being built (call aclmdlRIBuildEnd first)",
                    static_cast<const void*>(&ri));
    }
    return ACL_SUCCESS;
}

aclError require_building(const ModelRI& ri) {
    if (ri.built.load(std::memory_order_acquire)) {
        return fail(ACL_ERROR_INVALID_PARAM, "the build of model RI %p has already ended", static_cast<const void*>(&ri));
    }
    return ACL_SUCCESS;
}

/* The task at which a label switch continues: labelList[index], read now (an earlier kernel of
 * this replay may have written it), or the last label when index >= the label count. A
 * one-label list (GE's LABEL_GOTO) jumps whatever the index. */
size_t switch_target(const ModelRI& ri, const Task& sw) {
    uint32_t index = 0;
    if (sw.label_count > 1) memcpy(&index, sw.index, sizeof index);  // device memory need not be aligned
    return ri.switch_targets[sw.label_first + std::min<size_t>(index, sw.label_count - 1)];
}

class InflightGuard {
  public:
    explicit InflightGuard(ModelRI& ri) : ri_(ri) { ri_.inflight.fetch_add(1, std::memory_order_relaxed); }
    ~InflightGuard() { ri_.inflight.fetch_sub(1, std::memory_order_release); }
    InflightGuard(const InflightGuard&) = delete;
    InflightGuard& operator=(const InflightGuard&) = delete;

  private:
    ModelRI& ri_;
};

void erase_stream(std::vector<Stream*>& streams, const Stream* s) {
    streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
}

}  // namespace

std::mutex& bind_mutex() { return leaked_singleton<std::mutex>(); }

aclError ModelRI::check_open_locked(const Stream& stream) const {
    if (built.load(std::memory_order_acquire)) {
        return fail(ACL_ERROR_RT_MODEL_RUNNING,
                    "stream %p is bound to model RI %p whose build has ended; unbind it to issue work to it",
                    static_cast<const void*>(&stream), static_cast<const void*>(this));
    }
    if (has_ended(stream)) {
        return fail(ACL_ERROR_INVALID_PARAM, "stream %p already has its end task in model RI %p",
                    static_cast<const void*>(&stream), static_cast<const void*>(this));
    }
    return ACL_SUCCESS;
}

aclError ModelRI::record(const Stream& stream, const Task& task) {
    std::lock_guard<std::mutex> lock(m);
    RETURN_IF_ERROR(check_open_locked(stream));
    tasks.push_back(task);
    return ACL_SUCCESS;
}

aclError ModelRI::set_label(const Stream& stream, const Label& label) {
    std::lock_guard<std::mutex> lock(m);
    RETURN_IF_ERROR(check_open_locked(stream));
    const auto inserted = label_sites.emplace(label.id, LabelSite{tasks.size(), &stream});
    if (!inserted.second) {
        return fail(ACL_ERROR_INVALID_PARAM, "label %p is already set in model RI %p (before task %zu)",
                    static_cast<const void*>(&label), static_cast<void*>(this), inserted.first->second.position);
    }
    return ACL_SUCCESS;
}

aclError ModelRI::record_switch(const Stream& stream, const Task& task, const LabelList& list) {
    std::lock_guard<std::mutex> lock(m);
    RETURN_IF_ERROR(check_open_locked(stream));
    Task t = task;
    t.label_first = switch_refs.size();
    t.label_count = list.labels.size();
    const size_t sites_before = switch_sites.size();
    try {  // all three tables grow, or none
        switch_refs.insert(switch_refs.end(), list.labels.begin(), list.labels.end());
        switch_sites.push_back(SwitchSite{tasks.size(), &stream});
        tasks.push_back(t);
    } catch (...) {
        switch_refs.resize(t.label_first);
        switch_sites.resize(sites_before);
        throw;
    }
    return ACL_SUCCESS;
}

/* Resolves every switch target to a task index (m held); fails if a target label was not set
 * in this RI or was set on another stream. */
aclError ModelRI::resolve_labels_locked() {
    std::vector<size_t> targets(switch_refs.size());
    for (const SwitchSite& site : switch_sites) {
        const Task& sw = tasks[site.task];
        for (size_t k = sw.label_first; k < sw.label_first + sw.label_count; ++k) {
            const LabelRef& ref = switch_refs[k];
            const auto it = label_sites.find(ref.id);
            if (it == label_sites.end()) {
                return fail(ACL_ERROR_INVALID_PARAM,
                            "the label switch at task %zu (stream %p) targets label %p (entry %zu of its list), "
                            "which was never set in model RI %p (aclrtSetLabel)",
                            site.task, static_cast<const void*>(site.stream), ref.handle, k - sw.label_first,
                            static_cast<void*>(this));
            }
            if (it->second.stream != site.stream) {
                return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                            "the label switch at task %zu (stream %p) targets label %p, which was set on stream "
                            "%p: jumps between streams are not supported",
                            site.task, static_cast<const void*>(site.stream), ref.handle,
                            static_cast<const void*>(it->second.stream));
            }
            targets[k] = it->second.position;
        }
    }
    switch_targets.swap(targets);
    return ACL_SUCCESS;
}

aclError ModelRI::end_task(const Stream& stream) {
    Task end;
    end.type = TaskType::kEndGraph;
    end.api = "aclmdlRIEndTask";
    RETURN_IF_ERROR(record(stream, end));
    std::lock_guard<std::mutex> lock(m);
    ended.push_back(const_cast<Stream*>(&stream));
    return ACL_SUCCESS;
}

aclError ModelRI::finish_build() {
    std::lock_guard<std::mutex> lock(m);
    if (built.load(std::memory_order_acquire)) {
        return fail(ACL_ERROR_INVALID_PARAM, "the build of model RI %p has already ended", static_cast<void*>(this));
    }
    RETURN_IF_ERROR(resolve_labels_locked());
    recorded_events.clear();
    for (const Task& task : tasks) {
        if (task.type == TaskType::kEventRecord) recorded_events.push_back(task.event);
    }
    record_ran.assign(!switch_sites.empty() && !recorded_events.empty() ? tasks.size() : 0, 0);
    std::unordered_map<uint64_t, LabelSite>().swap(label_sites);  // build-only tables
    std::vector<SwitchSite>().swap(switch_sites);
    std::vector<LabelRef>().swap(switch_refs);
    tasks.shrink_to_fit();
    built.store(true, std::memory_order_release);
    return ACL_SUCCESS;
}

/* Replays a built model RI from its first task, following label switches, until it runs past
 * the last task; stops at the first failing task. The deadline is checked before every task,
 * so a model that loops forever ends at the timeout. */
aclError replay(ModelRI& ri, const ExecContext& ctx) {
    const size_t n = ri.tasks.size();
    const bool track_records = ctx.replay_counted && !ri.record_ran.empty();
    if (track_records) std::fill(ri.record_ran.begin(), ri.record_ran.end(), uint8_t{0});
    aclError err = ACL_SUCCESS;
    size_t i = 0;
    while (i < n) {
        if (ctx.deadline.expired()) {
            err = fail(ACL_ERROR_RT_WAIT_TIMEOUT, "model RI %p timed out before task %zu of %zu",
                       static_cast<void*>(&ri), i, n);
            break;
        }
        const Task& task = ri.tasks[i];
        if (task.type == TaskType::kLabelSwitch) {
            i = switch_target(ri, task);
            continue;
        }
        if (track_records && task.type == TaskType::kEventRecord) {
            // Only the first run of a record task settles what the enqueue counted.
            const bool first_run = ri.record_ran[i] == 0;
            ri.record_ran[i] = 1;
            err = run_task_noexcept(task, ExecContext{ctx.mode, ctx.deadline, first_run});
        } else {
            err = run_task_noexcept(task, ctx);
        }
        if (err != ACL_SUCCESS) {
            fail(err, "model RI %p: task %zu of %zu (%s) failed", static_cast<void*>(&ri), i, n,
                 task_type_name(task.type));
            ++i;
            break;
        }
        ++i;
    }
    if (ctx.replay_counted) {  // records that did not run must not stay pending forever
        if (track_records) {
            for (size_t j = 0; j < n; ++j) {
                if (ri.tasks[j].type == TaskType::kEventRecord && ri.record_ran[j] == 0) {
                    ri.tasks[j].event->drop_pending();
                }
            }
        } else {  // no jumps or no records: the records from i on are exactly those that did not run
            for (; i < n; ++i) {
                if (ri.tasks[i].type == TaskType::kEventRecord) ri.tasks[i].event->drop_pending();
            }
        }
    }
    return err;
}

void unbind_locked(ModelRI& ri, Stream& s) {
    {
        std::lock_guard<std::mutex> stream_lock(s.m);
        s.bound = nullptr;
    }
    erase_stream(ri.streams, &s);
    std::lock_guard<std::mutex> ri_lock(ri.m);
    erase_stream(ri.ended, &s);
}

}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// model runtime instance
// =============================================================================================

extern "C" aclError aclmdlRIBuildBegin(aclmdlRI* modelRI, uint32_t flag) {
    (void)flag;  // reserved (GE passes 0)
    return guarded("aclmdlRIBuildBegin", [&]() -> aclError {
        if (modelRI == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "modelRI is NULL");
        *modelRI = new ModelRI();
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag) {
    return guarded("aclmdlRIBindStream", [&]() -> aclError {
        ModelRI* ri = nullptr;
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        if (stream == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the default (NULL) stream cannot be bound");
        RETURN_IF_ERROR(resolve(stream, "stream", &s));
        if (flag != ACL_MODEL_STREAM_FLAG_HEAD && flag != ACL_MODEL_STREAM_FLAG_DEFAULT) {
            return fail(ACL_ERROR_INVALID_PARAM, "flag 0x%x is not an ACL_MODEL_STREAM_FLAG_* value", flag);
        }
        RETURN_IF_ERROR(require_building(*ri));
        std::lock_guard<std::mutex> lock(bind_mutex());
        if (s->bound != nullptr) {
            return fail(ACL_ERROR_INVALID_PARAM, "stream %p is already bound to model RI %p", stream,
                        static_cast<void*>(s->bound));
        }
        ri->streams.push_back(s);
        std::lock_guard<std::mutex> stream_lock(s->m);
        s->bound = ri;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream) {
    return guarded("aclmdlRIUnbindStream", [&]() -> aclError {
        ModelRI* ri = nullptr;
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        RETURN_IF_ERROR(resolve(stream, "stream", &s));
        std::lock_guard<std::mutex> lock(bind_mutex());
        if (s->bound != ri) return fail(ACL_ERROR_INVALID_PARAM, "stream %p is not bound to model RI %p", stream, modelRI);
        unbind_locked(*ri, *s);
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream) {
    return guarded("aclmdlRIEndTask", [&]() -> aclError {
        ModelRI* ri = nullptr;
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        RETURN_IF_ERROR(resolve(stream, "stream", &s));
        std::lock_guard<std::mutex> stream_lock(s->m);
        if (s->bound != ri) return fail(ACL_ERROR_INVALID_PARAM, "stream %p is not bound to model RI %p", stream, modelRI);
        return ri->end_task(*s);
    });
}

extern "C" aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void* reserve) {
    (void)reserve;  // reserved (NULL)
    return guarded("aclmdlRIBuildEnd", [&]() -> aclError {
        ModelRI* ri = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        return ri->finish_build();
    });
}

extern "C" aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout) {
    return guarded("aclmdlRIExecute", [&]() -> aclError {
        ModelRI* ri = nullptr;
        Deadline deadline;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        RETURN_IF_ERROR(parse_timeout(timeout, &deadline));
        RETURN_IF_ERROR(require_built(*ri));
        InflightGuard inflight(*ri);
        return replay(*ri, ExecContext{WaitMode::kReplay, deadline, false});
    });
}

extern "C" aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    return guarded("aclmdlRIExecuteAsync", [&]() -> aclError {
        ModelRI* ri = nullptr;
        Stream* s = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        RETURN_IF_ERROR(require_built(*ri));
        if (s == nullptr) {  // the default stream is synchronous
            InflightGuard inflight(*ri);
            return replay(*ri, ExecContext{WaitMode::kReplay, Deadline::never(), false});
        }
        Task task;
        task.type = TaskType::kModelExecute;
        task.api = "aclmdlRIExecuteAsync";
        task.model = ri;
        return submit(s, task);
    });
}

extern "C" aclError aclmdlRIDestroy(aclmdlRI modelRI) {
    return guarded("aclmdlRIDestroy", [&]() -> aclError {
        ModelRI* ri = nullptr;
        RETURN_IF_ERROR(resolve(modelRI, "modelRI", &ri));
        if (ri->inflight.load(std::memory_order_acquire) != 0) {
            return fail(ACL_ERROR_RT_MODEL_RUNNING, "model RI %p is executing or queued for execution", modelRI);
        }
        std::lock_guard<std::mutex> lock(bind_mutex());
        while (!ri->streams.empty()) unbind_locked(*ri, *ri->streams.back());
        delete ri;
        return ACL_SUCCESS;
    });
}

