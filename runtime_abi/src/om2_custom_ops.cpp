/*
 * om2_custom_ops.cpp -- the custom-operator factory (GE's CustomOpFactory) behind the C entry
 * points of om2/custom_op.h, with registries per library and per model (om2/om2_so_in_om.h).
 *
 * Where registrations land and where lookups look:
 *   - A library loaded with om2x_custom_library_load gets a registry of its own: every
 *     Om2RegisterCustomOpCreator call its static constructors (REG_AUTO_MAPPING_OP) make on the
 *     loading thread while it is being loaded lands there, and nowhere else.
 *   - Registrations made outside such a load (a program that dlopens a library itself, or
 *     registers its own creators) land in the process registry, GE's process-level factory.
 *   - om2x_custom_scope_enter makes a list of library registries "the model's": until the
 *     matching om2x_custom_scope_leave, Om2CreateCustomOp and Om2ListCustomOps on that thread
 *     look only in those registries, in order (the first library defining an op type wins). The
 *     process registry is NOT consulted then: a model sees exactly the libraries packed in it,
 *     never another model's and never a process-global fallback. om2gen's executor enters the
 *     model's scope around GertModelLoad (an empty scope for a model without custom operators);
 *     the compiler enters the scope of the libraries it was given around a compilation.
 *   - Without a scope, lookups use the process registry (a host program using the factory
 *     directly, as tests/custom_op/factory_selftest.cpp does).
 *
 *   - Om2RegisterCustomOpCreator: the first creator registered for an op type in a registry wins;
 *     a second registration returns 1 and changes nothing; NULL or empty op_type, or a NULL
 *     creator: -1. It runs from static constructors of custom-op libraries, possibly while
 *     another thread uses the factory.
 *   - Om2CreateCustomOp: a new instance from the op type's creator, or NULL (unknown op type, or
 *     the creator failed or threw), with a message for Om2CustomOpGetError that names the op type
 *     and the registered ones.
 *   - Om2DestroyCustomOp: deletes through om2::BaseCustomOp's virtual destructor, so the
 *     library that created the instance also frees it. NULL is a no-op.
 *   - Om2ListCustomOps: the op types visible on this thread in byte-wise sorted order, each
 *     once (deterministic, whatever order libraries were loaded in). The strings are owned by
 *     the registries and stay valid for the life of the process (nothing is ever unregistered).
 *   - Om2CustomOpSetError / Om2CustomOpGetError: one message per thread. Get returns the last
 *     message set on the calling thread ("" when none); it does not clear it. Set(NULL) or
 *     Set("") clears. Messages longer than the buffer are truncated.
 *
 * A registered creator is a function inside a custom-op library: that library must stay loaded
 * for as long as the factory may call it (om2gen keeps custom-op libraries resident), so the
 * registries of loaded libraries are never freed.
 *
 * Every function is extern "C", catches all exceptions, and takes the registry mutexes. Nothing
 * runs at load time: the process registry is a function-local static created on first use and
 * deliberately leaked, so that it outlives static destructors of other libraries and threads
 * that may still call in while the process exits; the thread-local pointers are trivially
 * initialised.
 */
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "om2/custom_op.h"
#include "om2/om2_cpu_runtime.h"
#include "om2/om2_so_in_om.h"

namespace {

struct Registry {
    std::mutex m;
    std::map<std::string, Om2CustomOpCreator> creators;  // node-based: key strings never move
};

Registry &process_registry() {
    static Registry *instance = new Registry();  // leaked on purpose (see the header comment)
    return *instance;
}

/* The model's libraries, innermost scope first through `previous`. */
struct Scope {
    std::vector<Registry *> registries;
    Scope *previous;
};

thread_local Registry *t_loading = nullptr;  // the library being loaded by this thread
thread_local Scope *t_scope = nullptr;        // the model scope entered on this thread

/* The registries a lookup on this thread consults, in order. */
std::vector<Registry *> visible() {
    if (t_scope != nullptr) return t_scope->registries;
    return {&process_registry()};
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

/* The visible op types, sorted, each once (first registry wins); pointers owned by the registries. */
std::vector<const char *> visible_op_types() {
    std::map<std::string, const char *> names;
    for (Registry *reg : visible()) {
        std::lock_guard<std::mutex> lock(reg->m);
        for (const auto &entry : reg->creators) names.emplace(entry.first, entry.first.c_str());
    }
    std::vector<const char *> out;
    out.reserve(names.size());
    for (const auto &entry : names) out.push_back(entry.second);
    return out;
}

/* "A, B, C" or "none". */
std::string registered_list() {
    std::string out;
    for (const char *name : visible_op_types()) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out.empty() ? "none" : out;
}

Om2CustomOpCreator find_creator(const char *op_type) {
    for (Registry *reg : visible()) {
        std::lock_guard<std::mutex> lock(reg->m);
        auto it = reg->creators.find(op_type);
        if (it != reg->creators.end()) return it->second;
    }
    return nullptr;
}

void set_error(char *err, size_t err_len, const std::string &message) {
    if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", message.c_str());
}

}  // namespace

extern "C" OM2_CUSTOM_API void Om2CustomOpSetError(const char *message) {
    set_error(message);  // snprintf does not throw
}

extern "C" OM2_CUSTOM_API const char *Om2CustomOpGetError(void) { return t_error; }

extern "C" OM2_CUSTOM_API int32_t Om2RegisterCustomOpCreator(const char *op_type, Om2CustomOpCreator creator) {
    if (op_type == nullptr || op_type[0] == '\0' || creator == nullptr) return -1;
    try {
        Registry &reg = t_loading != nullptr ? *t_loading : process_registry();
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
        const Om2CustomOpCreator creator = find_creator(op_type);
        if (creator == nullptr) {
            const std::string msg = std::string("Om2CreateCustomOp: no custom operator '") + op_type + "' is registered" +
                                    (t_scope != nullptr ? " in this model's custom-op libraries" : "") +
                                    " (registered: " + registered_list() + ")";
            set_error(msg.c_str());
            return nullptr;
        }
        // Called without a lock: a creator may itself use the factory.
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
        const std::vector<const char *> names = visible_op_types();
        if (op_types != nullptr) {
            for (size_t i = 0; i < names.size() && i < capacity; ++i) op_types[i] = names[i];
        }
        return names.size();
    } catch (...) {
        return 0;  // out of memory or std::mutex::lock failed
    }
}

// ---- om2/om2_so_in_om.h: per-library registries and model scopes ------------------------------

extern "C" int32_t om2x_custom_library_load(const void *data, size_t size, void **dl_handle, void **library,
                                            char *err, size_t err_len) {
    if (dl_handle == nullptr || library == nullptr) {
        set_error(err, err_len, "om2x_custom_library_load: null output pointer");
        return -1;
    }
    *dl_handle = nullptr;
    *library = nullptr;
    if (t_loading != nullptr) {
        set_error(err, err_len, "om2x_custom_library_load: called while another custom-op library is loading "
                                "on this thread (from a static constructor?)");
        return -1;
    }
    Registry *reg = nullptr;
    try {
        reg = new Registry();
    } catch (...) {
        set_error(err, err_len, "om2x_custom_library_load: out of memory");
        return -1;
    }
    t_loading = reg;
    const aclError rc = om2rtLoadSharedObjectFromMemory(data, size, 0, dl_handle);
    t_loading = nullptr;
    if (rc != ACL_SUCCESS) {
        delete reg;  // dlopen failed: the library (and any creator it registered) is gone
        try {
            const char *why = aclGetRecentErrMsg();
            set_error(err, err_len, std::string("loading it failed: ") + (why != nullptr ? why : "unknown error"));
        } catch (...) {
            set_error(err, err_len, "loading it failed");
        }
        return -1;
    }
    *library = reg;  // lives as long as the process: the library is never unloaded
    return 0;
}

extern "C" size_t om2x_custom_library_ops(const void *library, const char **op_types, size_t capacity) {
    if (library == nullptr) return 0;
    try {
        Registry *reg = static_cast<Registry *>(const_cast<void *>(library));
        std::lock_guard<std::mutex> lock(reg->m);
        size_t i = 0;
        if (op_types != nullptr) {
            for (auto it = reg->creators.begin(); it != reg->creators.end() && i < capacity; ++it, ++i) {
                op_types[i] = it->first.c_str();
            }
        }
        return reg->creators.size();
    } catch (...) {
        return 0;
    }
}

extern "C" int32_t om2x_custom_scope_enter(void *const *libraries, size_t n, void **token) {
    if (token == nullptr || (n > 0 && libraries == nullptr)) return -1;
    *token = nullptr;
    try {
        Scope *scope = new Scope();
        for (size_t i = 0; i < n; ++i) {
            if (libraries[i] == nullptr) {
                delete scope;
                return -1;
            }
            scope->registries.push_back(static_cast<Registry *>(libraries[i]));
        }
        scope->previous = t_scope;
        t_scope = scope;
        *token = scope;
        return 0;
    } catch (...) {
        return -1;
    }
}

extern "C" int32_t om2x_custom_scope_leave(void *token) {
    if (token == nullptr || token != t_scope) return -1;  // scopes are left innermost first, on their thread
    Scope *scope = t_scope;
    t_scope = scope->previous;
    delete scope;
    return 0;
}

extern "C" void *om2x_custom_scope_current(void) { return t_scope; }
