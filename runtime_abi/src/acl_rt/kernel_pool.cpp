/*
 * kernel_pool.cpp -- where the blocks of a kernel launch run: the SPMD block pool, and the
 * vendor calls that size it and count its launches (om2rtSetThreadCount, om2rtGetThreadCount,
 * om2rtSetIssueThreadCount, om2rtGetIssueThreadCount, om2rtGetLaunchCount).
 *
 * A launch of N blocks calls the kernel entry for blocks 0..N-1 on a process-wide pool of
 * T threads (the launching thread plus T-1 workers, see KernelPool). One launch runs at a
 * time; launches from several streams are serialised. Launching from inside a kernel
 * (nested launch) is not supported and fails with ACL_ERROR_FEATURE_UNSUPPORTED.
 *
 * aclrtLaunchKernel(V2) itself is in binaries.cpp: it checks the launch and issues it as a task;
 * the task runs here (execute_launch) when its stream, the NULL stream or a replay reaches it.
 */
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>
#include <thread>
#include <vector>

#include "om2/om2_cpu_runtime.h"
#include "base.h"

namespace om2rt {
namespace {

// =============================================================================================
// Futexes and spinning
// =============================================================================================

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

}  // namespace

aclError execute_launch(Om2KernelEntry entry, const void* args, uint32_t num_blocks, uint32_t threads) {
    const aclError err = kernel_pool().launch(entry, args, num_blocks, threads);
    if (err == ACL_SUCCESS) g_launch_count.fetch_add(1, std::memory_order_relaxed);
    return err;
}

void stop_kernel_workers() { kernel_pool().stop_workers(); }

}  // namespace om2rt

using namespace om2rt;

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

