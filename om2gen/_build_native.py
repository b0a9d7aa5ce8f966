"""cffi builder of om2gen._native: the CPU ACL runtime plus the executor's native helpers.

Built once when om2gen is installed (setup.py's cffi_modules), never at load time. The sources
are runtime_abi/src/**/*.cpp (the CPU ACL runtime is runtime_abi/src/acl_rt/) plus the model load-and-run code (templates/model/load_and_run.cpp.j2)
rendered in its table-driven form: the classic-OM executor runs OM files through the same code
every OM2 model library carries. The Python executor reaches them through the declarations below.
"""
import os
import re
from pathlib import Path

import jinja2
from cffi import FFI

_ROOT = Path(__file__).resolve().parents[1]
_RUNTIME = _ROOT / "runtime_abi"
_GENERATED = _ROOT / "build" / "om2gen_native"


def _version() -> str:
    text = (_ROOT / "om2gen" / "version.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def _table_driven_load_and_run() -> Path:
    """templates/model/load_and_run.cpp.j2 with table_driven=True, written under build/."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_ROOT / "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = env.get_template("model/load_and_run.cpp.j2").render(generator=f"om2gen {_version()}",
                                                                 table_driven=True)
    _GENERATED.mkdir(parents=True, exist_ok=True)
    path = _GENERATED / "om2_load_and_run_tables.cpp"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path

# The types cffi needs, written here ("..." lets cffi take sizes and values from the headers; the
# structs and enums given in full are checked against them by cffi when the module is built).
TYPES = """
typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtBinHandle;
typedef void *GertModelHandle;

typedef struct GertTensor {
    uint64_t struct_size;
    void *data;
    uint64_t size;
    int64_t data_type;
    uint64_t dim_num;
    const int64_t *dims;
} GertTensor;

typedef struct GertModelLoadCallbacks { uint64_t struct_size; ...; } GertModelLoadCallbacks;

typedef struct GertModelLoadConfig {
    uint64_t struct_size;
    const char **bin_files;
    const void **bin_data;
    uint64_t *bin_size;
    uint64_t bin_num;
    void **constants;
    void **var_addrs;
    void *work_ptr;
    uint64_t *session_id;
    uint64_t model_id;
    void *instance_handle;
    const GertModelLoadCallbacks *callbacks;
    int64_t priority;
    uint64_t reuse_zero_copy;
    uint64_t constant_num;
    uint64_t work_size;
    ...;
} GertModelLoadConfig;

typedef struct GertModelRunConfig {
    uint64_t struct_size;
    uint64_t input_count;
    GertTensor **input_data;
    uint64_t output_count;
    GertTensor **output_data;
    uint64_t stream_sync_timeout_ms;
    ...;
} GertModelRunConfig;

typedef struct Om2xInstance {
    const void *rt_model_handle;
    uint64_t launched_tasks;
    const char *const *bin_files;
    const char *const *bin_digests;
    uint64_t bin_num;
} Om2xInstance;

typedef struct Om2xEntryPoints { ...; } Om2xEntryPoints;

#define OM2_CUSTOM_MAX_DIMS ...
typedef struct Om2CustomTensorDesc {
    int64_t data_type;
    uint64_t dim_num;
    int64_t dims[8];
} Om2CustomTensorDesc;
typedef struct Om2CustomAttr {
    const char *name;
    int32_t kind;
    uint32_t count;
    const int64_t *ints;
    const float *floats;
    const char *str;
} Om2CustomAttr;

/* om2/om2_so_in_om.h: custom-op registries per library and per model, symbols of packed SOs */

/* om2/om2_model_tables.h: what a model is made of, built in memory by the classic-OM executor */
typedef enum { OM2_ARG_INPUT = 0, OM2_ARG_OUTPUT = 1, OM2_ARG_WORKSPACE = 2, OM2_ARG_CONSTANT = 7 } Om2ArgKind;
typedef enum { OM2_DISPATCH_AICORE = 0, OM2_DISPATCH_END_GRAPH = 6, OM2_DISPATCH_LABEL_SET = 7,
               OM2_DISPATCH_LABEL_GOTO_EX = 12, OM2_DISPATCH_LABEL_SWITCH_BY_INDEX = 13,
               OM2_DISPATCH_CUSTOM_KERNEL = 21 } Om2DispatchType;
typedef int... aclDataType;
typedef struct Om2IoDesc { const char *name; aclDataType data_type; uint64_t size; uint64_t dim_num; const int64_t *dims; } Om2IoDesc;
typedef struct Om2KernelBin { const char *bin_file; const char *entry; } Om2KernelBin;
typedef struct Om2ArgSlot { uint32_t args_offset; Om2ArgKind kind; uint32_t index; uint64_t offset; } Om2ArgSlot;
typedef struct Om2OpDef {
    Om2DispatchType dispatch_type; uint32_t task_type; uint32_t kernel_type; uint32_t kernel; uint32_t block_dim;
    uint32_t args_offset; uint32_t args_size; uint32_t first_slot; uint32_t slot_num; uint32_t first_tiling;
    uint32_t tiling_num; const char *op_name; const char *op_type;
} Om2OpDef;
typedef struct Om2LabelList { uint32_t first; uint32_t num; } Om2LabelList;
typedef struct Om2CustomOpDef {
    const char *op_type; const char *bin_file; uint32_t input_num; uint32_t output_num; uint32_t first_desc;
} Om2CustomOpDef;
typedef struct Om2ModelTables {
    const char *model_name;
    uint64_t input_num; const Om2IoDesc *inputs;
    uint64_t output_num; const Om2IoDesc *outputs;
    uint64_t kernel_bin_num; const Om2KernelBin *kernel_bins;
    uint64_t arg_slot_num; const Om2ArgSlot *arg_slots;
    const int64_t *tiling_data;
    uint64_t task_num; const Om2OpDef *op_defs;
    uint64_t constant_num; uint64_t work_size; uint64_t args_size; uint64_t io_slot_num; uint64_t label_num;
    uint64_t label_list_num; const Om2LabelList *label_lists; const uint32_t *label_list_entries;
    uint64_t custom_op_num; const Om2CustomOpDef *custom_ops; const Om2CustomTensorDesc *custom_tensor_descs;
    uint64_t tiling_word_num; uint64_t constants_size;
    uint64_t gear_num; uint64_t gear_value_num; const int32_t *gear_values; const uint64_t *gear_io_sizes;
} Om2ModelTables;

#define OM2_MODEL_ABI_VERSION ...
#define OM2_KERNEL_ABI_VERSION ...

typedef enum { ACL_MEM_MALLOC_HUGE_FIRST = 0, ... } aclrtMemMallocPolicy;
typedef enum { ACL_MEMCPY_HOST_TO_DEVICE = 1, ... } aclrtMemcpyKind;

typedef struct Om2rtProfMark { uint64_t time_ns; char msg[128]; } Om2rtProfMark;
#define OM2RT_MAX_PROF_MARKS ...
#define OM2RT_MAX_THREADS ...
"""

# The functions the Python side calls: their declarations are taken from the headers (from the
# runtime source or the load-and-run template that defines them where no header declares one), so
# the cdef follows the headers (tests/package/test_cdef_headers.py checks the built module does).
FUNCTIONS = (
    "om2x_custom_prepare", "om2x_free", "Om2ListCustomOps", "om2x_custom_launch_count",
    "om2rtLoadSharedObjectFromMemory", "om2x_custom_library_load", "om2x_custom_library_ops",
    "om2x_custom_scope_enter", "om2x_custom_scope_leave", "om2x_custom_scope_current", "om2x_so_load",
    "om2x_so_unload", "om2x_so_symbol", "om2x_tables_model_load", "om2x_tables_entry_points",
    "om2x_fill_load_callbacks", "om2x_bin_store_size", "om2x_dlopen_from_memory", "om2x_resolve_entry_points",
    "om2x_dlclose", "om2x_protect_read_only", "om2x_model_tables", "om2x_abi_version", "om2x_last_error",
    "om2x_model_load", "om2x_model_run", "om2x_model_run_async", "om2x_model_unload", "aclrtCreateStream",
    "aclrtDestroyStream", "aclrtSynchronizeStream", "aclrtMalloc", "aclrtFree", "aclrtMemcpy",
    "aclGetRecentErrMsg", "om2rtSetThreadCount", "om2rtTakeProfMarks", "om2rtGetThreadCount",
    "om2rtSetIssueThreadCount", "om2rtGetIssueThreadCount", "om2rtGetLaunchCount",
    "om2rtGetLiveAllocationCount",
)

_HEADERS = [*sorted((_RUNTIME / "include").rglob("*.h")), *sorted((_RUNTIME / "src").glob("*.h"))]
_SOURCES = sorted((_RUNTIME / "src").rglob("*.cpp"))
_DEFINERS = [*_SOURCES, _ROOT / "templates" / "model" / "load_and_run.cpp.j2"]
_DECL = re.compile(r"(?:^|[;}\n])\s*((?:[A-Za-z_]\w*[\s*]+)+?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?=[;{])", re.S)
_NOT_A_TYPE = re.compile(r"\b(return|if|while|for|switch|sizeof|else|case|define)\b")


def declarations(text: str) -> dict[str, list[str]]:
    """{function: its C declarations ("ret name(params);")} in a header or source text, without
    comments, extern "C", static/inline and visibility macros (XXX_API, XXX_VISIBILITY)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*|\{#.*?#\}", " ", text, flags=re.S).replace('extern "C"', " ")
    out: dict[str, list[str]] = {}
    for m in _DECL.finditer(text):
        ret, name, params = m.groups()
        if _NOT_A_TYPE.search(ret):
            continue
        ret = " ".join(w for w in ret.split() if w not in ("static", "inline")
                       and not re.fullmatch(r"[A-Z0-9_]+_(API|VISIBILITY)", w))
        out.setdefault(name, []).append(f"{ret} {name}({' '.join(params.split())});")
    return out


def _scan(paths) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for name, decls in declarations(path.read_text()).items():
            found.setdefault(name, []).extend(decls)
    return found


def function_declarations() -> list[str]:
    headers, definers = _scan(_HEADERS), _scan(_DEFINERS)
    out = []
    for name in FUNCTIONS:
        decls = headers.get(name) or definers.get(name)
        if not decls:
            raise SystemExit(f"_build_native: {name} is declared in no header under {_RUNTIME}")
        out.append(decls[0])
    return out


CDEF = TYPES + "\n".join(function_declarations()) + "\n"

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "om2gen._native",
    '#include "om2/om2_executor.h"\n#include "om2/om2_cpu_runtime.h"\n#include "om2/om2_kernel.h"\n'
    '#include "om2/custom_op.h"\n#include "om2/om2_model_tables.h"\n#include "om2/om2_so_in_om.h"\n'
    'using namespace om2;\n'
    'extern "C" int32_t om2x_tables_model_load(const void *, const GertModelLoadConfig *, GertModelHandle *);\n'
    'extern "C" void om2x_tables_entry_points(Om2xEntryPoints *);\n'
    'extern "C" int32_t om2x_custom_prepare(const char *, const char *, const Om2CustomTensorDesc *, size_t,\n'
    '    Om2CustomTensorDesc *, size_t, const Om2CustomAttr *, size_t, uint8_t **, size_t *, char *, size_t);\n'
    'extern "C" void om2x_free(void *);\n',
    source_extension=".cpp",
    # relative to the working directory: setup.py runs from the project root and wants relative paths
    sources=[os.path.relpath(p) for p in [*_SOURCES, _table_driven_load_and_run()]],
    include_dirs=[str(_RUNTIME / "include")],
    extra_compile_args=["-std=c++17", "-O2", "-pthread", "-fvisibility=default"],
    extra_link_args=["-pthread"],
    libraries=["dl", "stdc++"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
