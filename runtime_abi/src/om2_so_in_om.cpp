/*
 * om2_so_in_om.cpp -- symbol lookup in shared objects packed in a model (om2/om2_so_in_om.h).
 * Loading itself is om2rtLoadSharedObjectFromMemory (memfd + dlopen, acl_rt/loader.cpp).
 */
#include <dlfcn.h>
#include <link.h>

#include "om2/om2_so_in_om.h"

extern "C" void *om2x_so_symbol(void *handle, const char *name) {
    if (handle == nullptr || name == nullptr) return nullptr;
    void *symbol = dlsym(handle, name);
    if (symbol == nullptr) return nullptr;
    struct link_map *object = nullptr;
    struct link_map *owner = nullptr;
    Dl_info info;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &object) != 0) return nullptr;
    if (dladdr1(symbol, &info, reinterpret_cast<void **>(&owner), RTLD_DL_LINKMAP) == 0) return nullptr;
    return owner == object ? symbol : nullptr;
}
