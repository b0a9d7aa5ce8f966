/*
 * factory_selftest.cpp -- self-test of the custom-operator factory (runtime_abi/src/
 * om2_custom_ops.cpp) driving the sample custom-op library (samples/custom_op).
 *
 * Usage: factory_selftest <libom2_sample_ops.so> <a copy of it under another name>
 * Built by tests/custom_op/test_factory.py together with the CPU runtime and the factory, with
 * -rdynamic, so that the sample library (which leaves ACL and Om2* symbols undefined) resolves
 * them against this executable when it is dlopen'ed.
 *
 * Prints "ok: <section>" per section and "PASS: <n> checks" at the end; on the first failed
 * check prints "FAIL: <file>:<line>: <what>" and returns 1.
 */
#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "om2/custom_op.h"
#include "om2/om2_cpu_runtime.h"

namespace {

int g_checks = 0;

struct TestFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] __attribute__((format(printf, 3, 4))) void fail_at(const char *file, int line, const char *fmt, ...) {
    char what[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char full[2200];
    snprintf(full, sizeof full, "%s:%d: %s", file, line, what);
    throw TestFailure(full);
}

std::string op_error() {
    const char *msg = Om2CustomOpGetError();
    return msg == nullptr ? std::string("(NULL)") : std::string(msg);
}

std::string acl_error() {
    const char *msg = aclGetRecentErrMsg();
    return msg == nullptr ? std::string("(no message)") : std::string(msg);
}

#define CHECK(cond)                                                          \
    do {                                                                     \
        ++g_checks;                                                          \
        if (!(cond)) fail_at(__FILE__, __LINE__, "check failed: %s", #cond); \
    } while (0)

#define CHECK_ACL(expr)                                                                                   \
    do {                                                                                                  \
        ++g_checks;                                                                                       \
        const aclError err_ = (expr);                                                                     \
        if (err_ != ACL_SUCCESS) fail_at(__FILE__, __LINE__, "%s returned %d: %s", #expr, err_, acl_error().c_str()); \
    } while (0)

/* An op interface call that must succeed. */
#define CHECK_OP(expr)                                                                                    \
    do {                                                                                                  \
        ++g_checks;                                                                                       \
        Om2CustomOpSetError(nullptr);                                                                     \
        const int32_t rc_ = (expr);                                                                       \
        if (rc_ != 0) fail_at(__FILE__, __LINE__, "%s returned %d: %s", #expr, rc_, op_error().c_str());  \
    } while (0)

/* An op interface call that must fail and leave a message containing `needle`. */
#define CHECK_OP_FAILS(expr, needle)                                                                      \
    do {                                                                                                  \
        ++g_checks;                                                                                       \
        Om2CustomOpSetError(nullptr);                                                                     \
        const int32_t rc_ = (expr);                                                                       \
        if (rc_ == 0) fail_at(__FILE__, __LINE__, "%s succeeded, expected a failure", #expr);             \
        const std::string msg_ = op_error();                                                              \
        if (msg_.find(needle) == std::string::npos) {                                                     \
            fail_at(__FILE__, __LINE__, "message of %s lacks '%s': '%s'", #expr, std::string(needle).c_str(), \
                    msg_.c_str());                                                                        \
        }                                                                                                 \
    } while (0)

void section_done(const char *name) { std::printf("ok: %s\n", name); }

bool contains(const std::string &s, const char *needle) { return s.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// test doubles
// ---------------------------------------------------------------------------------------------

Om2CustomTensorDesc desc(std::initializer_list<int64_t> dims, int64_t dtype = ACL_FLOAT) {
    Om2CustomTensorDesc d{};
    d.data_type = dtype;
    d.dim_num = dims.size();
    size_t i = 0;
    for (int64_t v : dims) d.dims[i++] = v;
    return d;
}

int64_t elements(const Om2CustomTensorDesc &d) {
    int64_t n = 1;
    for (uint64_t i = 0; i < d.dim_num; ++i) n *= d.dims[i];
    return n;
}

bool same_desc(const Om2CustomTensorDesc &a, const Om2CustomTensorDesc &b) {
    if (a.data_type != b.data_type || a.dim_num != b.dim_num) return false;
    for (uint64_t i = 0; i < a.dim_num; ++i) {
        if (a.dims[i] != b.dims[i]) return false;
    }
    return true;
}

class TestNode : public om2::CustomOpNodeInfo {
public:
    TestNode(std::vector<Om2CustomTensorDesc> inputs, size_t output_num)
        : outputs_(output_num, desc({}, ACL_DT_UNDEFINED)), inputs_(std::move(inputs)) {}

    void SetFloat(const char *name, float v) {
        floats_.push_back(v);
        Add(name, OM2_CUSTOM_ATTR_FLOAT);
    }
    void SetInt(const char *name, int64_t v) {
        ints_.push_back(v);
        Add(name, OM2_CUSTOM_ATTR_INT);
    }
    void SetString(const char *name, const char *v) {
        strings_.push_back(v);
        Add(name, OM2_CUSTOM_ATTR_STRING);
    }

    const char *GetNodeName() const override { return "selftest_node"; }
    size_t GetInputNum() const override { return inputs_.size(); }
    const Om2CustomTensorDesc *GetInputDesc(size_t i) const override {
        return i < inputs_.size() ? &inputs_[i] : nullptr;
    }
    size_t GetOutputNum() const override { return outputs_.size(); }
    Om2CustomTensorDesc *GetOutputDesc(size_t i) override { return i < outputs_.size() ? &outputs_[i] : nullptr; }
    const Om2CustomAttr *GetAttr(const char *name) const override {
        Rebuild();
        for (const Om2CustomAttr &a : attrs_) {
            if (std::strcmp(a.name, name) == 0) return &a;
        }
        return nullptr;
    }

    std::vector<Om2CustomTensorDesc> outputs_;

private:
    struct Entry {
        std::string name;
        int32_t kind;
        size_t index;
    };
    void Add(const char *name, int32_t kind) {
        const size_t index = kind == OM2_CUSTOM_ATTR_FLOAT ? floats_.size() - 1
                             : kind == OM2_CUSTOM_ATTR_INT ? ints_.size() - 1
                                                           : strings_.size() - 1;
        entries_.push_back({name, kind, index});
    }
    /* The attribute array points into the value vectors: rebuilt on each lookup. */
    void Rebuild() const {
        attrs_.clear();
        for (const Entry &e : entries_) {
            Om2CustomAttr a{};
            a.name = e.name.c_str();
            a.kind = e.kind;
            a.count = 1;
            if (e.kind == OM2_CUSTOM_ATTR_FLOAT) a.floats = &floats_[e.index];
            if (e.kind == OM2_CUSTOM_ATTR_INT) a.ints = &ints_[e.index];
            if (e.kind == OM2_CUSTOM_ATTR_STRING) a.str = strings_[e.index].c_str();
            attrs_.push_back(a);
        }
    }

    std::vector<Om2CustomTensorDesc> inputs_;
    std::vector<Entry> entries_;
    std::vector<float> floats_;
    std::vector<int64_t> ints_;
    std::vector<std::string> strings_;
    mutable std::vector<Om2CustomAttr> attrs_;
};

/* A block of device memory, freed on scope exit. */
class DevBuf {
public:
    explicit DevBuf(size_t size) : size_(size) { CHECK_ACL(aclrtMalloc(&ptr_, size, ACL_MEM_MALLOC_HUGE_FIRST)); }
    ~DevBuf() {
        if (ptr_ != nullptr) aclrtFree(ptr_);
    }
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    float *f() const { return static_cast<float *>(ptr_); }
    void *get() const { return ptr_; }
    size_t size() const { return size_; }

private:
    void *ptr_ = nullptr;
    size_t size_;
};

class TestContext : public om2::EagerOpExecutionContext {
public:
    explicit TestContext(aclrtStream stream) : stream_(stream) {}
    void AddInput(const Om2CustomTensorDesc &d, const DevBuf &buf) { inputs_.push_back({d, buf.get(), buf.size()}); }
    void AddOutput(const Om2CustomTensorDesc &d, const DevBuf &buf) { outputs_.push_back({d, buf.get(), buf.size()}); }

    size_t GetInputNum() const override { return inputs_.size(); }
    const Om2CustomTensor *GetInputTensor(size_t i) const override { return i < inputs_.size() ? &inputs_[i] : nullptr; }
    size_t GetOutputNum() const override { return outputs_.size(); }
    Om2CustomTensor *GetOutputTensor(size_t i) override { return i < outputs_.size() ? &outputs_[i] : nullptr; }
    aclrtStream GetStream() const override { return stream_; }

    std::vector<Om2CustomTensor> inputs_, outputs_;

private:
    aclrtStream stream_;
};

/* An op of the test itself, registered directly (not through a library). */
std::atomic<int> g_selftest_alive{0};
std::atomic<int> g_selftest_created{0};

class SelftestOp : public om2::BaseCustomOp {
public:
    SelftestOp() {
        ++g_selftest_alive;
        ++g_selftest_created;
    }
    ~SelftestOp() override { --g_selftest_alive; }
};

void *create_selftest_op() { return static_cast<om2::BaseCustomOp *>(new SelftestOp()); }
void *create_throwing() { throw std::runtime_error("creator exploded"); }
void *create_null() { return nullptr; }
std::atomic<int> g_impostor_calls{0};
void *create_impostor() {
    ++g_impostor_calls;
    return static_cast<om2::BaseCustomOp *>(new SelftestOp());
}

/* Ops from the factory, destroyed on scope exit. */
class Op {
public:
    explicit Op(const char *type) : raw_(Om2CreateCustomOp(type)) {
        if (raw_ == nullptr) fail_at(__FILE__, __LINE__, "Om2CreateCustomOp(%s) failed: %s", type, op_error().c_str());
        base_ = static_cast<om2::BaseCustomOp *>(raw_);
    }
    ~Op() { Om2DestroyCustomOp(raw_); }
    Op(const Op &) = delete;
    Op &operator=(const Op &) = delete;
    om2::PortableOp &portable() const {
        om2::PortableOp *p = base_->AsPortable();
        if (p == nullptr) fail_at(__FILE__, __LINE__, "AsPortable() is NULL");
        return *p;
    }
    om2::EagerExecuteOp &eager() const {
        om2::EagerExecuteOp *e = base_->AsEager();
        if (e == nullptr) fail_at(__FILE__, __LINE__, "AsEager() is NULL");
        return *e;
    }

private:
    void *raw_;
    om2::BaseCustomOp *base_;
};

std::vector<uint8_t> serialize(const Op &op) {
    uint8_t *data = nullptr;
    size_t size = 0;
    CHECK_OP(op.portable().Serialize(&data, &size));
    CHECK(data != nullptr && size > 0);
    std::vector<uint8_t> out(data, data + size);
    delete[] data;
    return out;
}

std::vector<std::string> list_ops() {
    const size_t n = Om2ListCustomOps(nullptr, 0);
    std::vector<const char *> names(n + 1, nullptr);
    CHECK(Om2ListCustomOps(names.data(), n) == n);
    return std::vector<std::string>(names.begin(), names.begin() + static_cast<long>(n));
}

void fill(const DevBuf &buf, uint32_t seed, float lo, float hi) {
    uint32_t s = seed * 2654435761u + 1u;
    const size_t n = buf.size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        buf.f()[i] = lo + (hi - lo) * static_cast<float>(s >> 8) / static_cast<float>(1u << 24);
    }
}

bool close_to(float got, float want) { return std::fabs(got - want) <= 1e-5f * (1.0f + std::fabs(want)); }

#define CHECK_CLOSE_ARRAY(n, got_expr, want_expr)                                                             \
    do {                                                                                                       \
        ++g_checks;                                                                                            \
        for (int64_t i = 0; i < (n); ++i) {                                                                    \
            const float got_ = (got_expr), want_ = (want_expr);                                                \
            if (!close_to(got_, want_)) fail_at(__FILE__, __LINE__, "element %lld: got %.9g, want %.9g (%s)", \
                                                static_cast<long long>(i), got_, want_, #got_expr);            \
        }                                                                                                      \
    } while (0)

using CountFn = uint64_t (*)(void);

// ---------------------------------------------------------------------------------------------
// sections
// ---------------------------------------------------------------------------------------------

void test_factory_empty() {
    CHECK(Om2ListCustomOps(nullptr, 0) == 0);
    CHECK(Om2RegisterCustomOpCreator(nullptr, create_selftest_op) == -1);
    CHECK(Om2RegisterCustomOpCreator("", create_selftest_op) == -1);
    CHECK(Om2RegisterCustomOpCreator("NoCreator", nullptr) == -1);
    CHECK(Om2ListCustomOps(nullptr, 0) == 0);

    Om2CustomOpSetError(nullptr);
    CHECK(Om2CreateCustomOp("NoSuchOp") == nullptr);
    CHECK(contains(op_error(), "NoSuchOp"));
    CHECK(contains(op_error(), "registered: none"));
    CHECK(Om2CreateCustomOp(nullptr) == nullptr);
    CHECK(contains(op_error(), "NULL"));
    Om2DestroyCustomOp(nullptr);  // a no-op

    // The message is per thread: set here, unseen (empty) in another thread.
    Om2CustomOpSetError("main thread message");
    std::string other = "unset";
    std::thread([&other] {
        other = Om2CustomOpGetError();
        Om2CustomOpSetError("other thread message");
    }).join();
    CHECK(other.empty());
    CHECK(op_error() == "main thread message");
    Om2CustomOpSetError(Om2CustomOpGetError());  // aliasing its own buffer is fine
    CHECK(op_error() == "main thread message");
    const std::string longer(10000, 'x');
    Om2CustomOpSetError(longer.c_str());  // truncated, not overflowed
    CHECK(!op_error().empty() && op_error().size() < longer.size() && op_error()[0] == 'x');
    Om2CustomOpSetError("");
    CHECK(op_error().empty());
    Om2CustomOpSetError("x");
    Om2CustomOpSetError(nullptr);
    CHECK(op_error().empty());
    section_done("empty factory");
}

void *load_library(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) fail_at(__FILE__, __LINE__, "dlopen(%s): %s", path, dlerror());
    return h;
}

CountFn execute_counter(void *lib) {
    void *sym = dlsym(lib, "Om2SampleOpsExecuteCount");
    if (sym == nullptr) fail_at(__FILE__, __LINE__, "Om2SampleOpsExecuteCount not exported: %s", dlerror());
    CountFn fn;
    std::memcpy(&fn, &sym, sizeof fn);
    return fn;
}

void test_registration(const char *copy_path, void **copy_lib) {
    const std::vector<std::string> ops = list_ops();
    CHECK(ops.size() == 2);
    CHECK(ops[0] == "AddCustom" && ops[1] == "ScaleShift");  // sorted
    const char *one[1] = {nullptr};
    CHECK(Om2ListCustomOps(one, 1) == 2);  // the count, even when capacity is smaller
    CHECK(one[0] != nullptr && std::strcmp(one[0], "AddCustom") == 0);

    Om2CustomOpSetError(nullptr);
    CHECK(Om2CreateCustomOp("Conv2DCustom") == nullptr);
    CHECK(contains(op_error(), "Conv2DCustom"));
    CHECK(contains(op_error(), "AddCustom") && contains(op_error(), "ScaleShift"));

    // The first registration wins.
    CHECK(Om2RegisterCustomOpCreator("AddCustom", create_impostor) == 1);
    {
        Op add("AddCustom");
        CHECK(g_impostor_calls == 0);
        (void)add.portable();
        (void)add.eager();
    }
    // A second library defining the same ops: its registrations are refused.
    *copy_lib = load_library(copy_path);
    CHECK(list_ops().size() == 2);

    // Ops registered by the test itself; creators that fail.
    CHECK(Om2RegisterCustomOpCreator("SelftestOp", create_selftest_op) == 0);
    CHECK(Om2RegisterCustomOpCreator("SelftestOp", create_selftest_op) == 1);
    CHECK(Om2RegisterCustomOpCreator("SelftestThrows", create_throwing) == 0);
    CHECK(Om2RegisterCustomOpCreator("SelftestNull", create_null) == 0);
    void *raw = Om2CreateCustomOp("SelftestOp");
    CHECK(raw != nullptr && g_selftest_alive == 1);
    CHECK(static_cast<om2::BaseCustomOp *>(raw)->AsPortable() == nullptr);
    CHECK(static_cast<om2::BaseCustomOp *>(raw)->AsEager() == nullptr);
    Om2DestroyCustomOp(raw);  // through the virtual destructor
    CHECK(g_selftest_alive == 0);
    Om2CustomOpSetError(nullptr);
    CHECK(Om2CreateCustomOp("SelftestThrows") == nullptr);
    CHECK(contains(op_error(), "SelftestThrows") && contains(op_error(), "creator exploded"));
    Om2CustomOpSetError(nullptr);
    CHECK(Om2CreateCustomOp("SelftestNull") == nullptr);
    CHECK(contains(op_error(), "SelftestNull") && contains(op_error(), "NULL"));

    // Concurrent registration, creation and listing: each name is registered exactly once.
    constexpr int kThreads = 8, kNames = 16;
    std::atomic<int> wins[kNames];
    for (auto &w : wins) w = 0;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&wins, &bad] {
            for (int i = 0; i < kNames; ++i) {
                const std::string name = "Concurrent" + std::to_string(i);
                const int32_t rc = Om2RegisterCustomOpCreator(name.c_str(), create_selftest_op);
                if (rc == 0) ++wins[i];
                if (rc != 0 && rc != 1) ++bad;
                for (int k = 0; k < 20; ++k) {
                    void *op = Om2CreateCustomOp(k % 2 ? "SelftestOp" : name.c_str());
                    if (op == nullptr) ++bad;
                    Om2DestroyCustomOp(op);
                    if (Om2ListCustomOps(nullptr, 0) < 5) ++bad;
                }
            }
        });
    }
    for (auto &t : threads) t.join();
    CHECK(bad == 0);
    for (auto &w : wins) CHECK(w == 1);
    CHECK(g_selftest_alive == 0);
    CHECK(list_ops().size() == 2 + 3 + kNames);
    CHECK(g_impostor_calls == 0);
    section_done("registration");
}

void test_add_custom_compile() {
    Op op("AddCustom");
    om2::PortableOp &p = op.portable();
    {
        TestNode node({desc({2, 3})}, 1);
        CHECK_OP_FAILS(p.InferShape(node), "expected 2 and 1");
    }
    {
        TestNode node({desc({2, 3}), desc({2, 3})}, 2);
        CHECK_OP_FAILS(p.InferShape(node), "selftest_node");
    }
    {
        TestNode node({desc({2, 3}), desc({2, 3}, ACL_INT32)}, 1);
        CHECK_OP_FAILS(p.InferShape(node), "float32");
    }
    {
        TestNode node({desc({2, 3}), desc({3, 2})}, 1);
        CHECK_OP_FAILS(p.InferShape(node), "[2, 3] and [3, 2]");
        CHECK_OP_FAILS(p.Compile(node), "different shapes");
    }
    {
        TestNode node({desc({2, -1}), desc({2, -1})}, 1);
        CHECK_OP_FAILS(p.InferShape(node), "static");
    }
    uint8_t *data = nullptr;
    size_t size = 0;
    CHECK_OP_FAILS(p.Serialize(&data, &size), "not compiled");
    CHECK(data == nullptr);

    TestNode node({desc({2, 3, 4}), desc({2, 3, 4})}, 1);
    CHECK_OP(p.InferShape(node));
    CHECK(same_desc(node.outputs_[0], desc({2, 3, 4})));
    CHECK_OP(p.Compile(node));
    CHECK(serialize(op).size() == 12 + 12 + 4);
    section_done("AddCustom InferShape and Compile");
}

void test_scale_shift_compile() {
    Op op("ScaleShift");
    om2::PortableOp &p = op.portable();
    {
        TestNode node({desc({4}), desc({4})}, 2);
        CHECK_OP_FAILS(p.InferShape(node), "expected 1 and 2");
    }
    {
        TestNode node({desc({4})}, 1);
        CHECK_OP_FAILS(p.InferShape(node), "expected 1 and 2");
    }
    {
        TestNode node({desc({4}, ACL_FLOAT16)}, 2);
        CHECK_OP_FAILS(p.InferShape(node), "float32");
    }
    {
        TestNode node({desc({4})}, 2);
        node.SetString("alpha", "two");
        CHECK_OP_FAILS(p.InferShape(node), "alpha");
    }
    {
        TestNode node({desc({5, 7})}, 2);  // defaults alpha 1, beta 0
        CHECK_OP(p.InferShape(node));
        CHECK(same_desc(node.outputs_[0], desc({5, 7})) && same_desc(node.outputs_[1], desc({5, 7})));
        CHECK_OP(p.Compile(node));
    }
    {
        TestNode node({desc({5, 7})}, 2);
        node.SetInt("alpha", 3);  // an INT attribute is accepted
        node.SetFloat("beta", 0.25f);
        CHECK_OP(p.InferShape(node));
        CHECK_OP(p.Compile(node));
    }
    CHECK(serialize(op).size() == 12 + 20 + 4);
    section_done("ScaleShift InferShape and Compile");
}

/* An op of `type` compiled for `node`, serialized. */
std::vector<uint8_t> compiled_state(const char *type, TestNode &node) {
    Op op(type);
    CHECK_OP(op.portable().InferShape(node));
    CHECK_OP(op.portable().Compile(node));
    return serialize(op);
}

void test_serialization() {
    TestNode add_node({desc({3, 1000}), desc({3, 1000})}, 1);
    TestNode ss_node({desc({3, 1000})}, 2);
    ss_node.SetFloat("alpha", -1.5f);
    ss_node.SetFloat("beta", 4.0f);
    const std::vector<uint8_t> add_state = compiled_state("AddCustom", add_node);
    const std::vector<uint8_t> ss_state = compiled_state("ScaleShift", ss_node);
    CHECK(std::memcmp(add_state.data(), "OM2S", 4) == 0);
    CHECK(compiled_state("AddCustom", add_node) == add_state);  // deterministic

    struct Case {
        const char *type;
        const std::vector<uint8_t> *state;
    } cases[] = {{"AddCustom", &add_state}, {"ScaleShift", &ss_state}};
    for (const Case &c : cases) {
        {   // round trip: the deserialized instance serializes to the same bytes
            Op fresh(c.type);
            CHECK_OP(fresh.portable().Deserialize(c.state->data(), c.state->size()));
            CHECK(serialize(fresh) == *c.state);
        }
        Op fresh(c.type);
        om2::PortableOp &p = fresh.portable();
        CHECK_OP_FAILS(p.Deserialize(nullptr, 0), "NULL");
        for (size_t n = 0; n < c.state->size(); ++n) {  // every truncation
            CHECK_OP_FAILS(p.Deserialize(c.state->data(), n), c.type);
            CHECK(!op_error().empty());
        }
        for (size_t i = 0; i < c.state->size(); ++i) {  // every single corrupt byte
            for (uint8_t flip : {0x01, 0x80, 0xff}) {
                std::vector<uint8_t> bad = *c.state;
                bad[i] ^= flip;
                CHECK_OP_FAILS(p.Deserialize(bad.data(), bad.size()), "Deserialize");
            }
        }
        std::vector<uint8_t> longer = *c.state;
        longer.push_back(0);
        CHECK_OP_FAILS(p.Deserialize(longer.data(), longer.size()), "trailing");
        std::vector<uint8_t> bad_magic = *c.state;
        bad_magic[0] = 'X';
        CHECK_OP_FAILS(p.Deserialize(bad_magic.data(), bad_magic.size()), "magic");
        // After all those failures the instance is still not usable, then a good state loads.
        uint8_t *data = nullptr;
        size_t size = 0;
        CHECK_OP_FAILS(p.Serialize(&data, &size), "not compiled");
        CHECK_OP(p.Deserialize(c.state->data(), c.state->size()));
    }
    {   // the state of one op is not accepted by the other
        Op add("AddCustom"), ss("ScaleShift");
        CHECK_OP_FAILS(add.portable().Deserialize(ss_state.data(), ss_state.size()), "kind");
        CHECK_OP_FAILS(ss.portable().Deserialize(add_state.data(), add_state.size()), "kind");
    }
    {   // a truncated .bin file: "corrupt" data is reported with a message, not a crash
        Op ss("ScaleShift");
        CHECK_OP_FAILS(ss.portable().Deserialize(ss_state.data(), ss_state.size() - 1), "truncated");
        std::vector<uint8_t> flipped = ss_state;
        flipped[14] ^= 0x10;  // inside the payload
        CHECK_OP_FAILS(ss.portable().Deserialize(flipped.data(), flipped.size()), "checksum");
    }
    section_done("serialization");
}

void test_execute(CountFn count, CountFn copy_count) {
    aclrtStream stream = nullptr;
    CHECK_ACL(aclrtCreateStream(&stream));

    // AddCustom over 100002 elements: several blocks (about 16 Ki elements each) and a ragged end.
    {
        const Om2CustomTensorDesc d = desc({7, 14286, 1});
        const int64_t n = elements(d);
        TestNode node({d, d}, 1);
        const std::vector<uint8_t> state = compiled_state("AddCustom", node);
        Op op("AddCustom");
        CHECK_OP(op.portable().Deserialize(state.data(), state.size()));
        DevBuf a(n * 4), b(n * 4), z(n * 4), z2(n * 4);
        fill(a, 1, -10, 10);
        fill(b, 2, -10, 10);
        std::memset(z.get(), 0, z.size());
        TestContext ctx(stream);
        ctx.AddInput(d, a);
        ctx.AddInput(d, b);
        ctx.AddOutput(d, z);
        const uint64_t execs = count(), launches = om2rtGetLaunchCount();
        CHECK_OP(op.eager().Execute(ctx));
        CHECK_ACL(aclrtSynchronizeStream(stream));
        CHECK(count() == execs + 1);
        CHECK(om2rtGetLaunchCount() == launches + 1);
        CHECK_CLOSE_ARRAY(n, z.f()[i], a.f()[i] + b.f()[i]);

        // Executed again with another output (an uncaptured reuse): the first result stays.
        TestContext ctx2(stream);
        ctx2.AddInput(d, b);
        ctx2.AddInput(d, b);
        ctx2.AddOutput(d, z2);
        CHECK_OP(op.eager().Execute(ctx2));
        CHECK_ACL(aclrtSynchronizeStream(stream));
        CHECK(count() == execs + 2);
        CHECK_CLOSE_ARRAY(n, z2.f()[i], b.f()[i] + b.f()[i]);
        CHECK_CLOSE_ARRAY(n, z.f()[i], a.f()[i] + b.f()[i]);

        // Tensors that do not match what the op was compiled for.
        TestContext few(stream);
        few.AddInput(d, a);
        few.AddOutput(d, z);
        CHECK_OP_FAILS(op.eager().Execute(few), "expected 2 and 1");
        TestContext small(stream);
        const Om2CustomTensorDesc other = desc({7, 100});
        small.AddInput(other, a);
        small.AddInput(other, b);
        small.AddOutput(other, z);
        CHECK_OP_FAILS(op.eager().Execute(small), "compiled for 100002");
        TestContext null_data(stream);
        null_data.AddInput(d, a);
        null_data.AddInput(d, b);
        null_data.AddOutput(d, z);
        null_data.outputs_[0].data = nullptr;
        CHECK_OP_FAILS(op.eager().Execute(null_data), "output 0");
    }
    // ScaleShift: two outputs, attributes from Compile, round-tripped through Deserialize.
    {
        const Om2CustomTensorDesc d = desc({3, 5, 4099});
        const int64_t n = elements(d);
        TestNode node({d}, 2);
        node.SetFloat("alpha", 2.0f);
        node.SetFloat("beta", 0.5f);
        const std::vector<uint8_t> state = compiled_state("ScaleShift", node);
        Op op("ScaleShift");
        CHECK_OP(op.portable().Deserialize(state.data(), state.size()));
        DevBuf x(n * 4), y0(n * 4), y1(n * 4);
        fill(x, 3, -5, 5);
        TestContext ctx(stream);
        ctx.AddInput(d, x);
        ctx.AddOutput(d, y0);
        ctx.AddOutput(d, y1);
        const uint64_t execs = count();
        CHECK_OP(op.eager().Execute(ctx));
        CHECK_ACL(aclrtSynchronizeStream(stream));
        CHECK(count() == execs + 1);
        CHECK_CLOSE_ARRAY(n, y0.f()[i], x.f()[i] * 2.0f + 0.5f);
        CHECK_CLOSE_ARRAY(n, y1.f()[i], x.f()[i] * 2.0f - 0.5f);
    }
    // ScaleShift with default attributes, on the NULL stream (synchronous).
    {
        const Om2CustomTensorDesc d = desc({10});
        TestNode node({d}, 2);
        Op op("ScaleShift");
        CHECK_OP(op.portable().InferShape(node));
        CHECK_OP(op.portable().Compile(node));
        DevBuf x(40), y0(40), y1(40);
        fill(x, 4, -1, 1);
        TestContext ctx(nullptr);
        ctx.AddInput(d, x);
        ctx.AddOutput(d, y0);
        ctx.AddOutput(d, y1);
        CHECK_OP(op.eager().Execute(ctx));
        CHECK_CLOSE_ARRAY(10, y0.f()[i], x.f()[i]);
        CHECK_CLOSE_ARRAY(10, y1.f()[i], x.f()[i]);
    }
    // Empty tensors: nothing to launch, still a success.
    {
        const Om2CustomTensorDesc d = desc({0, 3});
        TestNode node({d, d}, 1);
        Op op("AddCustom");
        CHECK_OP(op.portable().InferShape(node));
        CHECK_OP(op.portable().Compile(node));
        DevBuf a(0), z(0);
        TestContext ctx(stream);
        ctx.AddInput(d, a);
        ctx.AddInput(d, a);
        ctx.AddOutput(d, z);
        const uint64_t launches = om2rtGetLaunchCount();
        CHECK_OP(op.eager().Execute(ctx));
        CHECK_ACL(aclrtSynchronizeStream(stream));
        CHECK(om2rtGetLaunchCount() == launches);
    }
    // A fresh instance that was neither compiled nor deserialized.
    {
        Op op("AddCustom");
        TestContext ctx(stream);
        CHECK_OP_FAILS(op.eager().Execute(ctx), "neither compiled nor deserialized");
    }
    CHECK(copy_count() == 0);  // the refused second copy of the library never ran anything
    CHECK_ACL(aclrtDestroyStream(stream));
    section_done("execute");
}

/* Execute during capture runs once; the recorded launch replays with the args buffer it wrote. */
void test_capture(CountFn count) {
    const Om2CustomTensorDesc d = desc({4, 8192});
    const int64_t n = elements(d);
    TestNode node({d}, 2);
    node.SetFloat("alpha", -3.0f);
    node.SetFloat("beta", 1.25f);
    const std::vector<uint8_t> state = compiled_state("ScaleShift", node);
    Op op("ScaleShift");
    CHECK_OP(op.portable().Deserialize(state.data(), state.size()));
    DevBuf x(n * 4), y0(n * 4), y1(n * 4);

    aclrtStream stream = nullptr, run = nullptr;
    CHECK_ACL(aclrtCreateStream(&stream));
    CHECK_ACL(aclrtCreateStream(&run));
    aclmdlRI ri = nullptr;
    CHECK_ACL(aclmdlRIBuildBegin(&ri, 0));
    CHECK_ACL(aclmdlRIBindStream(ri, stream, ACL_MODEL_STREAM_FLAG_HEAD));
    {
        TestContext ctx(stream);  // gone after capture: only the device addresses matter
        ctx.AddInput(d, x);
        ctx.AddOutput(d, y0);
        ctx.AddOutput(d, y1);
        const uint64_t launches = om2rtGetLaunchCount();
        CHECK_OP(op.eager().Execute(ctx));
        CHECK(om2rtGetLaunchCount() == launches);  // recorded, not run
    }
    CHECK_ACL(aclmdlRIEndTask(ri, stream));
    CHECK_ACL(aclmdlRIBuildEnd(ri, nullptr));
    const uint64_t execs = count();
    for (uint32_t replay = 0; replay < 3; ++replay) {
        fill(x, 10 + replay, -4, 4);
        if (replay == 1) {
            CHECK_ACL(aclmdlRIExecuteAsync(ri, run));
            CHECK_ACL(aclrtSynchronizeStream(run));
        } else {
            CHECK_ACL(aclmdlRIExecute(ri, -1));
        }
        CHECK_CLOSE_ARRAY(n, y0.f()[i], x.f()[i] * -3.0f + 1.25f);
        CHECK_CLOSE_ARRAY(n, y1.f()[i], x.f()[i] * -3.0f - 1.25f);
    }
    CHECK(count() == execs);  // Execute ran once, at capture
    CHECK_ACL(aclmdlRIDestroy(ri));
    CHECK_ACL(aclrtDestroyStream(stream));
    CHECK_ACL(aclrtDestroyStream(run));
    section_done("capture and replay");
}

int run(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s <libom2_sample_ops.so> <copy of it>\n", argv[0]);
        return 2;
    }
    const uint64_t live_at_start = om2rtGetLiveAllocationCount();
    test_factory_empty();

    void *lib = load_library(argv[1]);
    const CountFn count = execute_counter(lib);
    CHECK(count() == 0);
    section_done("load library");

    void *copy_lib = nullptr;
    test_registration(argv[2], &copy_lib);
    const CountFn copy_count = execute_counter(copy_lib);
    test_add_custom_compile();
    test_scale_shift_compile();
    test_serialization();
    test_execute(count, copy_count);
    test_capture(count);

    CHECK(om2rtGetLiveAllocationCount() == live_at_start);  // every op freed its args buffers
    CHECK(g_selftest_alive == 0);
    CHECK(g_impostor_calls == 0);
    CHECK(dlclose(copy_lib) == 0);  // it registered nothing, so the factory holds no pointer into it
    CHECK_ACL(aclFinalize());
    section_done("destroy and leaks");
    // `lib` stays loaded: the factory keeps its creators for the life of the process.
    std::printf("PASS: %d checks\n", g_checks);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const TestFailure &e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::printf("FAIL: unexpected exception: %s\n", e.what());
        return 1;
    }
}
