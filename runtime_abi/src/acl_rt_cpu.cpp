/*
 * acl_rt_cpu.cpp -- om2gen's CPU implementation of the ACL runtime subset declared in
 * acl/acl_base.h and acl/acl_rt.h, plus the vendor extensions of om2/om2_cpu_runtime.h.
 *
 * The "device" is the host:
 *   - Device memory is host memory aligned to 64 bytes. aclrtMalloc rounds the size up to a
 *     multiple of 32 and adds 32 bytes, as ACL does; size 0 is valid and returns a unique
 *     32-byte block. Every block is tracked, so freeing a foreign or already freed pointer
 *     fails cleanly instead of corrupting the heap. aclrtMemcpy's kind is checked but the
 *     direction does not matter.
 *   - The default (NULL) stream is synchronous: work issued to it runs in the calling thread
 *     before the call returns. A created stream is a FIFO queue run by its own worker thread
 *     (started at the first task, joined by aclrtDestroyStream, which first drains the queue,
 *     so it blocks while the stream waits for an event that is never recorded).
 *     A failing task does not stop the stream; aclrtSynchronizeStream returns the first error
 *     and clears it.
 *   - Events follow Ascend's flag semantics: aclrtRecordEvent sets the flag when the stream
 *     reaches it, aclrtStreamWaitEvent blocks the stream until the flag is set and no record of
 *     the event is still queued, aclrtResetEvent clears the flag. A wait that runs in the
 *     calling thread (NULL stream, or a replay) on an event that is neither set nor queued for
 *     recording fails instead of hanging forever.
 *   - A kernel binary is an ELF shared object (om2/om2_kernel.h) loaded from memory through a
 *     memfd; nothing touches the disk.
 *   - A launch of N blocks calls the kernel entry for blocks 0..N-1 on a process-wide pool of
 *     T threads (the launching thread plus T-1 workers, see KernelPool). One launch runs at a
 *     time; launches from several streams are serialised. Launching from inside a kernel
 *     (nested launch) is not supported and fails with ACL_ERROR_FEATURE_UNSUPPORTED.
 *   - A model runtime instance (aclmdlRI) records the tasks issued to its bound streams while
 *     it is being built, and replays them in issue order in one thread (see ModelRI). A stream
 *     can be bound to one RI (ACL_STREAM_PERSISTENT is not required); after aclmdlRIBuildEnd,
 *     work issued to a still-bound stream fails with ACL_ERROR_RT_MODEL_RUNNING until the
 *     stream is unbound or the RI destroyed. Destroying a bound stream unbinds it; the recorded
 *     tasks stay valid. aclmdlRIDestroy fails with ACL_ERROR_RT_MODEL_RUNNING while a replay of
 *     the RI runs or is queued. Kernel binaries, events and memory that recorded tasks use must
 *     outlive the RI. One RI must not be replayed by two threads at once.
 *   - Labels give a model RI control flow, like GE's LABEL_SET / LABEL_SWITCH_BY_INDEX /
 *     LABEL_GOTO tasks (see "Labels" below). They exist only in capture: aclrtSetLabel and
 *     aclrtSwitchLabelByIndex on the NULL stream or an unbound stream fail with
 *     ACL_ERROR_FEATURE_UNSUPPORTED. aclrtSetLabel records no task; it marks the position of
 *     the next task recorded in the RI. A switch task reads its uint32 index from device memory
 *     when the replay reaches it (an earlier kernel of the same replay may have written it) and
 *     continues at labelList[index]; an index >= maxValue continues at the last label, as ACL
 *     documents; maxValue must equal the number of labels in the list. A one-label list is an
 *     unconditional jump (GE's LABEL_GOTO). aclmdlRIBuildEnd resolves every target to a task
 *     index (a replay allocates nothing) and fails, leaving the RI under construction, if a
 *     target label was not set in that RI or was set on another stream than the switch's
 *     (the replay runs one issue-ordered task list, so a jump between streams has no faithful
 *     meaning here). Jumps may go backwards (loops); kernels that a jump skips do not run and
 *     are not counted by om2rtGetLaunchCount.
 *   - Timeouts (aclrtSynchronizeStreamWithTimeout, aclmdlRIExecute) are -1 (forever) or a
 *     positive number of milliseconds, as documented for ACL; 0 and other negative values are
 *     ACL_ERROR_INVALID_PARAM. aclmdlRIExecute checks its deadline before every task, jumps
 *     included, so a model that loops forever ends with ACL_ERROR_RT_WAIT_TIMEOUT; a kernel that
 *     never returns is not interrupted, and aclmdlRIExecuteAsync (like a timeout of -1) sets no
 *     limit: a model that never exits blocks its stream forever.
 *   - There is one device, 0. aclrtSetDevice/aclrtResetDevice with another id fail with
 *     ACL_ERROR_INVALID_PARAM; aclrtGetDevice always reports 0. aclInit is optional (every
 *     call initialises what it needs lazily); a second aclInit without aclFinalize returns
 *     ACL_ERROR_REPEAT_INITIALIZE as in ACL. aclFinalize synchronises all streams and stops the
 *     kernel workers (they restart if the process launches again).
 *
 * Every exported function catches all exceptions, returns an aclError and, on failure, records
 * "<function>: <reason> (error <code>)" for aclGetRecentErrMsg (per thread; newest first; read
 * and cleared by aclGetRecentErrMsg, which returns NULL when there is nothing to report).
 *
 * Nothing here runs at load time: all state is created on first use, and the threads it starts
 * block all asynchronous signals so that a host process (Python) keeps receiving them.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "acl/acl_base.h"
#include "acl/acl_prof.h"
#include "acl/acl_rt.h"
#include "om2/om2_cpu_runtime.h"
#include "om2/om2_kernel.h"
#include "om2_elf_image.h"
#include "om2_kernel_image.h"

namespace {

using Clock = std::chrono::steady_clock;

/* Leaked on purpose: process-wide state must outlive threads that may still run while static
 * destructors execute at exit, and a function-local static is created on first use only. */
template <typename T>
T& leaked_singleton() {
    static T* instance = new T();
    return *instance;
}

// =============================================================================================
// Error reporting
// =============================================================================================

constexpr size_t kMsgCap = 2048;

thread_local const char* t_api = "om2 CPU runtime";  // the API this thread is executing
thread_local char t_stack[kMsgCap];                  // unread messages, newest first
thread_local size_t t_stack_len = 0;
thread_local char t_latest[512];                     // the newest message alone
thread_local char t_returned[kMsgCap];               // what aclGetRecentErrMsg handed out

/* Puts `text` on top of this thread's unread messages, dropping the oldest text when full. */
void push_message(const char* text) noexcept {
    char merged[kMsgCap];
    const int n = t_stack_len == 0 ? snprintf(merged, sizeof merged, "%s", text)
                                   : snprintf(merged, sizeof merged, "%s\n%s", text, t_stack);
    t_stack_len = std::min(static_cast<size_t>(std::max(n, 0)), kMsgCap - 1);
    memcpy(t_stack, merged, t_stack_len);
    t_stack[t_stack_len] = '\0';
}

/* Records "<api>: <reason> (error <code>)" for the calling thread and returns `code`. */
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

class ApiScope {
  public:
    explicit ApiScope(const char* api) noexcept : prev_(t_api) { t_api = api; }
    ~ApiScope() { t_api = prev_; }
    ApiScope(const ApiScope&) = delete;
    ApiScope& operator=(const ApiScope&) = delete;

  private:
    const char* prev_;
};

/* Maps the exception being handled to an aclError (and a message). Call only in a catch. */
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

/* The body of every exported function: names the API for messages, catches everything. */
template <typename Body>
aclError guarded(const char* api, Body&& body) noexcept {
    ApiScope scope(api);
    try {
        return body();
    } catch (...) {
        return error_from_current_exception();
    }
}

#define RETURN_IF_ERROR(expr)                    \
    do {                                         \
        const aclError om2_err_ = (expr);        \
        if (om2_err_ != ACL_SUCCESS) return om2_err_; \
    } while (0)

/* The integer a caller passed for an enum. C callers may pass any int, and loading a value
 * outside the enum's range as a C++ enum is undefined, so read the object representation. */
template <typename Enum>
long long enum_value(const Enum& e) noexcept {
    std::underlying_type_t<Enum> raw;
    static_assert(sizeof raw == sizeof e, "an enum has the size of its underlying type");
    memcpy(&raw, &e, sizeof raw);
    return static_cast<long long>(raw);
}

// =============================================================================================
// Handles: every object behind an opaque handle starts with a type tag, cleared when it dies,
// so that a NULL, foreign or destroyed handle fails cleanly in the common cases. Streams and
// events, which host programs hold and pass around, are also looked up among the live handles
// of their kind before anything behind them is read: any other value is an error.
// =============================================================================================

template <uint32_t Tag>
struct Tagged {
    static constexpr uint32_t kTag = Tag;
    static constexpr bool kTracked = false;  // true: live handles are in live_handles<T>() (see below)
    std::atomic<uint32_t> tag{Tag};  // atomic so that the store in the destructor is not elided

    Tagged() = default;
    Tagged(const Tagged&) = delete;
    Tagged& operator=(const Tagged&) = delete;
    ~Tagged() { tag.store(0, std::memory_order_relaxed); }
};

/* The live objects of a tracked kind (streams, events: handles a host program passes around and
 * may make up). resolve() looks a tracked handle up here before it reads anything behind it, so a
 * made-up, foreign or destroyed one is an error, never a wild read. One hash lookup under a
 * mutex held for nothing else. */
template <typename T>
struct LiveHandles {
    std::mutex m;
    std::unordered_set<const void*> all;

    void add(const T* object) {
        std::lock_guard<std::mutex> lock(m);
        all.insert(object);
    }
    bool contains(const void* handle) noexcept {
        try {
            std::lock_guard<std::mutex> lock(m);
            return all.count(handle) != 0;
        } catch (...) {
            return false;  // std::mutex::lock failed
        }
    }
    /* Removes a live handle; false if it is not (or no longer) live, so that of two threads
     * destroying the same handle exactly one goes on. */
    bool take(const void* handle) noexcept {
        try {
            std::lock_guard<std::mutex> lock(m);
            return all.erase(handle) != 0;
        } catch (...) {
            return false;
        }
    }
};

template <typename T>
LiveHandles<T>& live_handles() {
    return leaked_singleton<LiveHandles<T>>();
}

aclError not_live(void* handle, const char* what) noexcept {
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                "%s %p is not a live handle (not created by this runtime, or already destroyed)", what, handle);
}

template <typename T>
aclError resolve(void* handle, const char* what, T** out) noexcept {
    T* object = static_cast<T*>(handle);
    if (object == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s is NULL", what);
    if constexpr (T::kTracked) {
        if (!live_handles<T>().contains(handle)) return not_live(handle, what);
    }
    if (object->tag.load(std::memory_order_relaxed) != T::kTag) {
        return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, "%s %p is not a live handle of that kind", what, handle);
    }
    *out = object;
    return ACL_SUCCESS;
}

// =============================================================================================
// Memory
// =============================================================================================

enum class MemKind { kDevice, kHost };

struct MemBlock {
    size_t size;  // the size asked for (what a launch's args may span)
    MemKind kind;
};

/* Live allocations by address: ordered, so that the block holding an address is one
 * upper_bound away (launch_kernel's args check), without allocating. */
struct MemRegistry {
    std::mutex m;
    std::map<uintptr_t, MemBlock> blocks;
};

constexpr size_t kMemAlign = 64;
constexpr size_t kSizeGranule = 32;  // ACL: the size is rounded up to 32 bytes ...
constexpr size_t kSizePadding = 32;  // ... and 32 bytes are added

const char* mem_kind_api(MemKind kind) { return kind == MemKind::kDevice ? "aclrtMalloc" : "aclrtMallocHost"; }

aclError allocate(void** out, size_t size, MemKind kind) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output pointer is NULL");
    *out = nullptr;
    if (size > SIZE_MAX - kSizeGranule - kSizePadding - kMemAlign) {
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "size %zu is too large", size);
    }
    const size_t bytes = (size + kSizeGranule - 1) / kSizeGranule * kSizeGranule + kSizePadding;
    void* block = nullptr;
    if (posix_memalign(&block, kMemAlign, bytes) != 0) {
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot allocate %zu bytes (size %zu)", bytes, size);
    }
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    try {
        std::lock_guard<std::mutex> lock(reg.m);
        reg.blocks.emplace(reinterpret_cast<uintptr_t>(block), MemBlock{size, kind});
    } catch (...) {
        free(block);
        throw;
    }
    *out = block;
    return ACL_SUCCESS;
}

aclError release(void* block, MemKind kind) {
    if (block == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the pointer is NULL");
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    {
        std::lock_guard<std::mutex> lock(reg.m);
        auto it = reg.blocks.find(reinterpret_cast<uintptr_t>(block));
        if (it == reg.blocks.end()) {
            return fail(ACL_ERROR_INVALID_PARAM, "%p was not allocated by %s or was already freed", block,
                        mem_kind_api(kind));
        }
        if (it->second.kind != kind) {
            return fail(ACL_ERROR_INVALID_PARAM, "%p was allocated by %s; free it with the matching function",
                        block, mem_kind_api(it->second.kind));
        }
        reg.blocks.erase(it);
    }
    free(block);
    return ACL_SUCCESS;
}

/* A kernel's args must be device memory (aclrtMalloc), all `size` bytes inside one live block:
 * a captured launch keeps the pointer and every replay reads through it, so a stack or heap
 * buffer would be garbage by then (om2/custom_op.h). One ordered-map lookup, no allocation; runs
 * when a launch is issued or captured, never at replay. */
aclError check_launch_args(const void* args, size_t size) {
    if (args == nullptr) return ACL_SUCCESS;  // argsSize 0 (checked by the caller)
    const uintptr_t begin = reinterpret_cast<uintptr_t>(args);
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    std::lock_guard<std::mutex> lock(reg.m);
    auto it = reg.blocks.upper_bound(begin);
    if (it != reg.blocks.begin()) {
        --it;
        const uintptr_t offset = begin - it->first;
        if (offset <= it->second.size && size <= it->second.size - offset) {
            if (it->second.kind == MemKind::kDevice) return ACL_SUCCESS;
            return fail(ACL_ERROR_INVALID_PARAM, "argsData %p is host memory from aclrtMallocHost; kernel args must "
                        "be device memory from aclrtMalloc (copy them there with aclrtMemcpy)", args);
        }
        if (offset < it->second.size) {
            return fail(ACL_ERROR_INVALID_PARAM, "argsData %p + argsSize %zu runs past the end of its aclrtMalloc "
                        "block (%zu bytes at offset %zu)", args, size, it->second.size, static_cast<size_t>(offset));
        }
    }
    return fail(ACL_ERROR_INVALID_PARAM, "argsData %p is not device memory: kernel args must live in a buffer from "
                "aclrtMalloc, kept alive while the launch may run or be replayed (a stack or heap buffer is "
                "refused)", args);
}

aclError check_memcpy(void* dst, size_t dest_max, const void* src, size_t count, long long kind) {
    if (dst == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "dst is NULL");
    if (src == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "src is NULL");
    if (count > dest_max) return fail(ACL_ERROR_INVALID_PARAM, "count %zu exceeds destMax %zu", count, dest_max);
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_DEFAULT) {
        return fail(ACL_ERROR_INVALID_PARAM, "kind %lld is not an aclrtMemcpyKind", kind);
    }
    return ACL_SUCCESS;
}

aclError check_memset(void* dst, size_t max_count, size_t count) {
    if (dst == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
    if (count > max_count) return fail(ACL_ERROR_INVALID_PARAM, "count %zu exceeds maxCount %zu", count, max_count);
    return ACL_SUCCESS;
}

// =============================================================================================
// Threads, futexes and spinning
// =============================================================================================

/* Starts a thread with asynchronous signals blocked, so they keep going to the host's threads
 * (Python handles signals in its main thread). Faults stay unblocked: a crashing kernel must
 * reach the host's fault handler. */
template <typename Fn>
std::thread spawn_thread(Fn&& fn) {
    sigset_t blocked, previous;
    sigfillset(&blocked);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&blocked, sig);
    pthread_sigmask(SIG_SETMASK, &blocked, &previous);
    try {
        std::thread thread(std::forward<Fn>(fn));
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        return thread;
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        throw;
    }
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "futex words are std::atomic<uint32_t>");

uint32_t* futex_addr(std::atomic<uint32_t>* word) { return reinterpret_cast<uint32_t*>(word); }

/* Sleeps while *word == expected (returns at once otherwise, or spuriously). */
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
    syscall(SYS_futex, futex_addr(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word, int count) {
    syscall(SYS_futex, futex_addr(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

/* How long a thread polls for work (or completion) before it sleeps. Launches of a replay come
 * within microseconds, but single-block stretches of a model can last a millisecond or more; a
 * worker that slept through one must be woken for the next multi-block launch, and on a VM a
 * halted vCPU takes tens of microseconds to wake (MobileNetV2 on 2 threads: 9.9 ms with a
 * 100 us budget, 5.2-5.5 ms with 2 ms). An idle process has every pool thread asleep after
 * this long. */
constexpr auto kSpinBudget = std::chrono::microseconds(2000);

/* Polls `ready` for up to kSpinBudget; true as soon as it holds. `every_so_often` runs every 64
 * polls (a spinning worker uses it to leave the launcher's CPU, see KernelPool). */
template <typename Ready, typename Hook>
bool spin_until(Ready&& ready, Hook&& every_so_often) {
    const Clock::time_point start = Clock::now();
    for (uint32_t i = 1;; ++i) {
        if (ready()) return true;
        cpu_relax();
        if ((i & 63u) == 0) {
            if (Clock::now() - start > kSpinBudget) return false;
            every_so_often();
        }
    }
}

template <typename Ready>
bool spin_until(Ready&& ready) {
    return spin_until(std::forward<Ready>(ready), [] {});
}

/* The CPUs this thread may run on (its mask when the pool started it). */
struct CpuHome {
    cpu_set_t allowed;
    bool known;

    CpuHome() { known = sched_getaffinity(0, sizeof allowed, &allowed) == 0; }

    /* Moves this thread off `cpu` if it is running there and may run elsewhere: it sets a mask
     * without `cpu` (the kernel migrates the thread before the call returns), then gives the
     * thread its whole mask back (which does not move it). */
    void step_off(int cpu) const {
        if (!known || cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return;
        cpu_set_t elsewhere = allowed;
        CPU_CLR(cpu, &elsewhere);
        if (CPU_COUNT(&elsewhere) == 0) return;
        if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return;
        sched_setaffinity(0, sizeof allowed, &allowed);
    }
};

uint32_t online_cpus() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return static_cast<uint32_t>(std::min<long>(std::max<long>(n, 1), OM2RT_MAX_THREADS));
}

thread_local bool t_in_kernel = false;  // set while this thread runs kernel blocks (pool workers: always)

class InKernelScope {
  public:
    InKernelScope() noexcept : prev_(t_in_kernel) { t_in_kernel = true; }
    ~InKernelScope() { t_in_kernel = prev_; }
    InKernelScope(const InKernelScope&) = delete;
    InKernelScope& operator=(const InKernelScope&) = delete;

  private:
    bool prev_;
};

// =============================================================================================
// KernelPool: runs the blocks of one launch on T threads (the launcher plus T-1 workers).
//
// A launch is published in one atomic word, state_ = seq:32 | limit:16 | active:16:
//   seq    numbers the launches;
//   limit  how many workers may still join this launch (min(workers, blocks - 1); 0 = closed);
//   active how many workers have joined and not yet left.
// A worker joins with a CAS that checks seq and active < limit, then claims block indices from
// the shared counter next_block_ until they run out, then leaves (active - 1). The launcher
// claims blocks too; when none are left it closes the launch (limit = 0) and waits until
// active is 0. After that no worker can touch the launch any more, so the next one can reuse
// the job fields without allocating. A worker that wakes late sees a closed or newer launch and
// does nothing, so a launch never waits for a sleeping thread that has no block to run.
//
// Idle workers poll state_ for kSpinBudget, then sleep on the futex wake_word_; the launcher
// wakes at most `limit` sleepers. A worker never spins or works on the launcher's CPU (the
// launcher publishes it with each launch): Linux may wake a sleeping worker on the CPU of the
// thread that woke it, and on a VM whose idle vCPUs look busy to the guest scheduler (KVM
// reports a halted vCPU as preempted) it often does; the two threads then share one core and
// the launch runs at half the speed of one thread (bert_tiny on 2 threads: 7-8 ms instead of
// 1.9 ms after an idle pause). Such a worker moves itself to another CPU of its mask.
// The launcher itself polls for completion, then sleeps on done_word_, which the last leaving
// worker signals. Sleepers and wakers use sequentially
// consistent operations on (sleepers_, wake_word_, state_) and (caller_sleeping_, done_word_,
// state_), so a wake-up is never lost: either the sleeper sees the new state or the waker sees
// the sleeper.
// =============================================================================================

class KernelPool {
  public:
    // threads: how many threads this launch may use (0 = T); the pool holds enough workers
    // for the largest count any launch asked for (see reserve)
    aclError launch(Om2KernelEntry entry, const void* args, uint32_t num_blocks, uint32_t threads);
    aclError set_thread_count(uint32_t n);
    uint32_t thread_count();
    void reserve(uint32_t threads);
    void stop_workers();

  private:
    struct Job {
        Om2KernelEntry entry = nullptr;
        const void* args = nullptr;
        uint32_t num_blocks = 0;
    };

    static constexpr uint64_t kActiveMask = 0xFFFFu;
    static constexpr unsigned kLimitShift = 16;
    static constexpr uint64_t kLimitMask = uint64_t{0xFFFF} << kLimitShift;
    static constexpr unsigned kSeqShift = 32;
    static_assert(OM2RT_MAX_THREADS <= kActiveMask, "active and limit fields must hold the worker count");

    static uint32_t seq_of(uint64_t w) { return static_cast<uint32_t>(w >> kSeqShift); }
    static uint32_t limit_of(uint64_t w) { return static_cast<uint32_t>((w & kLimitMask) >> kLimitShift); }
    static uint32_t active_of(uint64_t w) { return static_cast<uint32_t>(w & kActiveMask); }

    uint32_t resolved_thread_count_locked();
    void ensure_workers_locked();
    void stop_workers_locked();
    void run_serially(const Job& job);
    void publish(uint32_t limit);
    void run_blocks();
    void close_and_wait();
    void worker_main(uint32_t seen_seq);
    bool wait_for_launch(uint32_t seen_seq, uint32_t* seq, const CpuHome& home);
    bool try_join(uint32_t seq);
    void leave();

    std::mutex launch_mutex_;  // one launch at a time; guards workers_, seq_, job_
    std::vector<std::thread> workers_;
    std::atomic<uint32_t> thread_count_{0};  // T; 0 until decided
    std::atomic<uint32_t> reserved_{0};      // the largest per-launch thread count asked for
    uint32_t seq_ = 0;
    Job job_;
    std::atomic<int> launcher_cpu_{-1};

    alignas(64) std::atomic<uint64_t> state_{0};
    alignas(64) std::atomic<uint64_t> next_block_{0};
    alignas(64) std::atomic<uint32_t> wake_word_{0};
    std::atomic<uint32_t> sleepers_{0};
    std::atomic<bool> stop_{false};
    alignas(64) std::atomic<uint32_t> done_word_{0};
    std::atomic<uint32_t> caller_sleeping_{0};
};

aclError KernelPool::launch(Om2KernelEntry entry, const void* args, uint32_t num_blocks, uint32_t threads) {
    if (t_in_kernel) {
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED, "launching a kernel from inside a kernel is not supported");
    }
    if (num_blocks <= 1 || threads == 1) {  // one thread: no synchronisation at all
        InKernelScope in_kernel;
        for (uint32_t i = 0; i < num_blocks; ++i) entry(args, i, num_blocks);
        return ACL_SUCCESS;
    }
    std::lock_guard<std::mutex> lock(launch_mutex_);
    ensure_workers_locked();
    job_ = Job{entry, args, num_blocks};
    const size_t helpers = threads == 0 ? resolved_thread_count_locked() - 1 : threads - 1;
    const size_t limit = std::min<size_t>(std::min<size_t>(workers_.size(), helpers), num_blocks - 1);
    if (limit == 0) {
        run_serially(job_);
        return ACL_SUCCESS;
    }
    publish(static_cast<uint32_t>(limit));
    run_blocks();
    close_and_wait();
    return ACL_SUCCESS;
}

void KernelPool::run_serially(const Job& job) {
    InKernelScope in_kernel;
    for (uint32_t i = 0; i < job.num_blocks; ++i) job.entry(job.args, i, job.num_blocks);
}

void KernelPool::publish(uint32_t limit) {
    launcher_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
    next_block_.store(0, std::memory_order_relaxed);
    ++seq_;
    state_.store((uint64_t{seq_} << kSeqShift) | (uint64_t{limit} << kLimitShift), std::memory_order_seq_cst);
    wake_word_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) futex_wake(&wake_word_, static_cast<int>(limit));
}

void KernelPool::run_blocks() {
    InKernelScope in_kernel;
    const Job job = job_;
    for (;;) {
        const uint64_t i = next_block_.fetch_add(1, std::memory_order_relaxed);
        if (i >= job.num_blocks) return;
        job.entry(job.args, static_cast<uint32_t>(i), job.num_blocks);
    }
}

void KernelPool::close_and_wait() {
    const uint64_t before = state_.fetch_and(~kLimitMask, std::memory_order_seq_cst);
    if (active_of(before) == 0) return;
    auto drained = [this] { return active_of(state_.load(std::memory_order_seq_cst)) == 0; };
    if (spin_until(drained)) return;
    for (;;) {
        caller_sleeping_.store(1, std::memory_order_seq_cst);
        const uint32_t word = done_word_.load(std::memory_order_seq_cst);
        if (drained()) break;
        futex_wait(&done_word_, word);
    }
    caller_sleeping_.store(0, std::memory_order_relaxed);
}

void KernelPool::worker_main(uint32_t seen_seq) {
    t_in_kernel = true;  // a kernel running on a worker must not launch
    const CpuHome home;
    uint32_t seq = 0;
    while (wait_for_launch(seen_seq, &seq, home)) {
        seen_seq = seq;
        home.step_off(launcher_cpu_.load(std::memory_order_relaxed));
        if (try_join(seq)) {
            run_blocks();
            leave();
        }
    }
}

bool KernelPool::wait_for_launch(uint32_t seen_seq, uint32_t* seq, const CpuHome& home) {
    auto changed = [&] {
        return stop_.load(std::memory_order_seq_cst) || seq_of(state_.load(std::memory_order_seq_cst)) != seen_seq;
    };
    auto leave_launcher_cpu = [&] { home.step_off(launcher_cpu_.load(std::memory_order_relaxed)); };
    if (!spin_until(changed, leave_launcher_cpu)) {
        for (;;) {
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            const uint32_t word = wake_word_.load(std::memory_order_seq_cst);
            const bool ready = changed();
            if (!ready) futex_wait(&wake_word_, word);
            sleepers_.fetch_sub(1, std::memory_order_seq_cst);
            if (ready || changed()) break;
        }
    }
    if (stop_.load(std::memory_order_seq_cst)) return false;
    *seq = seq_of(state_.load(std::memory_order_acquire));
    return true;
}

bool KernelPool::try_join(uint32_t seq) {
    uint64_t w = state_.load(std::memory_order_acquire);
    for (;;) {
        if (seq_of(w) != seq || active_of(w) >= limit_of(w)) return false;
        if (state_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    }
}

void KernelPool::leave() {
    const uint64_t before = state_.fetch_sub(1, std::memory_order_seq_cst);
    const bool last_after_close = active_of(before) == 1 && limit_of(before) == 0;
    if (last_after_close && caller_sleeping_.load(std::memory_order_seq_cst) != 0) {
        done_word_.fetch_add(1, std::memory_order_seq_cst);
        futex_wake(&done_word_, 1);
    }
}

uint32_t KernelPool::resolved_thread_count_locked() {
    uint32_t t = thread_count_.load(std::memory_order_relaxed);
    if (t == 0) {
        t = online_cpus();
        thread_count_.store(t, std::memory_order_relaxed);
    }
    return t;
}

void KernelPool::ensure_workers_locked() {
    const size_t wanted = std::max(resolved_thread_count_locked(), reserved_.load(std::memory_order_relaxed)) - 1;
    if (workers_.size() == wanted) return;
    stop_workers_locked();
    workers_.reserve(wanted);
    try {
        const uint32_t current_seq = seq_;
        for (size_t i = 0; i < wanted; ++i) {
            workers_.push_back(spawn_thread([this, current_seq] { worker_main(current_seq); }));
        }
    } catch (...) {
        stop_workers_locked();
        throw;
    }
}

void KernelPool::stop_workers_locked() {
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_seq_cst);
    wake_word_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&wake_word_, INT_MAX);
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    stop_.store(false, std::memory_order_seq_cst);
}

void KernelPool::stop_workers() {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    stop_workers_locked();
}

aclError KernelPool::set_thread_count(uint32_t n) {
    if (t_in_kernel) return fail(ACL_ERROR_FEATURE_UNSUPPORTED, "cannot resize the kernel pool from inside a kernel");
    if (n > OM2RT_MAX_THREADS) {
        return fail(ACL_ERROR_INVALID_PARAM, "thread count %u exceeds OM2RT_MAX_THREADS (%u)", n, OM2RT_MAX_THREADS);
    }
    const uint32_t t = n == 0 ? online_cpus() : n;
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (t != thread_count_.load(std::memory_order_relaxed)) {
        stop_workers_locked();
        thread_count_.store(t, std::memory_order_relaxed);
    }
    return ACL_SUCCESS;
}

void KernelPool::reserve(uint32_t threads) {
    uint32_t seen = reserved_.load(std::memory_order_relaxed);
    while (threads > seen && !reserved_.compare_exchange_weak(seen, threads, std::memory_order_relaxed)) {
    }
}

uint32_t KernelPool::thread_count() {
    const uint32_t t = thread_count_.load(std::memory_order_relaxed);
    if (t != 0) return t;
    std::lock_guard<std::mutex> lock(launch_mutex_);
    return resolved_thread_count_locked();
}

KernelPool& kernel_pool() { return leaked_singleton<KernelPool>(); }

// The thread count that kernels issued by this thread run with (0: the pool's T). A kernel task
// records it when it is issued, so a captured model replays with the count it was captured with,
// whichever thread replays it (om2rtSetIssueThreadCount).
thread_local uint32_t t_issue_threads = 0;

std::atomic<uint64_t> g_launch_count{0};

// =============================================================================================
// Kernel binaries
// =============================================================================================

struct KernelFunc : Tagged<0x4B46554Eu> {  // "KFUN"
    Om2KernelEntry entry = nullptr;
    std::string name;
};

struct KernelBinary : Tagged<0x4B42494Eu> {  // "KBIN"
    void* dl = nullptr;                // loaded by dlopen, or
    om2_elf::KernelImage image;        // mapped by the light loader (om2_kernel_image.h)
    std::mutex m;
    std::unordered_map<std::string, std::unique_ptr<KernelFunc>> funcs;  // by kernel name
};

struct LoaderState {
    std::mutex m;  // makes "pick a name, dlopen it" atomic with respect to other loads
};

class FdCloser {
  public:
    explicit FdCloser(int fd) : fd_(fd) {}
    ~FdCloser() { close(fd_); }
    FdCloser(const FdCloser&) = delete;
    FdCloser& operator=(const FdCloser&) = delete;

  private:
    int fd_;
};

aclError check_load_options(const aclrtBinaryLoadOptions* options) {
    if (options == nullptr) return ACL_SUCCESS;
    if (options->numOpt > 0 && options->options == nullptr) {
        return fail(ACL_ERROR_INVALID_PARAM, "options->options is NULL but numOpt is %zu", options->numOpt);
    }
    for (size_t i = 0; i < options->numOpt; ++i) {
        const long long type = enum_value(options->options[i].type);
        switch (type) {
            case ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD:
            case ACL_RT_BINARY_LOAD_OPT_MAGIC:
                break;  // meaningful on an NPU only
            case ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE:
                return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                            "ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE (AI CPU kernels) is not supported");
            default:
                return fail(ACL_ERROR_INVALID_PARAM, "option %zu has unknown type %lld", i, type);
        }
    }
    return ACL_SUCCESS;
}

/* The bytes in a memfd, sealed before anything maps them: nothing can change what the loader
 * reads afterwards (F_SEAL_WRITE / SHRINK / GROW, and F_SEAL_SEAL so no seal can be lifted). */
aclError write_memfd(const void* data, size_t length, int* fd_out) {
    char buf[128];
    const int fd = memfd_create("om2_kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return fail(ACL_ERROR_RT_FAILURE, "memfd_create failed: %s", errno_text(errno, buf, sizeof buf));
    const char* p = static_cast<const char*>(data);
    size_t left = length;
    while (left > 0) {
        const ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            close(fd);
            return fail(ACL_ERROR_RT_FAILURE, "writing the binary to a memfd failed: %s", errno_text(err, buf, sizeof buf));
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int err = errno;
        close(fd);
        return fail(ACL_ERROR_RT_FAILURE, "sealing the binary's memfd failed: %s", errno_text(err, buf, sizeof buf));
    }
    *fd_out = fd;
    return ACL_SUCCESS;
}

/* The names of the objects loaded in this process (dl_iterate_phdr walks the loader's list in
 * memory; an RTLD_NOLOAD probe would open each candidate file to compare inodes too). */
std::vector<std::string> loaded_names() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
                static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
            }
            return 0;
        },
        &names);
    return names;
}

/* glibc's dlopen returns an already loaded object whose name equals the requested path without
 * opening the file, and "/proc/self/fd/N" names repeat as soon as fd N is reused (every memfd
 * is closed once mapped, so the next one usually gets the same number): the second binary
 * would silently resolve to the first. So a load takes the shortest free spelling of the path:
 * "/proc/self/fd/N", then the bits of k = 1, 2, ... written as "../fd/" (1) and "./" (0)
 * components, which the kernel resolves to the same memfd. The length grows with the number of
 * libraries loaded at once, not with the loads so far (each component is a procfs lookup). */
std::string unique_fd_path(int fd) {
    const std::vector<std::string> taken = loaded_names();
    const std::string base = "/proc/self/fd/", number = std::to_string(fd);
    for (uint64_t k = 0;; ++k) {
        std::string path = base;
        if (k != 0) {
            for (int bit = 63 - __builtin_clzll(k); bit >= 0; --bit) path += ((k >> bit) & 1u) ? "../fd/" : "./";
        }
        path += number;
        if (std::find(taken.begin(), taken.end(), path) == taken.end()) return path;
    }
}

aclError load_shared_object(const void* data, size_t length, void** dl_out, int extra_flags = RTLD_LOCAL) {
    char why[256];
    if (!om2_elf::CheckSharedObject(data, length, why, sizeof why)) {
        return fail(ACL_ERROR_INVALID_FILE, "refusing a shared object of %zu bytes before loading it: %s", length, why);
    }
    int fd = -1;
    RETURN_IF_ERROR(write_memfd(data, length, &fd));
    FdCloser closer(fd);  // the mapping keeps the memfd alive after dlopen
    LoaderState& loader = leaked_singleton<LoaderState>();
    std::lock_guard<std::mutex> lock(loader.m);
    const std::string path = unique_fd_path(fd);
    void* dl = dlopen(path.c_str(), RTLD_NOW | extra_flags);
    if (dl == nullptr) {
        const char* why = dlerror();
        return fail(ACL_ERROR_INVALID_FILE, "cannot load the kernel binary (%zu bytes): %s", length,
                    why != nullptr ? why : "unknown dlopen error");
    }
    *dl_out = dl;
    return ACL_SUCCESS;
}

/* dlsym on a handle also searches the object's dependencies (libc...): accept only symbols
 * defined by the kernel binary itself. */
bool defined_in(void* dl, void* symbol) {
    struct link_map* object = nullptr;
    struct link_map* owner = nullptr;
    Dl_info info;
    if (dlinfo(dl, RTLD_DI_LINKMAP, &object) != 0) return false;
    if (dladdr1(symbol, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) == 0) return false;
    return owner == object;
}

aclError find_function(KernelBinary& bin, const char* name, KernelFunc** out) {
    std::lock_guard<std::mutex> lock(bin.m);
    auto it = bin.funcs.find(name);
    if (it != bin.funcs.end()) {
        *out = it->second.get();
        return ACL_SUCCESS;
    }
    void* symbol = nullptr;
    if (bin.image.base != nullptr) {
        auto found = bin.image.functions.find(name);
        symbol = found == bin.image.functions.end() ? nullptr : found->second;
    } else {
        symbol = dlsym(bin.dl, name);
        if (symbol != nullptr && !defined_in(bin.dl, symbol)) symbol = nullptr;
    }
    if (symbol == nullptr) {
        return fail(ACL_ERROR_KERNEL_NOT_FOUND, "kernel '%s' is not exported by binary %p", name,
                    static_cast<void*>(&bin));
    }
    auto func = std::make_unique<KernelFunc>();
    func->entry = reinterpret_cast<Om2KernelEntry>(symbol);
    func->name = name;
    *out = func.get();
    bin.funcs.emplace(name, std::move(func));
    return ACL_SUCCESS;
}

aclError check_launch_cfg(const aclrtLaunchKernelCfg* cfg) {
    if (cfg == nullptr) return ACL_SUCCESS;
    if (cfg->numAttrs > 0 && cfg->attrs == nullptr) {
        return fail(ACL_ERROR_INVALID_PARAM, "cfg->attrs is NULL but numAttrs is %zu", cfg->numAttrs);
    }
    for (size_t i = 0; i < cfg->numAttrs; ++i) {  // every known attribute is accepted and ignored
        const long long id = enum_value(cfg->attrs[i].id);
        if (id < ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE || id > ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT) {
            return fail(ACL_ERROR_INVALID_PARAM, "launch attribute %zu has unknown id %lld", i, id);
        }
    }
    return ACL_SUCCESS;
}

// =============================================================================================
// Deadlines
// =============================================================================================

struct Deadline {
    bool forever = true;
    Clock::time_point at{};

    static Deadline never() { return Deadline{}; }
    static Deadline in_ms(int32_t ms) { return Deadline{false, Clock::now() + std::chrono::milliseconds(ms)}; }
    bool expired() const { return !forever && Clock::now() >= at; }

    /* Waits until pred() holds (true) or the deadline passes (false). */
    template <typename Pred>
    bool wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred pred) const {
        if (forever) {
            cv.wait(lock, pred);
            return true;
        }
        return cv.wait_until(lock, at, pred);
    }
};

/* ACL timeouts: -1 waits forever, a positive value is milliseconds; anything else is invalid. */
aclError parse_timeout(int32_t ms, Deadline* out) {
    if (ms == -1) {
        *out = Deadline::never();
    } else if (ms > 0) {
        *out = Deadline::in_ms(ms);
    } else {
        return fail(ACL_ERROR_INVALID_PARAM, "timeout %d is invalid: use -1 (forever) or a positive number of ms", ms);
    }
    return ACL_SUCCESS;
}

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
    aclError wait_in_caller(const Deadline& deadline, bool replay);
    void wait_drained() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return pending == 0; });
    }
    void wait_unreferenced() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return queued == 0; });
    }
};

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

struct ModelRI;

struct Task {
    TaskType type = TaskType::kEndGraph;
    bool counted = false;      // kEventRecord on a stream queue: included in the event's `pending`
    const char* api = "";      // the API that issued it (for messages)
    // kKernel: the args pointer is kept, not the bytes, so a replay reads the current contents.
    Om2KernelEntry entry = nullptr;
    const void* args = nullptr;
    uint32_t num_blocks = 1;
    uint32_t threads = 0;  // the issuing thread's count (t_issue_threads)
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

Task kernel_task(const KernelFunc& func, const void* args, uint32_t num_blocks, const char* api) {
    Task t;
    t.type = TaskType::kKernel;
    t.api = api;
    t.entry = func.entry;
    t.args = args;
    t.num_blocks = num_blocks == 0 ? 1 : num_blocks;
    t.threads = t_issue_threads;
    return t;
}

Task memcpy_task(void* dst, const void* src, size_t count, const char* api) {
    Task t;
    t.type = TaskType::kMemcpy;
    t.api = api;
    t.dst = dst;
    t.src = src;
    t.count = count;
    return t;
}

Task memset_task(void* dst, int value, size_t count, const char* api) {
    Task t;
    t.type = TaskType::kMemset;
    t.api = api;
    t.dst = dst;
    t.value = value;
    t.count = count;
    return t;
}

Task event_task(TaskType type, Event* event, const char* api) {
    Task t;
    t.type = type;
    t.api = api;
    t.event = event;
    return t;
}

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

std::atomic<uint64_t> g_last_label_id{0};

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

struct StreamRegistry {
    std::mutex m;
    std::unordered_set<Stream*> all;
};

/* Guards the stream <-> model RI bindings (Stream::bound, ModelRI::streams).
 * Lock order: bind_mutex() -> Stream::m -> ModelRI::m. */
std::mutex& bind_mutex() { return leaked_singleton<std::mutex>(); }

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

// =============================================================================================
// Running tasks
// =============================================================================================

enum class WaitMode { kStreamWorker, kCaller, kReplay };

struct ExecContext {
    WaitMode mode;
    Deadline deadline;
    bool replay_counted;  // kReplay: records of this replay were counted as pending at enqueue
};

aclError replay(ModelRI& ri, const ExecContext& ctx);

aclError run_task(const Task& t, const ExecContext& ctx) {
    switch (t.type) {
        case TaskType::kKernel: {
            const aclError err = kernel_pool().launch(t.entry, t.args, t.num_blocks, t.threads);
            if (err == ACL_SUCCESS) g_launch_count.fetch_add(1, std::memory_order_relaxed);
            return err;
        }
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

/* The task at which a label switch continues: labelList[index], read now (an earlier kernel of
 * this replay may have written it), or the last label when index >= the label count. A
 * one-label list (GE's LABEL_GOTO) jumps whatever the index. */
size_t switch_target(const ModelRI& ri, const Task& sw) {
    uint32_t index = 0;
    if (sw.label_count > 1) memcpy(&index, sw.index, sizeof index);  // device memory need not be aligned
    return ri.switch_targets[sw.label_first + std::min<size_t>(index, sw.label_count - 1)];
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

class InflightGuard {
  public:
    explicit InflightGuard(ModelRI& ri) : ri_(ri) { ri_.inflight.fetch_add(1, std::memory_order_relaxed); }
    ~InflightGuard() { ri_.inflight.fetch_sub(1, std::memory_order_release); }
    InflightGuard(const InflightGuard&) = delete;
    InflightGuard& operator=(const InflightGuard&) = delete;

  private:
    ModelRI& ri_;
};

// ---- stream queues ----

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

/* Issues a task: runs it now on the NULL stream, records it if the stream is bound to a model
 * RI, queues it otherwise. */
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

void erase_stream(std::vector<Stream*>& streams, const Stream* s) {
    streams.erase(std::remove(streams.begin(), streams.end(), s), streams.end());
}

/* Unbinds `s` from `ri` (bind_mutex() held). */
void unbind_locked(ModelRI& ri, Stream& s) {
    {
        std::lock_guard<std::mutex> stream_lock(s.m);
        s.bound = nullptr;
    }
    erase_stream(ri.streams, &s);
    std::lock_guard<std::mutex> ri_lock(ri.m);
    erase_stream(ri.ended, &s);
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

aclError resolve_stream_or_default(aclrtStream handle, Stream** out) {
    *out = nullptr;
    if (handle == nullptr) return ACL_SUCCESS;  // the default stream
    return resolve(handle, "stream", out);
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

aclError launch_kernel(aclrtFuncHandle func_handle, uint32_t num_blocks, const void* args, size_t args_size,
                       const aclrtLaunchKernelCfg* cfg, aclrtStream stream_handle, const char* api) {
    KernelFunc* func = nullptr;
    Stream* stream = nullptr;
    RETURN_IF_ERROR(resolve(func_handle, "funcHandle", &func));
    if (args == nullptr && args_size != 0) {
        return fail(ACL_ERROR_INVALID_PARAM, "argsData is NULL but argsSize is %zu", args_size);
    }
    RETURN_IF_ERROR(check_launch_args(args, args_size));
    RETURN_IF_ERROR(check_launch_cfg(cfg));
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &stream));
    return submit(stream, kernel_task(*func, args, num_blocks, api));
}

/* Labels exist only in a captured model: the RI that `s` is bound to and being built by (s->m
 * held, or s NULL). */
aclError capturing_model(Stream* s, ModelRI** out) {
    if (s == nullptr) {
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                    "labels exist only in a captured model: the default (NULL) stream cannot be bound to an aclmdlRI");
    }
    if (s->bound == nullptr) {
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                    "labels exist only in a captured model: stream %p is not bound to an aclmdlRI being built",
                    static_cast<void*>(s));
    }
    *out = s->bound;
    return ACL_SUCCESS;
}

aclError set_label(aclrtLabel label_handle, aclrtStream stream_handle) {
    Label* label = nullptr;
    Stream* s = nullptr;
    ModelRI* ri = nullptr;
    RETURN_IF_ERROR(resolve(label_handle, "label", &label));
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &s));
    if (s == nullptr) return capturing_model(s, &ri);
    std::lock_guard<std::mutex> lock(s->m);
    RETURN_IF_ERROR(capturing_model(s, &ri));
    return ri->set_label(*s, *label);
}

aclError switch_label_by_index(void* ptr, uint32_t max_value, aclrtLabelList list_handle, aclrtStream stream_handle) {
    LabelList* list = nullptr;
    Stream* s = nullptr;
    ModelRI* ri = nullptr;
    if (ptr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "ptr (the device address of the uint32 index) is NULL");
    RETURN_IF_ERROR(resolve(list_handle, "labelList", &list));
    if (max_value != list->labels.size()) {
        return fail(ACL_ERROR_INVALID_PARAM, "maxValue %u must be the number of labels in labelList %p (%zu)",
                    max_value, list_handle, list->labels.size());
    }
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &s));
    if (s == nullptr) return capturing_model(s, &ri);
    std::lock_guard<std::mutex> lock(s->m);
    RETURN_IF_ERROR(capturing_model(s, &ri));
    Task task;
    task.type = TaskType::kLabelSwitch;
    task.api = "aclrtSwitchLabelByIndex";
    task.index = ptr;
    return ri->record_switch(*s, task, *list);
}

aclError create_label_list(aclrtLabel* labels, size_t num, aclrtLabelList* out) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output label list pointer is NULL");
    *out = nullptr;
    if (labels == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "labels is NULL");
    if (num == 0 || num > UINT32_MAX) {
        return fail(ACL_ERROR_INVALID_PARAM, "num %zu is invalid: a label list holds 1 to %u labels", num, UINT32_MAX);
    }
    auto list = std::make_unique<LabelList>();
    list->labels.reserve(num);
    for (size_t i = 0; i < num; ++i) {
        Label* label = nullptr;
        const aclError err = resolve(labels[i], "label", &label);
        if (err != ACL_SUCCESS) return fail(err, "labels[%zu] is not a live label", i);
        list->labels.push_back(LabelRef{label->id, label});
    }
    *out = list.release();
    return ACL_SUCCESS;
}

// =============================================================================================
// Init state
// =============================================================================================

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

extern "C" const char* aclGetRecentErrMsg(void) { return take_messages(); }

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
        kernel_pool().stop_workers();
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

// =============================================================================================
// memory
// =============================================================================================

extern "C" aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    (void)policy;  // every policy gets ordinary host memory
    return guarded("aclrtMalloc", [&] { return allocate(devPtr, size, MemKind::kDevice); });
}

extern "C" aclError aclrtFree(void* devPtr) {
    return guarded("aclrtFree", [&] { return release(devPtr, MemKind::kDevice); });
}

extern "C" aclError aclrtMallocHost(void** hostPtr, size_t size) {
    return guarded("aclrtMallocHost", [&] { return allocate(hostPtr, size, MemKind::kHost); });
}

extern "C" aclError aclrtFreeHost(void* hostPtr) {
    return guarded("aclrtFreeHost", [&] { return release(hostPtr, MemKind::kHost); });
}

extern "C" aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
    return guarded("aclrtMemcpy", [&]() -> aclError {
        RETURN_IF_ERROR(check_memcpy(dst, destMax, src, count, enum_value(kind)));
        memmove(dst, src, count);
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                                     aclrtMemcpyKind kind, aclrtStream stream) {
    return guarded("aclrtMemcpyAsync", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(check_memcpy(dst, destMax, src, count, enum_value(kind)));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return submit(s, memcpy_task(dst, src, count, "aclrtMemcpyAsync"));
    });
}

extern "C" aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
    return guarded("aclrtMemset", [&]() -> aclError {
        RETURN_IF_ERROR(check_memset(devPtr, maxCount, count));
        memset(devPtr, static_cast<unsigned char>(value), count);
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                                     aclrtStream stream) {
    return guarded("aclrtMemsetAsync", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(check_memset(devPtr, maxCount, count));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return submit(s, memset_task(devPtr, value, count, "aclrtMemsetAsync"));
    });
}

// =============================================================================================
// streams and events
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

// =============================================================================================
// kernel binaries and launch
// =============================================================================================

extern "C" aclError aclrtBinaryLoadFromData(const void* data, size_t length, const aclrtBinaryLoadOptions* options,
                                            aclrtBinHandle* binHandle) {
    return guarded("aclrtBinaryLoadFromData", [&]() -> aclError {
        if (binHandle == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "binHandle is NULL");
        if (data == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "data is NULL");
        if (length < SELFMAG || memcmp(data, ELFMAG, SELFMAG) != 0) {
            return fail(ACL_ERROR_INVALID_PARAM, "data (%zu bytes) is not an ELF kernel binary (no ELF magic)", length);
        }
        RETURN_IF_ERROR(check_load_options(options));
        auto bin = std::make_unique<KernelBinary>();
        char why[256];
        if (!om2_elf::CheckSharedObject(data, length, why, sizeof why)) {
            return fail(ACL_ERROR_INVALID_FILE, "refusing a kernel binary of %zu bytes before loading it: %s", length, why);
        }
        /* a plain kernel is mapped without the dynamic loader; one that needs it is dlopen'ed */
        const om2_elf::MapResult mapped = om2_elf::LightLoaderEnabled()
                                              ? om2_elf::MapKernel(data, length, &bin->image, why, sizeof why)
                                              : om2_elf::MapResult::kDeclined;
        if (mapped == om2_elf::MapResult::kFailed) {
            return fail(ACL_ERROR_BAD_ALLOC, "cannot map a kernel binary of %zu bytes: %s", length, why);
        }
        if (mapped == om2_elf::MapResult::kDeclined) RETURN_IF_ERROR(load_shared_object(data, length, &bin->dl));
        *binHandle = bin.release();
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName,
                                           aclrtFuncHandle* funcHandle) {
    return guarded("aclrtBinaryGetFunction", [&]() -> aclError {
        KernelBinary* bin = nullptr;
        KernelFunc* func = nullptr;
        RETURN_IF_ERROR(resolve(binHandle, "binHandle", &bin));
        if (kernelName == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "kernelName is NULL");
        if (funcHandle == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "funcHandle is NULL");
        RETURN_IF_ERROR(find_function(*bin, kernelName, &func));
        *funcHandle = func;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
    return guarded("aclrtBinaryUnLoad", [&]() -> aclError {
        KernelBinary* bin = nullptr;
        RETURN_IF_ERROR(resolve(binHandle, "binHandle", &bin));
        if (bin->image.base != nullptr) {
            om2_elf::UnmapKernel(&bin->image);
            delete bin;
            return ACL_SUCCESS;
        }
        const bool closed = dlclose(bin->dl) == 0;
        const char* why = closed ? nullptr : dlerror();
        delete bin;  // the handle is gone either way
        if (!closed) return fail(ACL_ERROR_RT_FAILURE, "dlclose failed: %s", why != nullptr ? why : "unknown error");
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                      size_t argsSize, aclrtStream stream) {
    return guarded("aclrtLaunchKernel", [&] {
        return launch_kernel(funcHandle, numBlocks, argsData, argsSize, nullptr, stream, "aclrtLaunchKernel");
    });
}

extern "C" aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                        size_t argsSize, aclrtLaunchKernelCfg* cfg, aclrtStream stream) {
    return guarded("aclrtLaunchKernelV2", [&] {
        return launch_kernel(funcHandle, numBlocks, argsData, argsSize, cfg, stream, "aclrtLaunchKernelV2");
    });
}

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

// =============================================================================================
// labels
// =============================================================================================

extern "C" aclError aclrtCreateLabel(aclrtLabel* label) {
    return guarded("aclrtCreateLabel", [&]() -> aclError {
        if (label == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output label pointer is NULL");
        auto created = std::make_unique<Label>();
        created->id = g_last_label_id.fetch_add(1, std::memory_order_relaxed) + 1;
        *label = created.release();
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtDestroyLabel(aclrtLabel label) {
    return guarded("aclrtDestroyLabel", [&]() -> aclError {
        Label* l = nullptr;
        RETURN_IF_ERROR(resolve(label, "label", &l));
        delete l;  // model RIs and label lists keep only its id
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSetLabel(aclrtLabel label, aclrtStream stream) {
    return guarded("aclrtSetLabel", [&] { return set_label(label, stream); });
}

extern "C" aclError aclrtCreateLabelList(aclrtLabel* labels, size_t num, aclrtLabelList* labelList) {
    return guarded("aclrtCreateLabelList", [&] { return create_label_list(labels, num, labelList); });
}

extern "C" aclError aclrtDestroyLabelList(aclrtLabelList labelList) {
    return guarded("aclrtDestroyLabelList", [&]() -> aclError {
        LabelList* list = nullptr;
        RETURN_IF_ERROR(resolve(labelList, "labelList", &list));
        delete list;  // switch tasks copied its label ids
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtSwitchLabelByIndex(void* ptr, uint32_t maxValue, aclrtLabelList labelList,
                                           aclrtStream stream) {
    return guarded("aclrtSwitchLabelByIndex",
                   [&] { return switch_label_by_index(ptr, maxValue, labelList, stream); });
}

// =============================================================================================
// om2_cpu_runtime.h
// =============================================================================================

extern "C" aclError om2rtSetThreadCount(uint32_t n) {
    return guarded("om2rtSetThreadCount", [&] { return kernel_pool().set_thread_count(n); });
}

extern "C" aclError om2rtSetIssueThreadCount(uint32_t n) {
    return guarded("om2rtSetIssueThreadCount", [&] {
        if (n > OM2RT_MAX_THREADS) {
            return fail(ACL_ERROR_INVALID_PARAM, "thread count %u exceeds OM2RT_MAX_THREADS (%u)", n, OM2RT_MAX_THREADS);
        }
        kernel_pool().reserve(n);
        t_issue_threads = n;
        return ACL_SUCCESS;
    });
}

extern "C" uint32_t om2rtGetIssueThreadCount(void) { return t_issue_threads; }

extern "C" uint32_t om2rtGetThreadCount(void) {
    try {
        return kernel_pool().thread_count();
    } catch (...) {
        return 1;
    }
}

extern "C" uint64_t om2rtGetLaunchCount(void) { return g_launch_count.load(std::memory_order_relaxed); }

extern "C" uint64_t om2rtGetLiveAllocationCount(void) {
    try {
        MemRegistry& reg = leaked_singleton<MemRegistry>();
        std::lock_guard<std::mutex> lock(reg.m);
        return reg.blocks.size();
    } catch (...) {
        return 0;
    }
}

/* Vendor extension (om2_cpu_runtime.h): the same in-memory loader for the executor's shared
 * objects (model libraries, custom-operator libraries). */
extern "C" ACL_FUNC_VISIBILITY aclError om2rtLoadSharedObjectFromMemory(const void* data, size_t length, int global,
                                                                        void** handle) {
    try {
        if (data == nullptr || length == 0 || handle == nullptr) {
            return fail(ACL_ERROR_INVALID_PARAM, "om2rtLoadSharedObjectFromMemory: null data, zero length or null handle");
        }
        *handle = nullptr;
        return load_shared_object(data, length, handle, global ? RTLD_GLOBAL : RTLD_LOCAL);
    } catch (...) {
        return ACL_ERROR_INTERNAL_ERROR;
    }
}

// =============================================================================================
// profiling marks
// =============================================================================================

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
