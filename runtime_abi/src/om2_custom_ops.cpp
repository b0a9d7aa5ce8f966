/*
 * om2_custom_ops.cpp -- the custom-operator factory (GE's CustomOpFactory) behind the C entry
 * points of om2/custom_op.h, with registries per library and per model (om2/om2_so_in_om.h).
 *
 * Where registrations land and where lookups look:
 *   - Every shared object om2gen loads itself gets a registry of its own: a custom-op library
 *     (om2x_custom_library_load) and any other packed SO (om2x_so_load: op-master, space
 *     registry, autofuse). Every Om2RegisterCustomOpCreator call its static constructors
 *     (REG_AUTO_MAPPING_OP) make on the loading thread while it is being loaded lands there, and
 *     so does a later call, on any thread, whose creator is code of that object (found with
 *     dladdr). Only custom-op libraries' registries are ever put in a scope; an SO loaded with
 *     om2x_so_load is unloaded with om2x_so_unload, which frees its registry with it, so none
 *     of its registrations can outlive its code.
 *   - A registration whose creator is code of another object the runtime loaded from memory (a
 *     kernel binary, a model library: their names are "/proc/self/fd/...") is refused (-1): such
 *     objects are unloaded with their model, and nothing looks creators up there.
 *   - Registrations made otherwise (a program that dlopens a library itself, or registers its
 *     own creators) land in the process registry, GE's process-level factory.
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
 *     the registries and stay valid for the life of the process (nothing visible to a lookup is
 *     ever unregistered).
 *   - Om2CustomOpSetError / Om2CustomOpGetError: one message per thread. Get returns the last
 *     message set on the calling thread ("" when none); it does not clear it. Set(NULL) or
 *     Set("") clears. Messages longer than the buffer are truncated.
 *
 * A registered creator is a function inside a custom-op library: that library must stay loaded
 * for as long as the factory may call it (om2gen keeps custom-op libraries resident), so the
 * registries of custom-op libraries are never freed. Those of other SOs die with the SO.
 *
 * Every function is extern "C", catches all exceptions, and takes the registry mutexes. Nothing
 * runs at load time: the process registry is a function-local static created on first use and
 * deliberately leaked, so that it outlives static destructors of other libraries and threads
 * that may still call in while the process exits; the thread-local pointers are trivially
 * initialised.
 */
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "acl/acl.h"
#include "om2/custom_op.h"
#include "om2/om2_cpu_runtime.h"
#include "om2/om2_so_in_om.h"

namespace {

struct Registry {
    std::mutex m;
    std::map<std::string, Om2CustomOpCreator> creators;  // node-based: key strings never move
    void *dl_handle = nullptr;        // the object it belongs to (om2x_so_load / om2x_custom_library_load)
    const void *object = nullptr;     // its link_map: the key in Owners::by_object
};

/* The registries of the objects om2gen loaded itself, by the object's link_map: where a
 * registration made after the load goes when its creator is code of that object. */
struct Owners {
    std::mutex m;
    std::unordered_map<const void *, Registry *> by_object;
    std::unordered_set<Registry *> unloadable;  // from om2x_so_load, not yet unloaded
};

Owners &owners() {
    static Owners *instance = new Owners();  // leaked on purpose (see the header comment)
    return *instance;
}

const char kMemoryObjectPrefix[] = "/proc/self/fd/";  // how the runtime names what it loads from memory

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

namespace {

/* Adds op_type -> creator to `reg` (the first registration of an op type wins). */
int32_t add(Registry &reg, const char *op_type, Om2CustomOpCreator creator) {
    std::lock_guard<std::mutex> lock(reg.m);
    return reg.creators.emplace(op_type, creator).second ? 0 : 1;
}

/* A registration made outside an om2gen load: into the registry of the object om2gen loaded whose
 * code `creator` is (holding Owners::m, so that the object cannot be unloaded meanwhile), the
 * process registry if om2gen did not load that object, or refused (-1) if it is another object
 * the runtime loaded from memory. */
int32_t add_by_owner(const char *op_type, Om2CustomOpCreator creator) {
    Dl_info info;
    struct link_map *object = nullptr;
    if (dladdr1(reinterpret_cast<void *>(creator), &info, reinterpret_cast<void **>(&object), RTLD_DL_LINKMAP) == 0 ||
        object == nullptr) {
        return add(process_registry(), op_type, creator);  // not code of any loaded object (a JIT, say)
    }
    {
        Owners &o = owners();
        std::lock_guard<std::mutex> lock(o.m);
        auto it = o.by_object.find(object);
        if (it != o.by_object.end()) return add(*it->second, op_type, creator);
    }
    if (object->l_name != nullptr &&
        std::strncmp(object->l_name, kMemoryObjectPrefix, sizeof kMemoryObjectPrefix - 1) == 0) {
        const std::string msg = std::string("Om2RegisterCustomOpCreator: '") + op_type +
                                "' refused: its creator is code of a kernel binary or model library, which "
                                "cannot register custom operators";
        set_error(msg.c_str());
        return -1;
    }
    return add(process_registry(), op_type, creator);
}

}  // namespace

extern "C" OM2_CUSTOM_API int32_t Om2RegisterCustomOpCreator(const char *op_type, Om2CustomOpCreator creator) {
    if (op_type == nullptr || op_type[0] == '\0' || creator == nullptr) return -1;
    try {
        return t_loading != nullptr ? add(*t_loading, op_type, creator) : add_by_owner(op_type, creator);
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

namespace {

/* Unloads the SO of `reg` (already unknown to Owners) and frees the registry. Registrations its
 * static destructors make on this thread land in the dying registry, not the process one. */
int unload(Registry *reg) {
    t_loading = reg;
    const int rc = dlclose(reg->dl_handle);
    t_loading = nullptr;
    delete reg;
    return rc;
}

/* Loads an SO from memory into a new registry of its own (see the header comment), known to
 * Owners by the object's link_map; `unloadable`: om2x_so_unload may unload it. */
int32_t load_with_registry(const char *api, bool unloadable, const void *data, size_t size, void **dl_handle,
                           void **library, char *err, size_t err_len) {
    if (dl_handle == nullptr || library == nullptr) {
        set_error(err, err_len, std::string(api) + ": null output pointer");
        return -1;
    }
    *dl_handle = nullptr;
    *library = nullptr;
    if (t_loading != nullptr) {
        set_error(err, err_len, std::string(api) + ": called while another SO is loading or unloading on this "
                                "thread (from a static constructor or destructor?)");
        return -1;
    }
    Registry *reg = nullptr;
    try {
        reg = new Registry();
    } catch (...) {
        set_error(err, err_len, std::string(api) + ": out of memory");
        return -1;
    }
    t_loading = reg;
    const aclError rc = om2rtLoadSharedObjectFromMemory(data, size, 0, &reg->dl_handle);
    t_loading = nullptr;
    if (rc != ACL_SUCCESS) {
        delete reg;  // dlopen failed: the SO (and any creator it registered) is gone
        try {
            const char *why = aclGetRecentErrMsg();
            set_error(err, err_len, std::string("loading it failed: ") + (why != nullptr ? why : "unknown error"));
        } catch (...) {
            set_error(err, err_len, "loading it failed");
        }
        return -1;
    }
    struct link_map *object = nullptr;
    if (dlinfo(reg->dl_handle, RTLD_DI_LINKMAP, &object) != 0 || object == nullptr) {
        unload(reg);
        set_error(err, err_len, std::string(api) + ": dlinfo found no link map for the loaded SO");
        return -1;
    }
    reg->object = object;
    try {
        Owners &o = owners();
        std::lock_guard<std::mutex> lock(o.m);
        o.by_object[object] = reg;
        if (unloadable) {
            try {
                o.unloadable.insert(reg);
            } catch (...) {
                o.by_object.erase(object);
                throw;
            }
        }
    } catch (...) {
        unload(reg);
        set_error(err, err_len, std::string(api) + ": out of memory");
        return -1;
    }
    *dl_handle = reg->dl_handle;
    *library = reg;
    return 0;
}

}  // namespace

extern "C" int32_t om2x_custom_library_load(const void *data, size_t size, void **dl_handle, void **library,
                                            char *err, size_t err_len) {
    // the library is never unloaded: its registry lives as long as the process
    return load_with_registry("om2x_custom_library_load", false, data, size, dl_handle, library, err, err_len);
}

extern "C" int32_t om2x_so_load(const void *data, size_t size, void **dl_handle, void **registry, char *err,
                                size_t err_len) {
    return load_with_registry("om2x_so_load", true, data, size, dl_handle, registry, err, err_len);
}

extern "C" int32_t om2x_so_unload(void *registry) {
    Registry *reg = static_cast<Registry *>(registry);
    if (reg == nullptr || t_loading != nullptr) return -1;
    try {
        Owners &o = owners();
        std::lock_guard<std::mutex> lock(o.m);
        if (o.unloadable.erase(reg) == 0) return -1;  // not from om2x_so_load, or already unloaded
        o.by_object.erase(reg->object);
    } catch (...) {
        return -1;  // std::mutex::lock failed
    }
    return unload(reg) == 0 ? 0 : -1;
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
