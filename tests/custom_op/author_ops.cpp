/*
 * author_ops.cpp -- custom operators written the way an outside operator author gets them wrong
 * or pushes the edges (tests/custom_op/test_author_*.py build it with authorlib.py):
 *
 *   GatedMul(x, g) -> (y, mask?)   mask is an optional output. InferShape and Execute each record
 *                                  how many output positions they see and which are present; the
 *                                  instance carries InferShape's view to Execute, which fails when
 *                                  the two differ and otherwise fills y with 100 * count + presence
 *                                  bits (and mask, when present, with 7).
 *   Thrower(x) -> y                throws from the hook named by its string attribute "where"
 *                                  (infer, compile, serialize, deserialize, execute), a
 *                                  std::runtime_error whose what() names it; "execute-int" throws
 *                                  an int from Execute.
 *   Plain(x) -> y, under hostile op types (EVIL_OP_TYPES below): y = 1 (filled at capture).
 *
 * Execute writes its outputs directly, at capture: the task after it replays every run.
 */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "om2/custom_op.h"

namespace {

void fill(Om2CustomTensor *t, float value) {
    if (t == nullptr) return;
    float *p = static_cast<float *>(t->data);
    for (uint64_t i = 0; i < t->size / sizeof(float); ++i) p[i] = value;
}

class GatedMul : public om2::PortableOp, public om2::EagerExecuteOp {
public:
    int32_t InferShape(om2::CustomOpNodeInfo &node) override {
        count_ = static_cast<uint8_t>(node.GetOutputNum());
        present_ = 0;
        for (size_t i = 0; i < node.GetOutputNum(); ++i) {
            Om2CustomTensorDesc *d = node.GetOutputDesc(i);
            if (d == nullptr) continue;
            *d = *node.GetInputDesc(0);
            present_ |= static_cast<uint8_t>(1u << i);
        }
        return 0;
    }
    int32_t Compile(const om2::CustomOpNodeInfo &) override { return 0; }
    int32_t Serialize(uint8_t **data, size_t *size) const override {
        *data = new uint8_t[2]{count_, present_};
        *size = 2;
        return 0;
    }
    int32_t Deserialize(const uint8_t *data, size_t size) override {
        if (size != 2) return 1;
        count_ = data[0];
        present_ = data[1];
        return 0;
    }
    int32_t Execute(om2::EagerOpExecutionContext &context) override {
        uint8_t present = 0;
        for (size_t i = 0; i < context.GetOutputNum(); ++i) {
            if (context.GetOutputTensor(i) != nullptr) present |= static_cast<uint8_t>(1u << i);
        }
        if (context.GetOutputNum() != count_ || present != present_) {
            char msg[160];
            std::snprintf(msg, sizeof msg, "InferShape saw %u outputs (present 0x%x), Execute sees %zu (present 0x%x)",
                          count_, present_, context.GetOutputNum(), present);
            Om2CustomOpSetError(msg);
            return 1;
        }
        fill(context.GetOutputTensor(0), 100.0f * count_ + present);
        if (count_ > 1) fill(context.GetOutputTensor(1), 7.0f);
        return 0;
    }

private:
    uint8_t count_ = 0;
    uint8_t present_ = 0;
};

class Thrower : public om2::PortableOp, public om2::EagerExecuteOp {
public:
    int32_t InferShape(om2::CustomOpNodeInfo &node) override {
        const Om2CustomAttr *where = node.GetAttr("where");
        where_ = where != nullptr && where->str != nullptr ? where->str : "";
        Maybe("infer");
        *node.GetOutputDesc(0) = *node.GetInputDesc(0);
        return 0;
    }
    int32_t Compile(const om2::CustomOpNodeInfo &) override {
        Maybe("compile");
        return 0;
    }
    int32_t Serialize(uint8_t **data, size_t *size) const override {
        Maybe("serialize");
        *data = new uint8_t[where_.size() + 1];
        std::memcpy(*data, where_.c_str(), where_.size() + 1);
        *size = where_.size() + 1;
        return 0;
    }
    int32_t Deserialize(const uint8_t *data, size_t size) override {
        if (size == 0 || data[size - 1] != 0) return 1;
        where_ = reinterpret_cast<const char *>(data);
        Maybe("deserialize");
        return 0;
    }
    int32_t Execute(om2::EagerOpExecutionContext &context) override {
        Maybe("execute");
        if (where_ == "execute-int") throw 42;
        fill(context.GetOutputTensor(0), 1.0f);
        return 0;
    }

private:
    void Maybe(const char *hook) const {
        if (where_ == hook) throw std::runtime_error(std::string("Thrower: boom in ") + hook);
    }
    std::string where_;
};

class Plain : public om2::PortableOp, public om2::EagerExecuteOp {
public:
    int32_t InferShape(om2::CustomOpNodeInfo &node) override {
        *node.GetOutputDesc(0) = *node.GetInputDesc(0);
        return 0;
    }
    int32_t Compile(const om2::CustomOpNodeInfo &) override { return 0; }
    int32_t Serialize(uint8_t **data, size_t *size) const override {
        *data = new uint8_t[1]{1};
        *size = 1;
        return 0;
    }
    int32_t Deserialize(const uint8_t *data, size_t size) override { return size == 1 && data[0] == 1 ? 0 : 1; }
    int32_t Execute(om2::EagerOpExecutionContext &context) override {
        fill(context.GetOutputTensor(0), 1.0f);
        return 0;
    }
};

}  // namespace

REG_AUTO_MAPPING_OP("GatedMul", GatedMul);
REG_AUTO_MAPPING_OP("Thrower", Thrower);
/* EVIL_OP_TYPES: a comma-separated list of string literals, written by the builder. */
#include "evil_op_types.h"
static const char *const kEvilOpTypes[] = {EVIL_OP_TYPES};
namespace {
struct RegisterEvil {
    RegisterEvil() {
        for (const char *op_type : kEvilOpTypes) {
            Om2RegisterCustomOpCreator(op_type, []() -> void * { return static_cast<om2::BaseCustomOp *>(new Plain()); });
        }
    }
} register_evil;
}  // namespace
