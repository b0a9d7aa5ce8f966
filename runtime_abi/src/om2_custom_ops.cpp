/*
 * om2_custom_ops.cpp -- the custom-operator factory (GE's CustomOpFactory) behind the C entry
 * points of om2/custom_op.h.
 *
 *   - Om2RegisterCustomOpCreator: the first creator registered for an op type wins; a second
 *     registration returns 1 and changes nothing; NULL or empty op_type, or a NULL creator: -1.
 *     It runs from static constructors of custom-op libraries (REG_AUTO_MAPPING_OP), possibly
 *     while another thread uses the factory.
 *   - Om2CreateCustomOp: a new instance from the op type's creator, or NULL (unknown op type, or
 *     the creator failed or threw), with a message for Om2CustomOpGetError that names the op type
 *     and the registered ones.
 *   - Om2DestroyCustomOp: deletes through om2::BaseCustomOp's virtual destructor, so the
 *     library that created the instance also frees it. NULL is a no-op.
 *   - Om2ListCustomOps: the registered op types in byte-wise sorted order (deterministic,
 *     whatever order libraries were loaded in). The strings are owned by the factory and stay
 *     valid for the life of the process (nothing is ever unregistered).
 *   - Om2CustomOpSetError / Om2CustomOpGetError: one message per thread. Get returns the last
 *     message set on the calling thread ("" when none); it does not clear it. Set(NULL) or
 *     Set("") clears. Messages longer than the buffer are truncated.
 *
 * A registered creator is a function inside a custom-op library: that library must stay loaded
 * for as long as the factory may call it (om2gen keeps custom-op libraries resident).
 *
 * Every function is extern "C", catches all exceptions, and takes the registry mutex. Nothing
 * runs at load time: the registry is a function-local static created on first use and
 * deliberately leaked, so that it outlives static destructors of other libraries and threads
 * that may still call in while the process exits.
 */
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "om2/custom_op.h"

namespace {

struct Registry {
    std::mutex m;
    std::map<std::string, Om2CustomOpCreator> creators;  // node-based: key strings never move
};

Registry &registry() {
    static Registry *instance = new Registry();  // leaked on purpose (see the header comment)
    return *instance;
}

constexpr size_t kErrorCap = 4096;
thread_local char t_error[kErrorCap];  // zero-initialised, trivially destructible: no TLS constructor

void set_error(const char *message) {
    if (message == nullptr) {
        t_error[0] = '\0';
        return;
    }
    if (message == t_error) return;  // Set(Get()): already there (snprintf must not overlap)
    std::snprintf(t_error, kErrorCap, "%s", message);
}

/* "A, B, C" or "none": the registered op types (registry mutex held). */
std::string registered_list_locked(const Registry &reg) {
    if (reg.creators.empty()) return "none";
    std::string out;
    for (const auto &entry : reg.creators) {
        if (!out.empty()) out += ", ";
        out += entry.first;
    }
    return out;
}

}  // namespace

extern "C" OM2_CUSTOM_API void Om2CustomOpSetError(const char *message) {
    set_error(message);  // snprintf does not throw
}

extern "C" OM2_CUSTOM_API const char *Om2CustomOpGetError(void) { return t_error; }

extern "C" OM2_CUSTOM_API int32_t Om2RegisterCustomOpCreator(const char *op_type, Om2CustomOpCreator creator) {
    if (op_type == nullptr || op_type[0] == '\0' || creator == nullptr) return -1;
    try {
        Registry &reg = registry();
        std::lock_guard<std::mutex> lock(reg.m);
        return reg.creators.emplace(op_type, creator).second ? 0 : 1;  // emplace keeps the first one
    } catch (...) {
        return -1;  // out of memory
    }
}

extern "C" OM2_CUSTOM_API void *Om2CreateCustomOp(const char *op_type) {
    try {
        if (op_type == nullptr) {
            set_error("Om2CreateCustomOp: op_type is NULL");
            return nullptr;
        }
        Om2CustomOpCreator creator = nullptr;
        Registry &reg = registry();
        {
            std::lock_guard<std::mutex> lock(reg.m);
            auto it = reg.creators.find(op_type);
            if (it == reg.creators.end()) {
                const std::string msg = std::string("Om2CreateCustomOp: no custom operator '") + op_type +
                                        "' is registered (registered: " + registered_list_locked(reg) + ")";
                set_error(msg.c_str());
                return nullptr;
            }
            creator = it->second;
        }
        // Called without the lock: a creator may itself use the factory.
        void *op = nullptr;
        try {
            op = creator();
        } catch (const std::exception &e) {
            const std::string msg = std::string("Om2CreateCustomOp: the creator of '") + op_type +
                                    "' threw an exception: " + e.what();
            set_error(msg.c_str());
            return nullptr;
        } catch (...) {
            const std::string msg = std::string("Om2CreateCustomOp: the creator of '") + op_type +
                                    "' threw an exception";
            set_error(msg.c_str());
            return nullptr;
        }
        if (op == nullptr) {
            const std::string msg = std::string("Om2CreateCustomOp: the creator of '") + op_type + "' returned NULL";
            set_error(msg.c_str());
        }
        return op;
    } catch (...) {
        set_error("Om2CreateCustomOp: out of memory");
        return nullptr;
    }
}

extern "C" OM2_CUSTOM_API void Om2DestroyCustomOp(void *op) {
    if (op == nullptr) return;
    try {
        delete static_cast<om2::BaseCustomOp *>(op);
    } catch (...) {
        // Destructors are implicitly noexcept, so this is only reached by one declared
        // noexcept(false); the exception must not cross the C boundary.
        set_error("Om2DestroyCustomOp: the operator's destructor threw an exception");
    }
}

extern "C" OM2_CUSTOM_API size_t Om2ListCustomOps(const char **op_types, size_t capacity) {
    try {
        Registry &reg = registry();
        std::lock_guard<std::mutex> lock(reg.m);
        if (op_types != nullptr) {
            size_t i = 0;
            for (auto it = reg.creators.begin(); it != reg.creators.end() && i < capacity; ++it, ++i) {
                op_types[i] = it->first.c_str();
            }
        }
        return reg.creators.size();
    } catch (...) {
        return 0;  // std::mutex::lock failed
    }
}
