/*
 * om2_custom_compile.cpp -- the compiler's side of custom operators: om2gen's Python frontend
 * calls om2x_custom_prepare once per custom-op node, which runs the operator's InferShape,
 * Compile and Serialize (om2/custom_op.h) and hands back the output descriptions and the
 * serialized instance that becomes the node's *_CustomKernel.bin.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "om2/custom_op.h"
#include "om2/om2_executor.h"

namespace {

class NodeInfo : public om2::CustomOpNodeInfo {
public:
    /* An output whose desc arrives as ACL_DT_UNDEFINED is omitted (OM2_CUSTOM_OUTPUT_OMITTED): the
     * hooks see nullptr there, and Execute will see a null tensor at the same position. */
    NodeInfo(const char *name, const Om2CustomTensorDesc *inputs, size_t input_num, Om2CustomTensorDesc *outputs,
             size_t output_num, const Om2CustomAttr *attrs, size_t attr_num)
        : name_(name), inputs_(inputs), input_num_(input_num), outputs_(outputs), output_num_(output_num),
          attrs_(attrs), attr_num_(attr_num), omitted_(output_num) {
        for (size_t i = 0; i < output_num; ++i) omitted_[i] = outputs[i].data_type == OM2_CUSTOM_OUTPUT_OMITTED;
    }

    const char *GetNodeName() const override { return name_; }
    size_t GetInputNum() const override { return input_num_; }
    const Om2CustomTensorDesc *GetInputDesc(size_t i) const override { return i < input_num_ ? &inputs_[i] : nullptr; }
    size_t GetOutputNum() const override { return output_num_; }
    Om2CustomTensorDesc *GetOutputDesc(size_t i) override {
        return i < output_num_ && !omitted_[i] ? &outputs_[i] : nullptr;
    }
    const Om2CustomAttr *GetAttr(const char *name) const override {
        for (size_t i = 0; i < attr_num_; ++i) {
            if (name != nullptr && std::strcmp(attrs_[i].name, name) == 0) return &attrs_[i];
        }
        return nullptr;
    }

private:
    const char *name_;
    const Om2CustomTensorDesc *inputs_;
    size_t input_num_;
    Om2CustomTensorDesc *outputs_;
    size_t output_num_;
    const Om2CustomAttr *attrs_;
    size_t attr_num_;
    std::vector<bool> omitted_;
};

void SetError(char *err, size_t err_len, const std::string &msg) {
    if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", msg.c_str());
}

std::string OpError(const char *what) {
    const char *detail = Om2CustomOpGetError();
    return std::string(what) + (detail != nullptr && detail[0] != '\0' ? std::string(": ") + detail : "");
}

/* The operator's hook `hook` threw: its what() (the caller adds the op type and node name). */
std::string ThrownError(const char *hook) {
    try {
        throw;
    } catch (const std::exception &e) {
        return std::string(hook) + " threw a C++ exception: " + e.what();
    } catch (...) {
        return std::string(hook) + " threw a C++ exception that is not a std::exception (no message)";
    }
}

}  // namespace

extern "C" int32_t om2x_custom_prepare(const char *op_type, const char *node_name, const Om2CustomTensorDesc *inputs,
                                       size_t input_num, Om2CustomTensorDesc *outputs, size_t output_num,
                                       const Om2CustomAttr *attrs, size_t attr_num, uint8_t **blob, size_t *blob_size,
                                       char *err, size_t err_len) {
    *blob = nullptr;
    *blob_size = 0;
    void *raw = nullptr;
    const char *hook = "creating the operator";
    try {
        Om2CustomOpSetError("");
        raw = Om2CreateCustomOp(op_type);
        if (raw == nullptr) {
            SetError(err, err_len, OpError("the custom-op factory has no creator for this op type"));
            return -1;
        }
        om2::BaseCustomOp *op = static_cast<om2::BaseCustomOp *>(raw);
        om2::PortableOp *portable = op->AsPortable();
        if (portable == nullptr || op->AsEager() == nullptr) {
            Om2DestroyCustomOp(raw);
            SetError(err, err_len, "the operator must implement both PortableOp and EagerExecuteOp");
            return -1;
        }
        NodeInfo node(node_name, inputs, input_num, outputs, output_num, attrs, attr_num);
        hook = "InferShape";
        int32_t rc = 0;
        if ((rc = portable->InferShape(node)) != 0) {
            SetError(err, err_len, OpError("InferShape failed"));
        } else if (hook = "Compile", (rc = portable->Compile(node)) != 0) {
            SetError(err, err_len, OpError("Compile failed"));
        } else {
            uint8_t *data = nullptr;
            size_t size = 0;
            hook = "Serialize";
            if ((rc = portable->Serialize(&data, &size)) != 0) {
                SetError(err, err_len, OpError("Serialize failed"));
            } else {
                /* copy into malloc'd memory the caller frees with om2x_free */
                *blob = static_cast<uint8_t *>(std::malloc(size > 0 ? size : 1));
                if (*blob != nullptr && size > 0) std::memcpy(*blob, data, size);
                *blob_size = size;
                delete[] data;
                if (*blob == nullptr) rc = -1;
            }
        }
        Om2DestroyCustomOp(raw);
        return rc;
    } catch (...) {
        SetError(err, err_len, ThrownError(hook));
        if (raw != nullptr) Om2DestroyCustomOp(raw);
        return -1;
    }
}

extern "C" void om2x_free(void *p) { std::free(p); }
