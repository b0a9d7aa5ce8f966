/*
 * base.h -- what every part of om2gen's CPU ACL runtime stands on: error reporting, handle
 * checks, process-wide singletons, deadlines and thread start. Private to runtime_abi/src/acl_rt/.
 *
 * The runtime implements the ACL subset declared in acl/acl_base.h, acl/acl_rt.h and
 * acl/acl_prof.h, plus the vendor extensions of om2/om2_cpu_runtime.h, on the CPU: the "device"
 * is the host. Each .cpp of this directory holds one subject (memory, streams, events, kernel
 * binaries, the launch pool, model RI capture and replay, labels, ...) and says at its top what
 * it implements and how that differs from, or follows, Ascend.
 *
 * Nothing here runs at load time: all state is created on first use, and the threads it starts
 * block all asynchronous signals so that a host process (Python) keeps receiving them.
 * errors.cpp says how a failure is reported.
 *
 * Everything here is in namespace om2rt with hidden visibility: the runtime is split over several
 * translation units, which must share these names, but the Python extension (and any program
 * linked with -rdynamic) exports only the extern "C" ACL functions, never the runtime's C++
 * internals.
 */
#ifndef OM2_ACL_RT_BASE_H
#define OM2_ACL_RT_BASE_H

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "acl/acl_base.h"
#include "om2/om2_kernel.h"

namespace om2rt __attribute__((visibility("hidden"))) {

using Clock = std::chrono::steady_clock;

/* Leaked on purpose: process-wide state must outlive threads that may still run while static
 * destructors execute at exit, and a function-local static is created on first use only. */
template <typename T>
T& leaked_singleton() {
    static T* instance = new T();
    return *instance;
}

// =============================================================================================
// Error reporting (errors.cpp)
// =============================================================================================

constexpr size_t kMsgCap = 2048;  // a thread's unread messages, and a stream's first error

/* Puts `text` on top of this thread's unread messages, dropping the oldest text when full. */
void push_message(const char* text) noexcept;

/* Records "<api>: <reason> (error <code>)" for the calling thread and returns `code`. */
__attribute__((format(printf, 2, 3))) aclError fail(aclError code, const char* fmt, ...) noexcept;

/* This thread's unread messages, newest first (NULL if none), and forgets them. */
const char* take_messages() noexcept;

const char* errno_text(int err, char* buf, size_t cap) noexcept;

/* Names the API this thread is executing, for the messages fail() records, until it ends. */
class ApiScope {
  public:
    explicit ApiScope(const char* api) noexcept;
    ~ApiScope();
    ApiScope(const ApiScope&) = delete;
    ApiScope& operator=(const ApiScope&) = delete;

  private:
    const char* prev_;
};

/* Maps the exception being handled to an aclError (and a message). Call only in a catch. */
aclError error_from_current_exception() noexcept;

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

/* The error for a tracked handle that is not live (resolve(), and a destroy that lost a race). */
inline aclError not_live(void* handle, const char* what) noexcept {
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
// Deadlines
// =============================================================================================

/*
 * Timeouts (aclrtSynchronizeStreamWithTimeout, aclmdlRIExecute) are -1 (forever) or a
 * positive number of milliseconds, as documented for ACL; 0 and other negative values are
 * ACL_ERROR_INVALID_PARAM. aclmdlRIExecute checks its deadline before every task, jumps
 * included, so a model that loops forever ends with ACL_ERROR_RT_WAIT_TIMEOUT; a kernel that
 * never returns is not interrupted, and aclmdlRIExecuteAsync (like a timeout of -1) sets no
 * limit: a model that never exits blocks its stream forever.
 */
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
inline aclError parse_timeout(int32_t ms, Deadline* out) {
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
// Threads
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

// =============================================================================================
// What one part offers the others
// =============================================================================================

/* memory.cpp: fails unless `size` bytes at `args` lie inside one live aclrtMalloc block. */
aclError check_launch_args(const void* args, size_t size);

/* kernel_pool.cpp: runs the blocks of one launch on the kernel pool (threads: the count it was
 * issued with, 0 = T) and counts it for om2rtGetLaunchCount once it ran. */
aclError execute_launch(Om2KernelEntry entry, const void* args, uint32_t num_blocks, uint32_t threads);

/* kernel_pool.cpp: stops and joins the pool's workers (they restart at the next launch). */
void stop_kernel_workers();

/* loader.cpp: checks a shared object's ELF structure, then dlopens it from a sealed memfd with
 * RTLD_NOW | extra_flags (RTLD_LOCAL or RTLD_GLOBAL). */
aclError load_shared_object(const void* data, size_t length, void** dl_out, int extra_flags);

}  // namespace om2rt

#endif  /* OM2_ACL_RT_BASE_H */
