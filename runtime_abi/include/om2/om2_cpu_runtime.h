/*
 * om2_cpu_runtime.h -- vendor extensions of om2gen's CPU implementation of the ACL runtime
 * subset (runtime_abi/src/acl_rt/).
 *
 * NOT part of AscendCL: a program that calls these functions does not build against a real
 * ACL. Generated model code never calls them; the executor and the tests do (to size the
 * kernel worker pool, and to prove that a replay really launched kernels or that nothing
 * leaked).
 */
#ifndef OM2_OM2_CPU_RUNTIME_H
#define OM2_OM2_CPU_RUNTIME_H

#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Upper bound accepted by om2rtSetThreadCount. */
#define OM2RT_MAX_THREADS 4096u

/* Sets the number of threads T that execute the blocks of a kernel launch: the launching
 * thread plus T-1 persistent workers. n = 0 selects the number of online CPUs (the default).
 * Existing workers are stopped and joined; the new ones start lazily at the next launch with
 * more than one block. Call it while no launch is in flight on another thread (it waits for
 * the running one to finish); calling it from inside a kernel fails. n > OM2RT_MAX_THREADS:
 * ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError om2rtSetThreadCount(uint32_t n);

/* The current T (>= 1). */
ACL_FUNC_VISIBILITY uint32_t om2rtGetThreadCount(void);

/* Sets how many threads the kernels that the calling thread issues from now on run with
 * (n = 0: T, the default). A kernel task keeps the count it was issued with: a model captured
 * (aclmdlRIBuildBegin ... BuildEnd) while n was set replays every kernel on n threads, whichever
 * thread replays it and whatever other models or om2rtSetThreadCount ask for later. The pool
 * grows to the largest n asked for; a launch never uses more threads than it has blocks.
 * The setting is per thread and stays until changed. n > OM2RT_MAX_THREADS:
 * ACL_ERROR_INVALID_PARAM. om2gen.load(..., threads=n) captures each model this way. */
ACL_FUNC_VISIBILITY aclError om2rtSetIssueThreadCount(uint32_t n);

/* The calling thread's issue thread count (0: T). */
ACL_FUNC_VISIBILITY uint32_t om2rtGetIssueThreadCount(void);

/* Kernel launches executed so far by this process, counting each replayed kernel task of an
 * aclmdlRI (not counting launches that were only recorded). */
ACL_FUNC_VISIBILITY uint64_t om2rtGetLaunchCount(void);

/* Blocks currently allocated by aclrtMalloc or aclrtMallocHost and not yet freed. */
ACL_FUNC_VISIBILITY uint64_t om2rtGetLiveAllocationCount(void);

/* Loads a shared object from memory: memfd + dlopen under a path no loaded object has used,
 * so a reused fd number never aliases an earlier library (glibc matches loaded objects by
 * name). Nothing touches the disk. global != 0 selects RTLD_GLOBAL. The executor loads model
 * and custom-operator libraries with it; aclrtBinaryLoadFromData uses it for kernels. */
ACL_FUNC_VISIBILITY aclError om2rtLoadSharedObjectFromMemory(const void *data, size_t length, int global,
                                                            void **handle);

/* A mark recorded by aclprofMarkEx: CLOCK_MONOTONIC nanoseconds and the message. */
typedef struct Om2rtProfMark {
    uint64_t time_ns;
    char msg[128];
} Om2rtProfMark;

/* Moves the marks aclprofMarkEx recorded on the calling thread (oldest first, at most the last
 * OM2RT_MAX_PROF_MARKS) into marks[0, capacity) and forgets them; returns how many it wrote.
 * The executor times GertModelLoad's stages with them (om2gen bench --phases). */
#define OM2RT_MAX_PROF_MARKS 64u
ACL_FUNC_VISIBILITY size_t om2rtTakeProfMarks(Om2rtProfMark *marks, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_CPU_RUNTIME_H */
