/*
 * tasks.cpp -- what a task does when it runs, whoever runs it: a stream's worker thread, the
 * issuing thread (the NULL stream is synchronous) or a model RI's replay. The three differ in
 * how an event wait blocks and whether a record was counted as pending (ExecContext), so one
 * switch serves them all.
 */
#include <cstring>

#include "base.h"
#include "tasks.h"

namespace om2rt {

const char* task_type_name(TaskType type) {
    switch (type) {
        case TaskType::kKernel: return "kernel";
        case TaskType::kMemcpy: return "memcpy";
        case TaskType::kMemset: return "memset";
        case TaskType::kEventRecord: return "event record";
        case TaskType::kEventWait: return "event wait";
        case TaskType::kEventReset: return "event reset";
        case TaskType::kEndGraph: return "end graph";
        case TaskType::kModelExecute: return "model execute";
        case TaskType::kLabelSwitch: return "label switch";
    }
    return "unknown";
}

aclError run_task(const Task& t, const ExecContext& ctx) {
    switch (t.type) {
        case TaskType::kKernel:
            return execute_launch(t.entry, t.args, t.num_blocks, t.threads);
        case TaskType::kMemcpy:
            memmove(t.dst, t.src, t.count);
            return ACL_SUCCESS;
        case TaskType::kMemset:
            memset(t.dst, static_cast<unsigned char>(t.value), t.count);
            return ACL_SUCCESS;
        case TaskType::kEventRecord:
            t.event->complete_record(ctx.mode == WaitMode::kReplay ? ctx.replay_counted : t.counted);
            return ACL_SUCCESS;
        case TaskType::kEventWait:
            if (ctx.mode == WaitMode::kStreamWorker) {
                t.event->wait_on_stream();
                return ACL_SUCCESS;
            }
            return t.event->wait_in_caller(ctx.deadline, ctx.mode == WaitMode::kReplay);
        case TaskType::kEventReset:
            t.event->reset();
            return ACL_SUCCESS;
        case TaskType::kEndGraph:
            return ACL_SUCCESS;
        case TaskType::kModelExecute: {
            const aclError err = replay(*t.model, ExecContext{WaitMode::kReplay, Deadline::never(), true});
            t.model->inflight.fetch_sub(1, std::memory_order_release);
            return err;
        }
        case TaskType::kLabelSwitch:  // replay() follows switches itself; submit() never queues one
            return fail(ACL_ERROR_INTERNAL_ERROR, "a label switch can only run in a model replay");
    }
    return fail(ACL_ERROR_INTERNAL_ERROR, "unknown task type %d", static_cast<int>(t.type));
}

aclError run_task_noexcept(const Task& t, const ExecContext& ctx) noexcept {
    try {
        return run_task(t, ctx);
    } catch (...) {
        return error_from_current_exception();
    }
}

}  // namespace om2rt
