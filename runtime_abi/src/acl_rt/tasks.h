/*
 * tasks.h -- the objects the CPU ACL runtime's work is made of and runs on: events, tasks and
 * their queue, labels, streams and model runtime instances (aclmdlRI), and how a task runs.
 * Private to runtime_abi/src/acl_rt/.
 *
 * Streams, events, labels and model RIs meet in every task: a stream queues tasks or, bound to a
 * model RI, has them recorded; a replay runs them and follows label switches; a task may record,
 * wait for or reset an event. So their types are declared together here, and each .cpp defines
 * the calls of one of them (streams.cpp, events.cpp, labels.cpp, model_ri.cpp, tasks.cpp).
 */
#ifndef OM2_ACL_RT_TASKS_H
#define OM2_ACL_RT_TASKS_H

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "acl/acl_rt.h"
#include "base.h"

namespace om2rt __attribute__((visibility("hidden"))) {

// =============================================================================================
// Events
// =============================================================================================

struct Event : Tagged<0x45564E54u> {  // "EVNT"
    static constexpr bool kTracked = true;
    uint32_t flags = 0;
    std::mutex m;
    std::condition_variable cv;
    bool signaled = false;  // recorded (reached by its stream) and not reset since
    uint32_t pending = 0;   // records queued on streams (or in queued replays) and not yet run
    uint32_t queued = 0;    // queued stream tasks of any kind that reference this event

    void on_enqueue(bool is_record) {
        std::lock_guard<std::mutex> lock(m);
        ++queued;
        if (is_record) ++pending;
    }
    void add_pending() {
        std::lock_guard<std::mutex> lock(m);
        ++pending;
    }
    void complete_record(bool counted) {
        std::lock_guard<std::mutex> lock(m);
        signaled = true;
        if (counted) --pending;
        cv.notify_all();
    }
    void drop_pending() {  // a counted record that will never run (its replay stopped early)
        std::lock_guard<std::mutex> lock(m);
        --pending;
        cv.notify_all();
    }
    void on_task_done() {
        std::lock_guard<std::mutex> lock(m);
        --queued;
        cv.notify_all();
    }
    void reset() {
        std::lock_guard<std::mutex> lock(m);
        signaled = false;
        cv.notify_all();  // a caller waiting for a pending record may now have nothing to wait for
    }
    bool complete() {
        std::lock_guard<std::mutex> lock(m);
        return signaled && pending == 0;
    }
    /* A stream worker's wait: the record may still be issued later by another host thread. */
    void wait_on_stream() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return signaled && pending == 0; });
    }
    /* A wait in the calling thread (NULL stream, or a replay). In a replay, records of the same
     * replay that are still ahead are counted in `pending` but must not be waited for: issue
     * order is the execution order there. */
    aclError wait_in_caller(const Deadline& deadline, bool replay);  // events.cpp
    void wait_drained() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return pending == 0; });
    }
    void wait_unreferenced() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return queued == 0; });
    }
};

// =============================================================================================
// Tasks: what a stream queues and what a model RI records.
// =============================================================================================

enum class TaskType : uint8_t {
    kKernel,
    kMemcpy,
    kMemset,
    kEventRecord,
    kEventWait,
    kEventReset,
    kEndGraph,
    kModelExecute,  // aclmdlRIExecuteAsync on a stream; never recorded into a model RI
    kLabelSwitch,   // aclrtSwitchLabelByIndex; only recorded into a model RI, run by its replay
};

const char* task_type_name(TaskType type);

struct ModelRI;

struct Task {
    TaskType type = TaskType::kEndGraph;
    bool counted = false;      // kEventRecord on a stream queue: included in the event's `pending`
    const char* api = "";      // the API that issued it (for messages)
    // kKernel: the args pointer is kept, not the bytes, so a replay reads the current contents.
    Om2KernelEntry entry = nullptr;
    const void* args = nullptr;
    uint32_t num_blocks = 1;
    uint32_t threads = 0;  // the issuing thread's count (om2rtGetIssueThreadCount)
    // kMemcpy / kMemset
    void* dst = nullptr;
    const void* src = nullptr;
    size_t count = 0;
    int value = 0;
    // kEventRecord / kEventWait / kEventReset
    Event* event = nullptr;
    // kModelExecute
    ModelRI* model = nullptr;
    // kLabelSwitch: reads a uint32 index at `index` when it runs; its targets are entries
    // [label_first, label_first + label_count) of its RI's label tables (see ModelRI)
    const void* index = nullptr;
    size_t label_first = 0;
    size_t label_count = 0;
};

/* A FIFO ring of tasks that allocates only when it grows past its largest size so far. */
class TaskQueue {
  public:
    bool empty() const { return size_ == 0; }
    void push(const Task& task) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) % slots_.size()] = task;
        ++size_;
    }
    Task pop() {
        const Task task = slots_[head_];
        head_ = (head_ + 1) % slots_.size();
        --size_;
        return task;
    }

  private:
    void grow() {
        std::vector<Task> bigger(std::max<size_t>(16, slots_.size() * 2));
        for (size_t i = 0; i < size_; ++i) bigger[i] = slots_[(head_ + i) % slots_.size()];
        slots_.swap(bigger);
        head_ = 0;
    }

    std::vector<Task> slots_;
    size_t head_ = 0;
    size_t size_ = 0;
};

// =============================================================================================
// Labels
//
// A label is a process-unique id. A model RI maps the ids of the labels set in it to task
// positions, and a label list is a copy of its labels' ids, so no recorded task refers to a
// label or a label list object: both may be destroyed as soon as the calls using them returned,
// and the same label may be set in several RIs (once in each).
// =============================================================================================

struct LabelRef {
    uint64_t id;
    const void* handle;  // for messages only; never dereferenced
};

struct Label : Tagged<0x4C41424Cu> {  // "LABL"
    uint64_t id = 0;
};

struct LabelList : Tagged<0x4C424C4Cu> {  // "LBLL"
    std::vector<LabelRef> labels;  // at least one
};

// =============================================================================================
// Streams and model runtime instances
// =============================================================================================

struct Stream : Tagged<0x5354524Du> {  // "STRM"
    static constexpr bool kTracked = true;
    uint32_t priority = 0;
    uint32_t flags = 0;
    std::mutex m;
    std::condition_variable work_cv;  // worker: a task was queued, or stop
    std::condition_variable idle_cv;  // synchronisers: unfinished reached 0
    TaskQueue queue;
    size_t unfinished = 0;  // queued + running
    bool stopping = false;
    std::thread worker;  // started with the first queued task
    aclError first_error = ACL_SUCCESS;
    char error_msg[kMsgCap] = {0};  // the failing task's messages, newest first
    ModelRI* bound = nullptr;  // written holding both bind_mutex() and m; read holding either
};

/* Guards the stream <-> model RI bindings (Stream::bound, ModelRI::streams).
 * Lock order: bind_mutex() -> Stream::m -> ModelRI::m. */
std::mutex& bind_mutex();  // model_ri.cpp

/* A model runtime instance. While building, tasks issued to its bound streams are appended to
 * `tasks` (from one host thread, so issue order is a valid execution order across its
 * streams). Execute replays `tasks` in order in the calling thread, following label switches;
 * nothing is allocated.
 *
 * Labels: aclrtSetLabel notes in `label_sites` the index of the next task (tasks.size()). A
 * switch task's targets are entries [label_first, label_first + label_count) of `switch_refs`
 * (label ids, copied from its label list at capture); BuildEnd resolves them into the same
 * entries of `switch_targets` (task indices; tasks.size() = the end of the model) and drops
 * the build-only tables. */
struct ModelRI : Tagged<0x4D445249u> {  // "MDRI"
    struct LabelSite {
        size_t position;       // index of the task that follows the label
        const Stream* stream;  // the stream it was set on (compared, never dereferenced)
    };
    struct SwitchSite {
        size_t task;           // index of the switch task
        const Stream* stream;
    };

    std::mutex m;                        // guards the build: tasks, ended, labels, built transitions
    std::atomic<bool> built{false};
    std::vector<Task> tasks;
    std::vector<Stream*> ended;          // bound streams that got their end-graph task
    std::vector<Stream*> streams;        // bound streams (bind_mutex())
    std::vector<Event*> recorded_events; // one per record task, computed by BuildEnd
    std::atomic<uint32_t> inflight{0};   // running Execute calls + queued/running async replays
    std::unordered_map<uint64_t, LabelSite> label_sites;  // building: label id -> where it was set
    std::vector<SwitchSite> switch_sites;                 // building: the switch tasks
    std::vector<LabelRef> switch_refs;                    // building: the switches' target labels
    std::vector<size_t> switch_targets;                   // built: the switches' target tasks
    /* Built, with switches and event records: which record tasks an asynchronous replay ran.
     * A jump can skip a record task or run it several times, while such a replay counted each
     * record task once as pending when it was queued (replay scratch: one replay at a time). */
    std::vector<uint8_t> record_ran;

    aclError record(const Stream& stream, const Task& task);
    aclError set_label(const Stream& stream, const Label& label);
    aclError record_switch(const Stream& stream, const Task& task, const LabelList& list);
    aclError end_task(const Stream& stream);
    aclError finish_build();
    void on_async_enqueue() {
        inflight.fetch_add(1, std::memory_order_relaxed);
        for (Event* event : recorded_events) event->add_pending();
    }
    bool has_ended(const Stream& stream) const {
        return std::find(ended.begin(), ended.end(), &stream) != ended.end();
    }

  private:
    aclError check_open_locked(const Stream& stream) const;
    aclError resolve_labels_locked();
};

// =============================================================================================
// Running tasks
// =============================================================================================

enum class WaitMode { kStreamWorker, kCaller, kReplay };

struct ExecContext {
    WaitMode mode;
    Deadline deadline;
    bool replay_counted;  // kReplay: records of this replay were counted as pending at enqueue
};

/* tasks.cpp: runs one task in the calling thread (a stream worker, the issuing thread for the
 * NULL stream, or a replay, as ctx.mode says). */
aclError run_task(const Task& t, const ExecContext& ctx);
aclError run_task_noexcept(const Task& t, const ExecContext& ctx) noexcept;

/* model_ri.cpp: replays a built model RI in the calling thread. */
aclError replay(ModelRI& ri, const ExecContext& ctx);

/* model_ri.cpp: unbinds `s` from `ri` (bind_mutex() held). */
void unbind_locked(ModelRI& ri, Stream& s);

/* streams.cpp: issues a task: runs it now on the NULL stream, records it if the stream is bound
 * to a model RI, queues it otherwise. */
aclError submit(Stream* s, const Task& task);

/* streams.cpp: the stream behind a handle; NULL (the default stream) for a NULL handle. */
aclError resolve_stream_or_default(aclrtStream handle, Stream** out);

/* streams.cpp: waits for every created stream; returns the first task error. */
aclError synchronize_all_streams();

}  // namespace om2rt

#endif  /* OM2_ACL_RT_TASKS_H */
