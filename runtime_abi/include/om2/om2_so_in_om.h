/*
 * om2_so_in_om.h -- native side of "SO in OM" for om2gen's executor and compiler: shared objects
 * packed in a model (OpSoStore, om2gen/so_in_om/info.py) are loaded from memory and looked up here.
 *
 * NOT part of the model ABI and not for custom-op library authors (they use om2/custom_op.h):
 * only om2gen's Python side calls these. Implemented in runtime_abi/src/om2_custom_ops.cpp
 * (custom-op registries) and runtime_abi/src/om2_so_in_om.cpp (symbols).
 */
#ifndef OM2_OM2_SO_IN_OM_H
#define OM2_OM2_SO_IN_OM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- custom-operator libraries: one registry per library, one scope per model ---- */

/* Loads a custom-op library from memory (memfd + dlopen, om2rtLoadSharedObjectFromMemory). The
 * REG_AUTO_MAPPING_OP registrations its static constructors make on this thread during the load,
 * and any later registration whose creator is code of the library, land in a registry owned by
 * this library, returned in *library (an opaque pointer that stays valid for the life of the
 * process: libraries are never unloaded). *dl_handle: the dlopen handle. 0 on success; -1 with
 * a message in err (the library is not loaded then). */
int32_t om2x_custom_library_load(const void *data, size_t size, void **dl_handle, void **library,
                                 char *err, size_t err_len);

/* The op types a library (or an SO from om2x_so_load) registered, sorted: writes up to `capacity`
 * pointers (owned by the registry: valid for the life of the process, for an om2x_so_load SO
 * until om2x_so_unload) and returns the count. */
size_t om2x_custom_library_ops(const void *library, const char **op_types, size_t capacity);

/* Makes `libraries` (from om2x_custom_library_load; n may be 0) the only custom operators the
 * calling thread sees -- Om2CreateCustomOp, Om2ListCustomOps -- until om2x_custom_scope_leave
 * with the returned *token. Among them the first library that registered an op type wins. The
 * process registry is not consulted while a scope is active. Scopes nest; leave them innermost
 * first, on the thread that entered them. 0 on success, -1 on a NULL argument or no memory. */
int32_t om2x_custom_scope_enter(void *const *libraries, size_t n, void **token);
/* 0, or -1 if token is not this thread's innermost scope (nothing changes then). */
int32_t om2x_custom_scope_leave(void *token);
/* This thread's innermost scope token, NULL outside any scope. */
void *om2x_custom_scope_current(void);

/* ---- any other packed shared object (op-master, space registry, autofuse) ---- */

/* Loads an SO from memory like om2x_custom_library_load, with a registry of its own that no scope
 * ever sees: whatever Om2RegisterCustomOpCreator calls it makes -- while loading on this thread, or
 * later with a creator that is its code -- land there, never in the process registry. *registry
 * identifies the loaded SO for om2x_so_unload. 0 on success; -1 with a message in err. */
int32_t om2x_so_load(const void *data, size_t size, void **dl_handle, void **registry, char *err, size_t err_len);
/* Unloads an SO loaded with om2x_so_load (dlclose) and frees its registry with everything
 * registered there. 0; -1 if `registry` is not a loaded one (NULL, a custom-op library's, already
 * unloaded), or when called from a static constructor/destructor of an SO being loaded or
 * unloaded, or if dlclose failed (the registry is freed then all the same). */
int32_t om2x_so_unload(void *registry);

/* ---- any packed shared object ---- */

/* The address of `name` if the shared object `handle` (a dlopen handle) itself defines it --
 * not one of its dependencies (dlsym alone would also find libc's) -- else NULL. */
void *om2x_so_symbol(void *handle, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_SO_IN_OM_H */
