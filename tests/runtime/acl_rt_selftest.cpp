/*
 * acl_rt_selftest.cpp -- self-test of the CPU ACL runtime (runtime_abi/src/acl_rt/).
 *
 * Usage: acl_rt_selftest <kernels.so>
 * The kernel binary is built by tests/runtime/test_acl_rt_cpu.py and exports:
 *   scale_add(x, y, tiling{int64 n; float scale; float pad})  y[i] = x[i] * scale + block_idx
 *   record_blocks(hits, nums)   hits[block_idx] += 1 (atomic); nums[block_idx] = block_num
 *   count_calls(out)            out[0] = calls of this kernel in this loaded copy
 *   copy_u32(dst, src)          dst[0] = src[0] (uint32, block 0 writes)
 *   countdown(counter, index)   counter[0] -= 1; index[0] = counter[0] > 0 ? 0 : 1
 *   record_threads(tids)        tids[block_idx] = pthread_self() of the thread running the block
 * It is read into memory and loaded with aclrtBinaryLoadFromData, as generated code does.
 *
 * Prints "ok: <section>" per section and "PASS: <n> checks" at the end; on the first failed
 * check prints "FAIL: <file>:<line>: <what>" and returns 1.
 */
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "om2/om2_cpu_runtime.h"

namespace {

int g_checks = 0;

struct TestFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] __attribute__((format(printf, 3, 4))) void fail_at(const char* file, int line, const char* fmt, ...) {
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char full[1200];
    snprintf(full, sizeof full, "%s:%d: %s", file, line, what);
    throw TestFailure(full);
}

std::string recent_message() {
    const char* msg = aclGetRecentErrMsg();
    return msg == nullptr ? std::string("(no message)") : std::string(msg);
}

#define CHECK(cond)                                                         \
    do {                                                                    \
        ++g_checks;                                                         \
        if (!(cond)) fail_at(__FILE__, __LINE__, "check failed: %s", #cond); \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        ++g_checks;                                                                                \
        const aclError err_ = (expr);                                                              \
        if (err_ != ACL_SUCCESS) {                                                                 \
            fail_at(__FILE__, __LINE__, "%s returned %d: %s", #expr, err_, recent_message().c_str()); \
        }                                                                                          \
    } while (0)

/* Checks that `expr` fails with `code` and leaves a message naming `api`. */
#define CHECK_ERR(expr, code, api)                                                                    \
    do {                                                                                              \
        ++g_checks;                                                                                   \
        const aclError err_ = (expr);                                                                 \
        if (err_ != (code)) fail_at(__FILE__, __LINE__, "%s returned %d, expected %d", #expr, err_, (int)(code)); \
        const std::string msg_ = recent_message();                                                    \
        if (msg_.find(api) == std::string::npos) {                                                    \
            fail_at(__FILE__, __LINE__, "message of %s does not name %s: %s", #expr, api, msg_.c_str()); \
        }                                                                                             \
    } while (0)

void drain_messages() {
    while (aclGetRecentErrMsg() != nullptr) {
    }
}

void section_done(const char* name) { std::printf("ok: %s\n", name); }

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

/* A block of device memory, freed on scope exit. */
class DevBuf {
  public:
    explicit DevBuf(size_t size) : size_(size) { CHECK_OK(aclrtMalloc(&ptr_, size, ACL_MEM_MALLOC_HUGE_FIRST)); }
    ~DevBuf() {
        if (ptr_ != nullptr) aclrtFree(ptr_);
    }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    template <typename T>
    T* as() const { return static_cast<T*>(ptr_); }
    void* get() const { return ptr_; }
    size_t size() const { return size_; }
    void zero() const { CHECK_OK(aclrtMemset(ptr_, size_, 0, size_)); }

  private:
    void* ptr_ = nullptr;
    size_t size_;
};

struct ScaleTiling {  // must match the kernel's
    int64_t n;
    float scale;
    float pad;
};

/* args of scale_add: {x}{y}{tiling} */
struct ScaleArgs {
    void* x;
    void* y;
    ScaleTiling tiling;
};

/* args of record_blocks: {hits}{nums} */
struct RecordArgs {
    void* hits;
    void* nums;
};

/* args of copy_u32: {dst}{src} */
struct CopyArgs {
    void* dst;
    const void* src;
};

/* args of countdown: {counter}{index} */
struct CountdownArgs {
    void* counter;
    void* index;
};

struct Kernels {
    std::vector<char> image;  // the kernel binary's bytes
    aclrtBinHandle bin = nullptr;
    aclrtFuncHandle scale_add = nullptr;
    aclrtFuncHandle record_blocks = nullptr;
    aclrtFuncHandle count_calls = nullptr;
    aclrtFuncHandle copy_u32 = nullptr;
    aclrtFuncHandle countdown = nullptr;
    aclrtFuncHandle record_threads = nullptr;
};

std::vector<char> read_file(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw TestFailure(std::string("cannot read ") + path);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/* The block of `num` that owns item i under om2_block_range. */
int64_t owner_block(int64_t i, int64_t total, int64_t num) {
    const int64_t base = total / num, rem = total % num;
    const int64_t split = rem * (base + 1);
    return i < split ? i / (base + 1) : rem + (i - split) / base;
}

void check_scale_output(const float* x, const float* y, int64_t n, float scale, int64_t blocks) {
    for (int64_t i = 0; i < n; ++i) {
        const float expected = x[i] * scale + static_cast<float>(owner_block(i, n, blocks));
        if (y[i] != expected) fail_at(__FILE__, __LINE__, "y[%lld] = %g, expected %g", (long long)i, y[i], expected);
    }
    ++g_checks;
}

void check_hits(const uint32_t* hits, const uint32_t* nums, uint32_t launched, uint32_t capacity, uint32_t expect) {
    for (uint32_t i = 0; i < capacity; ++i) {
        const uint32_t want_hits = i < launched ? expect : 0;
        const uint32_t want_num = i < launched ? launched : 0;
        if (hits[i] != want_hits || nums[i] != want_num) {
            fail_at(__FILE__, __LINE__, "block %u of %u: hits %u (want %u), block_num %u (want %u)", i, launched,
                    hits[i], want_hits, nums[i], want_num);
        }
    }
    ++g_checks;
}

// ---------------------------------------------------------------------------------------------

void test_init_and_device() {
    int32_t device = -1;
    CHECK_OK(aclrtGetDevice(&device));  // before aclInit: implicit initialisation
    CHECK(device == 0);
    CHECK_ERR(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE, "aclInit");
    CHECK_OK(aclInit(nullptr));
    CHECK_ERR(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE, "aclInit");
    CHECK_OK(aclrtSetDevice(0));
    CHECK_ERR(aclrtSetDevice(1), ACL_ERROR_INVALID_PARAM, "aclrtSetDevice");
    CHECK_ERR(aclrtGetDevice(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtGetDevice");
    aclrtRunMode mode = ACL_DEVICE;
    CHECK_OK(aclrtGetRunMode(&mode));
    CHECK(mode == ACL_HOST);
    CHECK_OK(aclrtSynchronizeDevice());

    const struct {
        aclDataType type;
        size_t size;
    } sizes[] = {{ACL_FLOAT, 4},  {ACL_FLOAT16, 2}, {ACL_INT8, 1},   {ACL_INT32, 4},     {ACL_UINT8, 1},
                 {ACL_INT16, 2},  {ACL_UINT16, 2},  {ACL_UINT32, 4}, {ACL_INT64, 8},     {ACL_UINT64, 8},
                 {ACL_DOUBLE, 8}, {ACL_BOOL, 1},    {ACL_BF16, 2},   {ACL_COMPLEX64, 8}, {ACL_COMPLEX128, 16}};
    for (const auto& entry : sizes) CHECK(aclDataTypeSize(entry.type) == entry.size);
    CHECK(aclDataTypeSize(ACL_STRING) == 0);
    CHECK(aclDataTypeSize(ACL_DT_UNDEFINED) == 0);
    CHECK(aclGetRecentErrMsg() == nullptr);
    section_done("init and device");
}

void test_error_messages() {
    drain_messages();
    CHECK(aclGetRecentErrMsg() == nullptr);
    CHECK(aclrtFree(nullptr) == ACL_ERROR_INVALID_PARAM);
    const char* msg = aclGetRecentErrMsg();
    CHECK(msg != nullptr && std::strstr(msg, "aclrtFree") != nullptr && std::strstr(msg, "NULL") != nullptr);
    CHECK(aclGetRecentErrMsg() == nullptr);  // reading clears

    char dst[4], src[8] = {0};
    CHECK(aclrtMemcpy(dst, sizeof dst, src, sizeof src, ACL_MEMCPY_HOST_TO_HOST) == ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtSetDevice(7) == ACL_ERROR_INVALID_PARAM);
    const std::string stacked = recent_message();  // newest first
    const size_t newest = stacked.find("aclrtSetDevice"), older = stacked.find("aclrtMemcpy");
    CHECK(newest != std::string::npos && older != std::string::npos && newest < older);
    CHECK(stacked.find("destMax") != std::string::npos);

    std::string from_thread;  // messages are per thread
    std::thread([&] {
        aclrtSetDevice(3);
        from_thread = recent_message();
    }).join();
    CHECK(from_thread.find("aclrtSetDevice") != std::string::npos);
    CHECK(aclGetRecentErrMsg() == nullptr);
    section_done("error messages");
}

void test_memory() {
    const uint64_t live_before = om2rtGetLiveAllocationCount();
    const size_t sizes[] = {0, 1, 31, 32, 33, 1000, 1u << 20};
    std::vector<void*> blocks;
    for (size_t size : sizes) {
        void* p = nullptr;
        CHECK_OK(aclrtMalloc(&p, size, ACL_MEM_MALLOC_NORMAL_ONLY));
        CHECK(p != nullptr && reinterpret_cast<uintptr_t>(p) % 64 == 0);
        std::memset(p, 0xA5, (size + 31) / 32 * 32 + 32);  // the size rounded to 32, plus 32 bytes of padding
        for (void* other : blocks) CHECK(other != p);
        blocks.push_back(p);
    }
    CHECK(om2rtGetLiveAllocationCount() == live_before + blocks.size());
    for (void* p : blocks) CHECK_OK(aclrtFree(p));
    CHECK(om2rtGetLiveAllocationCount() == live_before);

    CHECK_ERR(aclrtFree(blocks[0]), ACL_ERROR_INVALID_PARAM, "aclrtFree");  // double free
    int on_stack = 0;
    CHECK_ERR(aclrtFree(&on_stack), ACL_ERROR_INVALID_PARAM, "aclrtFree");
    CHECK_ERR(aclrtMalloc(nullptr, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "aclrtMalloc");
    void* huge = &on_stack;
    CHECK_ERR(aclrtMalloc(&huge, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc");
    CHECK(huge == nullptr);

    void* host = nullptr;
    void* device = nullptr;
    CHECK_OK(aclrtMallocHost(&host, 100));
    CHECK_OK(aclrtMalloc(&device, 100, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_ERR(aclrtFree(host), ACL_ERROR_INVALID_PARAM, "aclrtMallocHost");
    CHECK_ERR(aclrtFreeHost(device), ACL_ERROR_INVALID_PARAM, "aclrtFreeHost");

    std::memset(host, 7, 100);
    CHECK_OK(aclrtMemcpy(device, 100, host, 100, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(static_cast<unsigned char*>(device)[99] == 7);
    CHECK_ERR(aclrtMemcpy(device, 50, host, 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM, "aclrtMemcpy");
    CHECK_ERR(aclrtMemcpy(nullptr, 100, host, 10, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM, "aclrtMemcpy");
    // 7 lies in the C++ value range of aclrtMemcpyKind (0..7) but is not one of its enumerators here.
    CHECK_ERR(aclrtMemcpy(device, 100, host, 10, static_cast<aclrtMemcpyKind>(7)), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpy");
    CHECK_OK(aclrtMemset(device, 100, 0x3C, 100));
    CHECK(static_cast<unsigned char*>(device)[0] == 0x3C);
    CHECK_ERR(aclrtMemset(device, 10, 0, 11), ACL_ERROR_INVALID_PARAM, "aclrtMemset");
    CHECK_OK(aclrtFreeHost(host));
    CHECK_OK(aclrtFree(device));
    CHECK(om2rtGetLiveAllocationCount() == live_before);
    section_done("memory");
}

aclrtBinHandle load(const std::vector<char>& image) {
    aclrtBinHandle bin = nullptr;
    CHECK_OK(aclrtBinaryLoadFromData(image.data(), image.size(), nullptr, &bin));
    return bin;
}

int call_count_calls(aclrtBinHandle bin) {
    aclrtFuncHandle func = nullptr;
    CHECK_OK(aclrtBinaryGetFunction(bin, "count_calls", &func));
    DevBuf out(sizeof(int)), args(sizeof(void*));
    *args.as<void*>() = out.get();
    CHECK_OK(aclrtLaunchKernel(func, 1, args.get(), sizeof(void*), nullptr));
    return *out.as<int>();
}

void test_binaries(Kernels& k) {
    aclrtBinHandle bin = nullptr;
    const char not_elf[] = "definitely not a shared object";
    CHECK_ERR(aclrtBinaryLoadFromData(not_elf, sizeof not_elf, nullptr, &bin), ACL_ERROR_INVALID_PARAM,
              "aclrtBinaryLoadFromData");
    CHECK(bin == nullptr);
    CHECK_ERR(aclrtBinaryLoadFromData(k.image.data(), 3, nullptr, &bin), ACL_ERROR_INVALID_PARAM, "ELF");
    const std::vector<char> head(k.image.begin(), k.image.begin() + std::min<size_t>(256, k.image.size()));
    CHECK_ERR(aclrtBinaryLoadFromData(head.data(), head.size(), nullptr, &bin), ACL_ERROR_INVALID_FILE,
              "aclrtBinaryLoadFromData");  // an ELF header without the rest
    CHECK_ERR(aclrtBinaryLoadFromData(nullptr, 10, nullptr, &bin), ACL_ERROR_INVALID_PARAM, "data");

    aclrtBinaryLoadOption cpu_mode;
    cpu_mode.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    cpu_mode.value.cpuKernelMode = 2;
    aclrtBinaryLoadOptions cpu_options = {&cpu_mode, 1};
    CHECK_ERR(aclrtBinaryLoadFromData(k.image.data(), k.image.size(), &cpu_options, &bin),
              ACL_ERROR_FEATURE_UNSUPPORTED, "CPU_KERNEL_MODE");

    aclrtBinaryLoadOption npu_opts[2];
    npu_opts[0].type = ACL_RT_BINARY_LOAD_OPT_MAGIC;
    npu_opts[0].value.magic = ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE;
    npu_opts[1].type = ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD;
    npu_opts[1].value.isLazyLoad = 1;
    aclrtBinaryLoadOptions npu_options = {npu_opts, 2};
    CHECK_OK(aclrtBinaryLoadFromData(k.image.data(), k.image.size(), &npu_options, &k.bin));

    CHECK_OK(aclrtBinaryGetFunction(k.bin, "scale_add", &k.scale_add));
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "record_blocks", &k.record_blocks));
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "count_calls", &k.count_calls));
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "copy_u32", &k.copy_u32));
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "countdown", &k.countdown));
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "record_threads", &k.record_threads));
    aclrtFuncHandle again = nullptr;
    CHECK_OK(aclrtBinaryGetFunction(k.bin, "scale_add", &again));
    CHECK(again == k.scale_add);
    aclrtFuncHandle missing = nullptr;
    CHECK_ERR(aclrtBinaryGetFunction(k.bin, "no_such_kernel", &missing), ACL_ERROR_KERNEL_NOT_FOUND, "no_such_kernel");
    CHECK_ERR(aclrtBinaryGetFunction(k.bin, "malloc", &missing), ACL_ERROR_KERNEL_NOT_FOUND, "malloc");  // libc's
    CHECK_ERR(aclrtBinaryGetFunction(nullptr, "scale_add", &missing), ACL_ERROR_INVALID_PARAM,
              "aclrtBinaryGetFunction");
    CHECK_ERR(aclrtBinaryUnLoad(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtBinaryUnLoad");

    // Each load is its own copy of the library, even though the memfd numbers repeat.
    CHECK(call_count_calls(k.bin) == 1);
    CHECK(call_count_calls(k.bin) == 2);
    aclrtBinHandle second = load(k.image);
    CHECK(call_count_calls(second) == 1);
    CHECK_OK(aclrtBinaryUnLoad(second));
    aclrtBinHandle third = load(k.image);
    CHECK(call_count_calls(third) == 1);
    CHECK(call_count_calls(k.bin) == 3);
    CHECK_OK(aclrtBinaryUnLoad(third));
    section_done("kernel binaries");
}

void test_launch_args_checks(const Kernels& k) {
    DevBuf hits(64 * sizeof(uint32_t)), nums(64 * sizeof(uint32_t));
    hits.zero();
    nums.zero();
    RecordArgs host_args{hits.get(), nums.get()};
    DevBuf dev_args(sizeof(RecordArgs));
    *dev_args.as<RecordArgs>() = host_args;
    void* const args = dev_args.get();
    aclrtLaunchKernelAttr attr;
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE;
    attr.value.engineType = ACL_RT_ENGINE_TYPE_AIV;
    aclrtLaunchKernelCfg cfg = {&attr, 1};
    CHECK_OK(aclrtLaunchKernelV2(k.record_blocks, 3, args, sizeof(RecordArgs), &cfg, nullptr));
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), 3, 64, 1);
    attr.id = static_cast<aclrtLaunchKernelAttrId>(0);  // in the enum's value range, not an attribute
    CHECK_ERR(aclrtLaunchKernelV2(k.record_blocks, 3, args, sizeof(RecordArgs), &cfg, nullptr),
              ACL_ERROR_INVALID_PARAM, "aclrtLaunchKernelV2");
    CHECK_ERR(aclrtLaunchKernel(nullptr, 1, args, sizeof(RecordArgs), nullptr), ACL_ERROR_INVALID_PARAM,
              "aclrtLaunchKernel");
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, nullptr, 16, nullptr), ACL_ERROR_INVALID_PARAM, "argsData");
    CHECK_ERR(aclrtLaunchKernel(k.bin, 1, args, sizeof(RecordArgs), nullptr), ACL_ERROR_INVALID_RESOURCE_HANDLE,
              "funcHandle");  // a binary handle is not a function handle

    // args must be device memory from aclrtMalloc, all argsSize bytes inside one block
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, &host_args, sizeof host_args, nullptr), ACL_ERROR_INVALID_PARAM,
              "is not device memory");  // a stack buffer
    CHECK_ERR(aclrtLaunchKernelV2(k.record_blocks, 1, &host_args, sizeof host_args, nullptr, nullptr),
              ACL_ERROR_INVALID_PARAM, "aclrtMalloc");
    std::unique_ptr<RecordArgs> heap(new RecordArgs(host_args));
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, heap.get(), sizeof(RecordArgs), nullptr), ACL_ERROR_INVALID_PARAM,
              "is not device memory");  // a heap buffer
    void* pinned = nullptr;
    CHECK_OK(aclrtMallocHost(&pinned, sizeof(RecordArgs)));
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, pinned, sizeof(RecordArgs), nullptr), ACL_ERROR_INVALID_PARAM,
              "aclrtMallocHost");
    CHECK_OK(aclrtFreeHost(pinned));
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, static_cast<char*>(args) + 8, sizeof(RecordArgs), nullptr),
              ACL_ERROR_INVALID_PARAM, "runs past the end");

    hits.zero();
    nums.zero();
    CHECK_OK(aclrtLaunchKernel(k.record_blocks, 0, args, sizeof(RecordArgs), nullptr));  // 0 blocks run as 1
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), 1, 64, 1);
    section_done("launch argument checks");
}

void test_spmd(const Kernels& k) {
    const uint32_t capacity = 80;
    DevBuf hits(capacity * sizeof(uint32_t)), nums(capacity * sizeof(uint32_t));
    DevBuf args_buf(sizeof(RecordArgs));
    *args_buf.as<RecordArgs>() = RecordArgs{hits.get(), nums.get()};

    const int64_t n = 1000;
    DevBuf x(n * sizeof(float)), y(n * sizeof(float)), scale_args(sizeof(ScaleArgs));
    for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = static_cast<float>(i) * 0.5f;
    *scale_args.as<ScaleArgs>() = ScaleArgs{x.get(), y.get(), ScaleTiling{n, 3.0f, 0.0f}};

    for (uint32_t threads : {1u, 2u, 4u}) {
        CHECK_OK(om2rtSetThreadCount(threads));
        CHECK(om2rtGetThreadCount() == threads);
        for (uint32_t blocks : {1u, 7u, 64u}) {
            hits.zero();
            nums.zero();
            const uint64_t before = om2rtGetLaunchCount();
            CHECK_OK(aclrtLaunchKernelV2(k.record_blocks, blocks, args_buf.get(), sizeof(RecordArgs), nullptr, nullptr));
            CHECK(om2rtGetLaunchCount() == before + 1);
            check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), blocks, capacity, 1);

            y.zero();
            CHECK_OK(aclrtLaunchKernelV2(k.scale_add, blocks, scale_args.get(), sizeof(ScaleArgs), nullptr, nullptr));
            check_scale_output(x.as<float>(), y.as<float>(), n, 3.0f, blocks);
        }
        // Many launches back to back, some after a pause long enough for the workers to sleep.
        hits.zero();
        nums.zero();
        const uint32_t rounds = 300;
        for (uint32_t r = 0; r < rounds; ++r) {
            if (r % 50 == 0) sleep_ms(2);
            CHECK_OK(aclrtLaunchKernel(k.record_blocks, 64, args_buf.get(), sizeof(RecordArgs), nullptr));
        }
        check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), 64, capacity, rounds);
    }
    CHECK_OK(om2rtSetThreadCount(0));
    CHECK(om2rtGetThreadCount() == static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN)));
    CHECK_ERR(om2rtSetThreadCount(OM2RT_MAX_THREADS + 1), ACL_ERROR_INVALID_PARAM, "om2rtSetThreadCount");
    CHECK_OK(om2rtSetThreadCount(4));
    section_done("SPMD launches (T = 1, 2, 4; blocks = 1, 7, 64)");
}

/* How many distinct threads ran the blocks of the last record_threads launch. */
size_t distinct_threads(const DevBuf& tids, uint32_t blocks) {
    std::vector<uint64_t> seen(tids.as<uint64_t>(), tids.as<uint64_t>() + blocks);
    std::sort(seen.begin(), seen.end());
    return static_cast<size_t>(std::unique(seen.begin(), seen.end()) - seen.begin());
}

/* Each issuing thread's count (om2rtSetIssueThreadCount) holds for what it launches and for what
 * it captures, whatever the pool's T or later settings are: two models keep their own counts. */
void test_issue_thread_counts(const Kernels& k) {
    const uint32_t blocks = 24;
    DevBuf tids(blocks * sizeof(uint64_t)), args(sizeof(void*));
    *args.as<void*>() = tids.get();
    CHECK_OK(om2rtSetThreadCount(4));
    CHECK(om2rtGetIssueThreadCount() == 0);

    // issued with 1: every block on the launching thread, though the pool has 4
    CHECK_OK(om2rtSetIssueThreadCount(1));
    CHECK(om2rtGetIssueThreadCount() == 1);
    CHECK_OK(aclrtLaunchKernel(k.record_threads, blocks, args.get(), sizeof(void*), nullptr));
    CHECK(distinct_threads(tids, blocks) == 1);
    CHECK(tids.as<uint64_t>()[0] == static_cast<uint64_t>(pthread_self()));

    // captured with 2, replayed (synchronously and on a stream's thread) after the issuing thread
    // went back to the default: still at most 2 threads; a launch issued with the default may use 4
    aclrtStream s = nullptr, s_run = nullptr;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&s_run));
    aclmdlRI ri = nullptr;
    CHECK_OK(om2rtSetIssueThreadCount(2));
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtLaunchKernel(k.record_threads, blocks, args.get(), sizeof(void*), s));
    CHECK_OK(aclmdlRIEndTask(ri, s));
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    CHECK_OK(om2rtSetIssueThreadCount(0));
    size_t most = 0;
    for (int r = 0; r < 10; ++r) {
        CHECK_OK(aclmdlRIExecute(ri, -1));
        most = std::max(most, distinct_threads(tids, blocks));
        CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
        CHECK_OK(aclrtSynchronizeStream(s_run));
        most = std::max(most, distinct_threads(tids, blocks));
    }
    CHECK(most >= 1 && most <= 2);
    CHECK_OK(aclrtLaunchKernel(k.record_threads, blocks, args.get(), sizeof(void*), nullptr));
    CHECK(distinct_threads(tids, blocks) <= 4);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(s_run));

    // the pool grows to a count larger than T; the setting is per thread
    CHECK_OK(om2rtSetIssueThreadCount(6));
    CHECK_OK(aclrtLaunchKernel(k.record_threads, blocks, args.get(), sizeof(void*), nullptr));
    CHECK(distinct_threads(tids, blocks) <= 6);
    uint32_t other_thread_sees = 99;
    std::thread([&] { other_thread_sees = om2rtGetIssueThreadCount(); }).join();
    CHECK(other_thread_sees == 0);
    CHECK_ERR(om2rtSetIssueThreadCount(OM2RT_MAX_THREADS + 1), ACL_ERROR_INVALID_PARAM, "om2rtSetIssueThreadCount");
    CHECK(om2rtGetIssueThreadCount() == 6);
    CHECK_OK(om2rtSetIssueThreadCount(0));
    section_done("issue thread counts");
}

void test_streams_and_events(const Kernels& k) {
    aclrtStream s = nullptr, s2 = nullptr;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStreamWithConfig(&s2, 1, ACL_STREAM_FAST_LAUNCH));
    CHECK_ERR(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtCreateStream");

    // memcpy / memset on a stream
    std::vector<unsigned char> host(256);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i);
    DevBuf dev(256), dev2(256);
    dev.zero();
    dev2.zero();
    CHECK_OK(aclrtMemcpyAsync(dev.get(), 256, host.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtMemsetAsync(dev.as<unsigned char>() + 200, 56, 0xEE, 56, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK(dev.as<unsigned char>()[199] == 199 && dev.as<unsigned char>()[200] == 0xEE);
    CHECK_ERR(aclrtMemcpyAsync(dev.get(), 16, host.data(), 256, ACL_MEMCPY_HOST_TO_DEVICE, s), ACL_ERROR_INVALID_PARAM,
              "aclrtMemcpyAsync");

    // A stream waits for an event that the host records later: proves the queue runs
    // asynchronously, in order, and that synchronisation can time out.
    aclrtEvent gate = nullptr;
    CHECK_OK(aclrtCreateEvent(&gate));
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    CHECK_OK(aclrtQueryEventStatus(gate, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_OK(aclrtStreamWaitEvent(s, gate));
    CHECK_OK(aclrtMemcpyAsync(dev2.get(), 256, dev.get(), 256, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    sleep_ms(20);
    CHECK(dev2.as<unsigned char>()[5] == 0);
    CHECK_ERR(aclrtSynchronizeStreamWithTimeout(s, 30), ACL_ERROR_RT_WAIT_TIMEOUT, "aclrtSynchronizeStreamWithTimeout");
    CHECK_ERR(aclrtSynchronizeStreamWithTimeout(s, 0), ACL_ERROR_INVALID_PARAM, "timeout");
    CHECK_OK(aclrtRecordEvent(gate, nullptr));  // the default stream records at once
    CHECK_OK(aclrtQueryEventStatus(gate, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtSynchronizeStreamWithTimeout(s, -1));
    CHECK(dev2.as<unsigned char>()[5] == 5 && dev2.as<unsigned char>()[255] == 0xEE);
    CHECK_OK(aclrtResetEvent(gate, nullptr));
    CHECK_OK(aclrtQueryEventStatus(gate, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);

    // Waiting in the calling thread for an event nobody will record fails instead of hanging.
    CHECK_ERR(aclrtStreamWaitEvent(nullptr, gate), ACL_ERROR_RT_FAILURE, "aclrtStreamWaitEvent");

    // Cross-stream dependency: s computes, records; s2 waits, then copies the result.
    const int64_t n = 333;
    DevBuf x(n * sizeof(float)), y(n * sizeof(float)), out(n * sizeof(float)), args(sizeof(ScaleArgs));
    for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = static_cast<float>(i);
    *args.as<ScaleArgs>() = ScaleArgs{x.get(), y.get(), ScaleTiling{n, -2.0f, 0.0f}};
    y.zero();
    out.zero();
    aclrtEvent done = nullptr;
    CHECK_OK(aclrtCreateEventWithFlag(&done, ACL_EVENT_SYNC));
    CHECK_OK(aclrtStreamWaitEvent(s, gate));  // hold s until the host says go
    CHECK_OK(aclrtLaunchKernelV2(k.scale_add, 5, args.get(), sizeof(ScaleArgs), nullptr, s));
    CHECK_OK(aclrtRecordEvent(done, s));
    CHECK_OK(aclrtStreamWaitEvent(s2, done));
    CHECK_OK(aclrtMemcpyAsync(out.get(), out.size(), y.get(), y.size(), ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK_OK(aclrtQueryEventStatus(done, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK(out.as<float>()[1] == 0.0f);
    CHECK_OK(aclrtRecordEvent(gate, nullptr));
    CHECK_OK(aclrtSynchronizeEvent(done));
    CHECK_OK(aclrtQueryEventStatus(done, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtSynchronizeStream(s2));
    check_scale_output(x.as<float>(), out.as<float>(), n, -2.0f, 5);
    CHECK_OK(aclrtSynchronizeDevice());

    // Made-up handles are looked up among the live ones before anything behind them is read: a
    // wild address, and memory that starts with a stream's / an event's type tag (which a tag
    // check alone would take for one).
    std::vector<uint32_t> fake_stream(512, 0u), fake_event(512, 0u);
    fake_stream[0] = 0x5354524Du;  // "STRM"
    fake_event[0] = 0x45564E54u;   // "EVNT"
    for (void* bogus : {reinterpret_cast<void*>(uintptr_t{0x1234}), static_cast<void*>(fake_stream.data())}) {
        CHECK_ERR(aclrtSynchronizeStream(bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "not a live handle");
        CHECK_ERR(aclrtSynchronizeStreamWithTimeout(bogus, 10), ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream");
        CHECK_ERR(aclrtMemcpyAsync(dev.get(), 16, host.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE, bogus),
                  ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream");
        CHECK_ERR(aclrtLaunchKernelV2(k.scale_add, 1, args.get(), sizeof(ScaleArgs), nullptr, bogus),
                  ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream");
        CHECK_ERR(aclrtRecordEvent(done, bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream");
        CHECK_ERR(aclrtStreamWaitEvent(bogus, done), ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream");
        CHECK_ERR(aclrtDestroyStream(bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyStream");
    }
    CHECK(fake_stream[0] == 0x5354524Du && fake_stream[1] == 0u);  // untouched
    for (void* bogus : {reinterpret_cast<void*>(uintptr_t{0x1234}), static_cast<void*>(fake_event.data())}) {
        aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;  // a zeroed Event would say NOT_READY
        CHECK_ERR(aclrtRecordEvent(bogus, s), ACL_ERROR_INVALID_RESOURCE_HANDLE, "not a live handle");
        CHECK_ERR(aclrtResetEvent(bogus, s), ACL_ERROR_INVALID_RESOURCE_HANDLE, "event");
        CHECK_ERR(aclrtStreamWaitEvent(s, bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "event");
        CHECK_ERR(aclrtSynchronizeEvent(bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "event");
        CHECK_ERR(aclrtQueryEventStatus(bogus, &st), ACL_ERROR_INVALID_RESOURCE_HANDLE, "event");
        CHECK(st == ACL_EVENT_RECORDED_STATUS_COMPLETE);
        CHECK_ERR(aclrtDestroyEvent(bogus), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyEvent");
    }
    CHECK(fake_event[0] == 0x45564E54u && fake_event[1] == 0u);

    // Destroying an event that queued tasks still use waits for them.
    aclrtEvent transient = nullptr;
    CHECK_OK(aclrtCreateEvent(&transient));
    CHECK_OK(aclrtRecordEvent(transient, s));
    CHECK_OK(aclrtDestroyEvent(transient));
    CHECK_ERR(aclrtDestroyEvent(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent");

    CHECK_OK(aclrtDestroyEvent(done));
    CHECK_OK(aclrtDestroyEvent(gate));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(s2));
    // Destroyed handles are no longer live: an error, never a read of freed memory.
    CHECK_ERR(aclrtSynchronizeStream(s), ACL_ERROR_INVALID_RESOURCE_HANDLE, "not a live handle");
    CHECK_ERR(aclrtDestroyStream(s2), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyStream");
    CHECK_ERR(aclrtSynchronizeEvent(done), ACL_ERROR_INVALID_RESOURCE_HANDLE, "not a live handle");
    CHECK_ERR(aclrtDestroyEvent(gate), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyEvent");
    CHECK_ERR(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream");
    CHECK_OK(aclrtSynchronizeStream(nullptr));
    section_done("streams and events");
}

void test_capture_and_replay(const Kernels& k) {
    const int64_t n = 500;
    const uint32_t scale_blocks = 4, record_blocks = 5;
    DevBuf x(n * sizeof(float)), y(n * sizeof(float)), y2(n * sizeof(float)), z(64);
    DevBuf hits(16 * sizeof(uint32_t)), nums(16 * sizeof(uint32_t));
    DevBuf scale_args(sizeof(ScaleArgs)), rec_args(sizeof(RecordArgs));
    std::vector<float> input(n);
    for (int64_t i = 0; i < n; ++i) input[i] = static_cast<float>(i % 17) - 4.0f;
    const std::vector<float> sentinel(n, -7.0f);
    auto fill_sentinel = [&](const DevBuf& buf) {
        CHECK_OK(aclrtMemcpy(buf.get(), buf.size(), sentinel.data(), buf.size(), ACL_MEMCPY_HOST_TO_DEVICE));
    };
    fill_sentinel(x);
    fill_sentinel(y);
    fill_sentinel(y2);
    z.zero();
    hits.zero();
    nums.zero();
    *scale_args.as<ScaleArgs>() = ScaleArgs{x.get(), y.get(), ScaleTiling{n, 1.5f, 0.0f}};
    *rec_args.as<RecordArgs>() = RecordArgs{hits.get(), nums.get()};

    aclrtStream s_main = nullptr, s_side = nullptr, s_run = nullptr;
    CHECK_OK(aclrtCreateStreamWithConfig(&s_main, 0, ACL_STREAM_PERSISTENT | ACL_STREAM_FAST_LAUNCH));
    CHECK_OK(aclrtCreateStreamWithConfig(&s_side, 0, ACL_STREAM_PERSISTENT));
    CHECK_OK(aclrtCreateStream(&s_run));
    aclrtEvent ev = nullptr;
    CHECK_OK(aclrtCreateEvent(&ev));

    aclmdlRI ri = nullptr, other = nullptr;
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_ERR(aclmdlRIBindStream(ri, nullptr, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM, "aclmdlRIBindStream");
    CHECK_OK(aclmdlRIBindStream(ri, s_main, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclmdlRIBindStream(ri, s_side, ACL_MODEL_STREAM_FLAG_DEFAULT));
    CHECK_OK(aclmdlRIBuildBegin(&other, 0));
    CHECK_ERR(aclmdlRIBindStream(other, s_main, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM, "already bound");
    CHECK_OK(aclmdlRIBindStream(other, s_run, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclmdlRIUnbindStream(other, s_run));
    CHECK_ERR(aclmdlRIUnbindStream(other, s_run), ACL_ERROR_INVALID_PARAM, "not bound");
    CHECK_OK(aclmdlRIDestroy(other));

    // Capture: nothing of this runs now.
    const uint64_t launches_before = om2rtGetLaunchCount();
    CHECK_OK(aclrtMemcpyAsync(x.get(), x.size(), input.data(), x.size(), ACL_MEMCPY_HOST_TO_DEVICE, s_main));
    CHECK_OK(aclrtLaunchKernelV2(k.scale_add, scale_blocks, scale_args.get(), sizeof(ScaleArgs), nullptr, s_main));
    CHECK_OK(aclrtRecordEvent(ev, s_main));
    CHECK_OK(aclrtStreamWaitEvent(s_side, ev));
    CHECK_OK(aclrtLaunchKernel(k.record_blocks, record_blocks, rec_args.get(), sizeof(RecordArgs), s_side));
    CHECK_OK(aclrtMemsetAsync(z.get(), z.size(), 0x5A, z.size(), s_side));
    CHECK_OK(aclrtResetEvent(ev, s_side));
    CHECK_OK(aclmdlRIEndTask(ri, s_main));
    CHECK_OK(aclmdlRIEndTask(ri, s_side));
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, rec_args.get(), sizeof(RecordArgs), s_main), ACL_ERROR_INVALID_PARAM,
              "end task");
    CHECK_ERR(aclmdlRIEndTask(ri, s_run), ACL_ERROR_INVALID_PARAM, "not bound");
    CHECK_OK(aclrtSynchronizeStream(s_main));
    CHECK_OK(aclrtSynchronizeStream(s_side));
    CHECK(om2rtGetLaunchCount() == launches_before);
    CHECK(x.as<float>()[3] == -7.0f && y.as<float>()[3] == -7.0f);
    CHECK(hits.as<uint32_t>()[0] == 0 && z.as<unsigned char>()[0] == 0);
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    CHECK_OK(aclrtQueryEventStatus(ev, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);

    CHECK_ERR(aclmdlRIExecute(ri, -1), ACL_ERROR_INVALID_PARAM, "still being built");
    CHECK_ERR(aclmdlRIExecuteAsync(ri, s_run), ACL_ERROR_INVALID_PARAM, "still being built");
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    CHECK_ERR(aclmdlRIBuildEnd(ri, nullptr), ACL_ERROR_INVALID_PARAM, "aclmdlRIBuildEnd");
    CHECK_ERR(aclrtLaunchKernel(k.record_blocks, 1, rec_args.get(), sizeof(RecordArgs), s_main),
              ACL_ERROR_RT_MODEL_RUNNING, "aclrtLaunchKernel");
    CHECK_ERR(aclmdlRIBindStream(ri, s_run, ACL_MODEL_STREAM_FLAG_HEAD), ACL_ERROR_INVALID_PARAM, "already ended");

    // Replay 1.
    CHECK_OK(aclmdlRIExecute(ri, -1));
    CHECK(om2rtGetLaunchCount() == launches_before + 2);
    check_scale_output(input.data(), y.as<float>(), n, 1.5f, scale_blocks);
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 1);
    CHECK(z.as<unsigned char>()[63] == 0x5A);
    CHECK_OK(aclrtQueryEventStatus(ev, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);  // the replay reset it at the end

    // Replay 2 after rewriting the output address in the args buffer: the kernel reads the new one.
    scale_args.as<ScaleArgs>()->y = y2.get();
    fill_sentinel(y);
    CHECK_OK(aclmdlRIExecute(ri, 10000));
    check_scale_output(input.data(), y2.as<float>(), n, 1.5f, scale_blocks);
    CHECK(y.as<float>()[0] == -7.0f && y.as<float>()[n - 1] == -7.0f);
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 2);
    CHECK_ERR(aclmdlRIExecute(ri, 0), ACL_ERROR_INVALID_PARAM, "aclmdlRIExecute");

    // Asynchronous replay on an unbound stream, then on the default stream.
    fill_sentinel(y2);
    CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK_OK(aclrtSynchronizeStream(s_run));
    check_scale_output(input.data(), y2.as<float>(), n, 1.5f, scale_blocks);
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 3);
    CHECK_OK(aclmdlRIExecuteAsync(ri, nullptr));
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 4);
    CHECK(om2rtGetLaunchCount() == launches_before + 8);
    CHECK_ERR(aclmdlRIExecuteAsync(ri, s_main), ACL_ERROR_INVALID_PARAM, "bound");

    // Many replays, synchronous, then queued (one RI must not run in two threads at once: its
    // kernels share buffers, as on an NPU).
    for (int r = 0; r < 50; ++r) CHECK_OK(aclmdlRIExecute(ri, -1));
    for (int r = 0; r < 50; ++r) CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK_OK(aclrtSynchronizeStream(s_run));
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 104);
    CHECK(om2rtGetLaunchCount() == launches_before + 208);

    // An RI with a queued replay cannot be destroyed.
    aclrtEvent gate = nullptr;
    CHECK_OK(aclrtCreateEvent(&gate));
    CHECK_OK(aclrtStreamWaitEvent(s_run, gate));
    CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK_ERR(aclmdlRIDestroy(ri), ACL_ERROR_RT_MODEL_RUNNING, "aclmdlRIDestroy");
    CHECK_OK(aclrtRecordEvent(gate, nullptr));
    CHECK_OK(aclrtSynchronizeStream(s_run));
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 105);
    CHECK_OK(aclmdlRIDestroy(ri));

    // Destroying the RI unbound its streams: work issued to them runs again.
    CHECK_OK(aclrtLaunchKernel(k.record_blocks, record_blocks, rec_args.get(), sizeof(RecordArgs), s_main));
    CHECK_OK(aclrtSynchronizeStream(s_main));
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 106);

    // A replay whose wait can never be satisfied fails cleanly instead of hanging.
    aclrtEvent never = nullptr;
    CHECK_OK(aclrtCreateEvent(&never));
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s_side, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtStreamWaitEvent(s_side, never));
    CHECK_OK(aclrtLaunchKernel(k.record_blocks, 1, rec_args.get(), sizeof(RecordArgs), s_side));
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    CHECK_ERR(aclmdlRIExecute(ri, 1000), ACL_ERROR_RT_FAILURE, "event wait");
    CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK(aclrtSynchronizeStream(s_run) == ACL_ERROR_RT_FAILURE);
    const std::string async_msg = recent_message();  // summary first, then the task's own messages
    CHECK(async_msg.find("aclrtSynchronizeStream") < async_msg.find("aclmdlRIExecuteAsync"));
    CHECK(async_msg.find("neither recorded nor queued") != std::string::npos);
    CHECK_OK(aclrtSynchronizeStream(s_run));  // the error was reported once
    check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), record_blocks, 16, 106);
    CHECK_OK(aclrtDestroyStream(s_side));  // destroying a bound stream unbinds it
    CHECK_OK(aclmdlRIDestroy(ri));

    CHECK_OK(aclrtDestroyEvent(never));
    CHECK_OK(aclrtDestroyEvent(gate));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyStream(s_main));
    CHECK_OK(aclrtDestroyStream(s_run));
    section_done("capture and replay");
}

/* A record_blocks launch target whose hits show how often (and whether) its kernel ran. */
struct Probe {
    static constexpr uint32_t kCapacity = 8;
    DevBuf hits{kCapacity * sizeof(uint32_t)};
    DevBuf nums{kCapacity * sizeof(uint32_t)};
    DevBuf args{sizeof(RecordArgs)};
    uint32_t blocks;

    explicit Probe(uint32_t num_blocks) : blocks(num_blocks) {
        hits.zero();
        nums.zero();
        *args.as<RecordArgs>() = RecordArgs{hits.get(), nums.get()};
    }
    void launch(const Kernels& k, aclrtStream s) const {
        CHECK_OK(aclrtLaunchKernel(k.record_blocks, blocks, args.get(), sizeof(RecordArgs), s));
    }
    /* Ran `runs` times in total so far (0: never ran). */
    void check_runs(uint32_t runs) const {
        check_hits(hits.as<uint32_t>(), nums.as<uint32_t>(), runs == 0 ? 0 : blocks, kCapacity, runs);
    }
};

aclrtLabel new_label() {
    aclrtLabel label = nullptr;
    CHECK_OK(aclrtCreateLabel(&label));
    CHECK(label != nullptr);
    return label;
}

aclrtLabelList new_label_list(std::vector<aclrtLabel> labels) {
    aclrtLabelList list = nullptr;
    CHECK_OK(aclrtCreateLabelList(labels.data(), labels.size(), &list));
    CHECK(list != nullptr);
    return list;
}

void set_u32(const DevBuf& buf, uint32_t value) {
    CHECK_OK(aclrtMemcpy(buf.get(), buf.size(), &value, sizeof value, ACL_MEMCPY_HOST_TO_DEVICE));
}

void test_labels(const Kernels& k) {
    aclrtStream s = nullptr, s_other = nullptr, s_run = nullptr;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&s_other));
    CHECK_OK(aclrtCreateStream(&s_run));
    DevBuf cond(sizeof(uint32_t)), cond2(sizeof(uint32_t)), index(sizeof(uint32_t)), copy_args(sizeof(CopyArgs));
    set_u32(cond, 0);
    set_u32(cond2, 0);
    set_u32(index, 0);
    *copy_args.as<CopyArgs>() = CopyArgs{index.get(), cond.get()};

    // ---- argument checks, and labels outside a captured model ----
    CHECK_ERR(aclrtCreateLabel(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtCreateLabel");
    aclrtLabel l_then = new_label(), l_else = new_label(), l_end = new_label();
    CHECK(l_then != l_else);
    aclrtLabelList list = nullptr;
    aclrtLabel with_null[2] = {l_then, nullptr};
    CHECK_ERR(aclrtCreateLabelList(with_null, 2, &list), ACL_ERROR_INVALID_PARAM, "labels[1]");
    aclrtLabel with_stream[1] = {s};
    CHECK_ERR(aclrtCreateLabelList(with_stream, 1, &list), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtCreateLabelList");
    CHECK_ERR(aclrtCreateLabelList(with_null, 0, &list), ACL_ERROR_INVALID_PARAM, "num");
    CHECK_ERR(aclrtCreateLabelList(nullptr, 1, &list), ACL_ERROR_INVALID_PARAM, "aclrtCreateLabelList");
    CHECK_ERR(aclrtCreateLabelList(with_null, 1, nullptr), ACL_ERROR_INVALID_PARAM, "aclrtCreateLabelList");
    CHECK(list == nullptr);
    aclrtLabelList branches = new_label_list({l_then, l_else});
    aclrtLabelList to_end = new_label_list({l_end});

    CHECK_ERR(aclrtSetLabel(l_then, nullptr), ACL_ERROR_FEATURE_UNSUPPORTED, "aclrtSetLabel");
    CHECK_ERR(aclrtSetLabel(l_then, s), ACL_ERROR_FEATURE_UNSUPPORTED, "captured model");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 2, branches, nullptr), ACL_ERROR_FEATURE_UNSUPPORTED,
              "aclrtSwitchLabelByIndex");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 2, branches, s), ACL_ERROR_FEATURE_UNSUPPORTED, "captured model");
    CHECK_ERR(aclrtSetLabel(nullptr, s), ACL_ERROR_INVALID_PARAM, "aclrtSetLabel");
    CHECK_ERR(aclrtSetLabel(branches, s), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtSetLabel");  // a list is no label
    CHECK_ERR(aclrtSwitchLabelByIndex(nullptr, 2, branches, s), ACL_ERROR_INVALID_PARAM, "ptr");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 3, branches, s), ACL_ERROR_INVALID_PARAM, "maxValue");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 0, branches, s), ACL_ERROR_INVALID_PARAM, "maxValue");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 1, l_then, s), ACL_ERROR_INVALID_RESOURCE_HANDLE, "labelList");
    CHECK_ERR(aclrtDestroyLabel(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyLabel");
    CHECK_ERR(aclrtDestroyLabelList(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyLabelList");
    CHECK_ERR(aclrtDestroyLabelList(l_then), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyLabelList");

    // ---- if/else: A writes the index; switch(index, {then, else}); then: B, goto end; else: C; end: D ----
    Probe b(2), c(3), d(4);
    aclrtEvent ev_then = nullptr;
    CHECK_OK(aclrtCreateEvent(&ev_then));
    aclmdlRI ri = nullptr;
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    const uint64_t launches_before = om2rtGetLaunchCount();
    CHECK_OK(aclrtLaunchKernel(k.copy_u32, 3, copy_args.get(), sizeof(CopyArgs), s));  // A
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 2, branches, s));
    CHECK_OK(aclrtSetLabel(l_then, s));
    b.launch(k, s);
    CHECK_OK(aclrtRecordEvent(ev_then, s));  // skipped with the then-branch
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 1, to_end, s));  // goto: any index
    CHECK_OK(aclrtSetLabel(l_else, s));
    c.launch(k, s);
    CHECK_OK(aclrtSetLabel(l_end, s));
    d.launch(k, s);
    CHECK_ERR(aclrtSetLabel(l_then, s), ACL_ERROR_INVALID_PARAM, "already set");
    CHECK_OK(aclmdlRIEndTask(ri, s));
    aclrtLabel l_late = new_label();
    CHECK_ERR(aclrtSetLabel(l_late, s), ACL_ERROR_INVALID_PARAM, "end task");
    CHECK_OK(aclrtDestroyLabel(l_late));
    CHECK(om2rtGetLaunchCount() == launches_before);  // captured, not run
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    CHECK_ERR(aclrtSetLabel(l_end, s), ACL_ERROR_RT_MODEL_RUNNING, "aclrtSetLabel");
    CHECK_ERR(aclrtSwitchLabelByIndex(index.get(), 1, to_end, s), ACL_ERROR_RT_MODEL_RUNNING, "aclrtSwitchLabelByIndex");
    // The RI keeps no reference to label lists: they may go now.
    CHECK_OK(aclrtDestroyLabelList(branches));
    CHECK_OK(aclrtDestroyLabelList(to_end));

    set_u32(cond, 0);  // then
    CHECK_OK(aclmdlRIExecute(ri, -1));
    CHECK(om2rtGetLaunchCount() == launches_before + 3);
    CHECK(*index.as<uint32_t>() == 0);
    b.check_runs(1);
    c.check_runs(0);
    d.check_runs(1);
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK_OK(aclrtQueryEventStatus(ev_then, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtResetEvent(ev_then, nullptr));

    set_u32(cond, 1);  // else
    CHECK_OK(aclmdlRIExecute(ri, 10000));
    CHECK(om2rtGetLaunchCount() == launches_before + 6);
    CHECK(*index.as<uint32_t>() == 1);
    b.check_runs(1);
    c.check_runs(1);
    d.check_runs(2);
    CHECK_OK(aclrtQueryEventStatus(ev_then, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);

    for (uint32_t out_of_range : {2u, 7u, 0xFFFFFFFFu}) {  // an index >= maxValue takes the last label
        set_u32(cond, out_of_range);
        CHECK_OK(aclmdlRIExecute(ri, -1));
    }
    CHECK(om2rtGetLaunchCount() == launches_before + 15);
    b.check_runs(1);
    c.check_runs(4);
    d.check_runs(5);

    // The index is read when the switch runs: A now copies from another buffer (args rewritten).
    copy_args.as<CopyArgs>()->src = cond2.get();
    set_u32(cond2, 0);
    CHECK_OK(aclmdlRIExecute(ri, -1));
    b.check_runs(2);
    c.check_runs(4);
    d.check_runs(6);

    // Asynchronous replays: the record in the skipped branch must not stay pending.
    set_u32(cond2, 1);
    CHECK_OK(aclrtResetEvent(ev_then, nullptr));
    CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK_OK(aclrtSynchronizeStream(s_run));
    CHECK_OK(aclrtSynchronizeEvent(ev_then));  // returns: nothing of it is pending any more
    CHECK_OK(aclrtQueryEventStatus(ev_then, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_NOT_READY);
    b.check_runs(2);
    c.check_runs(5);
    set_u32(cond2, 0);
    for (int r = 0; r < 10; ++r) CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));
    CHECK_OK(aclrtSynchronizeEvent(ev_then));
    CHECK_OK(aclrtSynchronizeStream(s_run));
    CHECK_OK(aclrtQueryEventStatus(ev_then, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclmdlRIExecuteAsync(ri, nullptr));
    b.check_runs(13);
    c.check_runs(5);
    d.check_runs(18);
    CHECK(om2rtGetLaunchCount() == launches_before + 18 + 3 * 12);
    CHECK_OK(aclmdlRIDestroy(ri));

    // ---- a loop (backward jump): top: E, record, countdown; switch(index, {top, exit}); exit: D ----
    Probe e(3);
    DevBuf counter(sizeof(uint32_t)), loop_index(sizeof(uint32_t)), countdown_args(sizeof(CountdownArgs));
    *countdown_args.as<CountdownArgs>() = CountdownArgs{counter.get(), loop_index.get()};
    aclrtLabel l_top = new_label(), l_exit = new_label();
    aclrtLabelList loop = new_label_list({l_top, l_exit});
    aclrtEvent ev_loop = nullptr;
    CHECK_OK(aclrtCreateEvent(&ev_loop));
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtSetLabel(l_top, s));
    e.launch(k, s);
    CHECK_OK(aclrtRecordEvent(ev_loop, s));  // runs once per iteration
    CHECK_OK(aclrtLaunchKernel(k.countdown, 1, countdown_args.get(), sizeof(CountdownArgs), s));
    CHECK_OK(aclrtSwitchLabelByIndex(loop_index.get(), 2, loop, s));
    CHECK_OK(aclrtSetLabel(l_exit, s));
    d.launch(k, s);
    CHECK_OK(aclmdlRIEndTask(ri, s));
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    const uint64_t loop_before = om2rtGetLaunchCount();
    set_u32(counter, 3);
    CHECK_OK(aclmdlRIExecute(ri, -1));
    e.check_runs(3);
    d.check_runs(19);
    CHECK(*counter.as<uint32_t>() == 0);
    CHECK(om2rtGetLaunchCount() == loop_before + 7);  // 3 x (E, countdown) + D
    set_u32(counter, 5);
    CHECK_OK(aclmdlRIExecuteAsync(ri, s_run));  // the record runs 5 times but was counted once
    CHECK_OK(aclrtSynchronizeStream(s_run));
    CHECK_OK(aclrtSynchronizeEvent(ev_loop));
    CHECK_OK(aclrtQueryEventStatus(ev_loop, &status));
    CHECK(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    e.check_runs(8);
    d.check_runs(20);
    CHECK(om2rtGetLaunchCount() == loop_before + 18);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtDestroyLabelList(loop));

    // ---- a loop that never exits: the timeout of aclmdlRIExecute ends it ----
    aclrtLabel l_spin = new_label();
    aclrtLabelList spin = new_label_list({l_spin});
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtSetLabel(l_spin, s));
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 1, spin, s));  // goto l_spin
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    CHECK_ERR(aclmdlRIExecute(ri, 30), ACL_ERROR_RT_WAIT_TIMEOUT, "timed out");
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtDestroyLabelList(spin));

    // ---- a switch to a label never set in the RI fails at BuildEnd, which can then be retried ----
    aclrtLabel l_set = new_label(), l_unset = new_label();
    aclrtLabelList partly_set = new_label_list({l_set, l_unset});
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 2, partly_set, s));
    CHECK_OK(aclrtSetLabel(l_set, s));
    e.launch(k, s);
    CHECK_ERR(aclmdlRIBuildEnd(ri, nullptr), ACL_ERROR_INVALID_PARAM, "never set");
    CHECK_ERR(aclmdlRIExecute(ri, -1), ACL_ERROR_INVALID_PARAM, "still being built");
    CHECK_OK(aclrtSetLabel(l_unset, s));  // at the end of the model
    CHECK_OK(aclmdlRIBuildEnd(ri, nullptr));
    set_u32(index, 1);
    CHECK_OK(aclmdlRIExecute(ri, -1));  // jumps to the end: E does not run
    e.check_runs(8);
    set_u32(index, 0);
    CHECK_OK(aclmdlRIExecute(ri, -1));
    e.check_runs(9);
    CHECK_OK(aclmdlRIDestroy(ri));

    // A label set in another RI does not count; an RI destroyed mid-build leaks nothing.
    aclmdlRI first = nullptr;
    CHECK_OK(aclmdlRIBuildBegin(&first, 0));
    CHECK_OK(aclmdlRIBindStream(first, s_other, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtSetLabel(l_unset, s_other));
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclrtSetLabel(l_set, s));
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 2, partly_set, s));
    CHECK_ERR(aclmdlRIBuildEnd(ri, nullptr), ACL_ERROR_INVALID_PARAM, "never set");
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclmdlRIDestroy(first));

    // A switch to a label of another stream of the same RI is refused at BuildEnd.
    CHECK_OK(aclmdlRIBuildBegin(&ri, 0));
    CHECK_OK(aclmdlRIBindStream(ri, s, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK_OK(aclmdlRIBindStream(ri, s_other, ACL_MODEL_STREAM_FLAG_DEFAULT));
    CHECK_OK(aclrtSetLabel(l_set, s));
    CHECK_OK(aclrtSetLabel(l_unset, s_other));
    CHECK_OK(aclrtSwitchLabelByIndex(index.get(), 2, partly_set, s));
    CHECK_ERR(aclmdlRIBuildEnd(ri, nullptr), ACL_ERROR_FEATURE_UNSUPPORTED, "between streams");
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtDestroyLabelList(partly_set));

    // Unbound again (the RIs are gone): labels are refused, ordinary work runs.
    CHECK_ERR(aclrtSetLabel(l_set, s), ACL_ERROR_FEATURE_UNSUPPORTED, "aclrtSetLabel");
    e.launch(k, s);
    CHECK_OK(aclrtSynchronizeStream(s));
    e.check_runs(10);

    for (aclrtLabel label : {l_then, l_else, l_end, l_top, l_exit, l_spin, l_set, l_unset}) {
        CHECK_OK(aclrtDestroyLabel(label));
    }
    CHECK_OK(aclrtDestroyEvent(ev_then));
    CHECK_OK(aclrtDestroyEvent(ev_loop));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(s_other));
    CHECK_OK(aclrtDestroyStream(s_run));
    section_done("labels");
}

void test_finalize(Kernels& k, uint64_t live_at_start) {
    CHECK_OK(aclrtBinaryUnLoad(k.bin));
    CHECK(om2rtGetLiveAllocationCount() == live_at_start);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    CHECK_OK(aclFinalize());
    void* p = nullptr;  // still usable after aclFinalize (implicit initialisation)
    CHECK_OK(aclrtMalloc(&p, 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtFree(p));
    CHECK(om2rtGetLiveAllocationCount() == live_at_start);
    CHECK(aclGetRecentErrMsg() == nullptr);
    section_done("finalize and leaks");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <kernels.so>\n", argv[0]);
        return 2;
    }
    try {
        const uint64_t live_at_start = om2rtGetLiveAllocationCount();
        Kernels kernels;
        kernels.image = read_file(argv[1]);
        test_init_and_device();
        test_error_messages();
        test_memory();
        test_binaries(kernels);
        test_launch_args_checks(kernels);
        test_spmd(kernels);
        test_issue_thread_counts(kernels);
        test_streams_and_events(kernels);
        test_capture_and_replay(kernels);
        test_labels(kernels);
        drain_messages();
        test_finalize(kernels, live_at_start);
    } catch (const TestFailure& e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
    std::printf("PASS: %d checks\n", g_checks);
    return 0;
}
