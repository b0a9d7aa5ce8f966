/*
 * om2_model_tables.h -- the static tables a generated model is made of, and the one struct
 * (Om2ModelTables) through which the model's load-and-run code reads them.
 *
 * A generated model library has two translation units: <model>_tables.cpp (this model: its
 * inputs/outputs, kernel binaries, args slots, tiling words and dispatch table) and
 * om2_load_and_run.cpp (the same for every model: resources, kernel registration, capture,
 * run). Only the tables are compiled per model.
 */
#ifndef OM2_OM2_MODEL_TABLES_H
#define OM2_OM2_MODEL_TABLES_H

#include <stdint.h>

#include "acl/acl_base.h"
#include "om2/custom_op.h"

namespace om2 {

/* Where an args slot points. Values follow GertModelArgKind; CONSTANT uses CUSTOM_VALUE (7). */
enum Om2ArgKind : uint32_t {
    OM2_ARG_INPUT = 0,      /* GERT_MODEL_ARG_INPUT */
    OM2_ARG_OUTPUT = 1,     /* GERT_MODEL_ARG_OUTPUT */
    OM2_ARG_WORKSPACE = 2,  /* GERT_MODEL_ARG_WORKSPACE */
    OM2_ARG_CONSTANT = 7,   /* GERT_MODEL_ARG_CUSTOM_VALUE */
    /* om2gen's own: a buffer the model allocates at load (aclrtMalloc) and frees at unload, which
     * its load tasks write and its captured tasks only read (Winograd's transformed weights) */
    OM2_ARG_MODEL_BUFFER = 16,
};

/* GE's OpDispatchType (om2_codegen_types.h). */
enum Om2DispatchType : uint32_t {
    OM2_DISPATCH_AICORE = 0,
    OM2_DISPATCH_END_GRAPH = 6,
    OM2_DISPATCH_LABEL_SET = 7,
    OM2_DISPATCH_LABEL_GOTO_EX = 12,
    OM2_DISPATCH_LABEL_SWITCH_BY_INDEX = 13,
    OM2_DISPATCH_CUSTOM_KERNEL = 21,
};

/* The task and kernel types the generated tables use (GE's ModelTaskType and ccKernelType). */
enum Om2ModelTaskType : uint32_t {
    MODEL_TASK_KERNEL = 0,
    MODEL_TASK_LABEL_SET = 9,
    MODEL_TASK_PREPROCESS_KERNEL = 43,  /* a dynamic model's device tiling (docs/dynamic-shapes.md) */
    MODEL_TASK_MEMCPY_ASYNC = 13,
    MODEL_TASK_END_GRAPH = 19,
    MODEL_TASK_STREAM_LABEL_SWITCH_BY_INDEX = 23,
    MODEL_TASK_STREAM_LABEL_GOTO = 24,
    MODEL_TASK_CUSTOM_KERNEL = 50,
};

enum Om2CcKernelType : uint32_t {
    CC_KERNEL_TE = 2,
    CC_KERNEL_CUSTOMIZED = 3,  /* custom operators (om2/custom_op.h) */
    CC_KERNEL_CUST_AI_CPU = 7, /* a PREPROCESS_KERNEL's op_master_device function */
    CC_KERNEL_INVALID = 10000,
};

/* A model input or output. */
struct Om2IoDesc {
    const char *name;
    aclDataType data_type;
    uint64_t size;          /* bytes */
    uint64_t dim_num;
    const int64_t *dims;
};

/* A kernel binary of data/kernels_<arch>/ and the entry it exports. */
struct Om2KernelBin {
    const char *bin_file;   /* also the bin id in the process-wide bin-handle store */
    const char *entry;
};

/* One 8-byte address slot of the args table. */
struct Om2ArgSlot {
    uint32_t args_offset;   /* byte offset in the args table */
    Om2ArgKind kind;
    uint32_t index;         /* input/output index, or constants blob index */
    uint64_t offset;        /* byte offset inside that buffer */
};

/* One task of the dispatch table (GE's kOpDefs). */
/* A dynamic dim: its range and the input dim that gives its value at run time. */
struct Om2SymbolDesc {
    const char *name;
    int64_t lo;
    int64_t hi;             /* -1: no upper bound */
    uint32_t input;
    uint32_t axis;
    int64_t multiple;       /* the input dim is multiple * the symbol (a lo~hi%m dim; 1: the dim itself) */
    /* A data-dependent count (NonZero's, docs/dynamic-shapes.md): the node whose kernel writes it
     * into the symbols table during the replay, read back after it; nullptr: bound from input
     * `input`'s dim `axis` before the replay. */
    const char *producer;
};

struct Om2OpDef {
    Om2DispatchType dispatch_type;
    uint32_t task_type;     /* ModelTaskType */
    uint32_t kernel_type;   /* ccKernelType */
    uint32_t kernel;        /* AICORE: index into kKernelBins; LABEL_SET: the label;
                             * LABEL_SWITCH_BY_INDEX / LABEL_GOTO_EX: index into kLabelLists;
                             * CUSTOM_KERNEL: index into kCustomOps */
    uint32_t block_dim;
    uint32_t args_offset;   /* this task's args in the args table */
    uint32_t args_size;     /* address slots + tiling bytes */
    uint32_t first_slot;    /* its address slots: kArgSlots[first_slot, first_slot + slot_num) */
    uint32_t slot_num;
    uint32_t first_tiling;  /* its tiling words: kTilingData[first_tiling, first_tiling + tiling_num) */
    uint32_t tiling_num;
    const char *op_name;    /* source ONNX node */
    const char *op_type;
};

/* A list of labels a switch (or goto) task jumps into: kLabelListEntries[first, first + num). */
struct Om2LabelList {
    uint32_t first;
    uint32_t num;
};

/* A custom operator instance: its op type (found in the custom-op factory), its serialized state
 * (data/custom_ops/binaries_<arch>/<bin_file>) and its tensors' descriptions, inputs then outputs:
 * kCustomTensorDescs[first_desc, first_desc + input_num + output_num). */
struct Om2CustomOpDef {
    const char *op_type;
    const char *bin_file;
    uint32_t input_num;
    uint32_t output_num;
    uint32_t first_desc;
};

/* Everything model-specific, as the load-and-run code sees it. */
struct Om2ModelTables {
    const char *model_name;
    uint64_t input_num;
    const Om2IoDesc *inputs;
    uint64_t output_num;
    const Om2IoDesc *outputs;
    uint64_t kernel_bin_num;
    const Om2KernelBin *kernel_bins;
    uint64_t arg_slot_num;
    const Om2ArgSlot *arg_slots;
    const int64_t *tiling_data;
    uint64_t task_num;
    const Om2OpDef *op_defs;
    uint64_t constant_num;     /* constants blobs the model expects in GertModelLoadConfig */
    uint64_t work_size;        /* bytes of workspace */
    uint64_t args_size;        /* bytes of the args table */
    uint64_t io_slot_num;      /* arg slots that point at model inputs/outputs */
    uint64_t label_num;        /* labels of the captured model (If branches) */
    uint64_t label_list_num;
    const Om2LabelList *label_lists;
    const uint32_t *label_list_entries;
    uint64_t custom_op_num;    /* custom operator instances (CUSTOM_KERNEL tasks) */
    const Om2CustomOpDef *custom_ops;
    const Om2CustomTensorDesc *custom_tensor_descs;
    /* appended for the checks at capture (om2_launch_note.h) */
    uint64_t tiling_word_num;  /* entries of tiling_data */
    uint64_t constants_size;   /* bytes of constants blob 0 that constant slots may address */
    /* appended for gears (docs/gears.md): one model compiled for several input shapes. Its last
     * input is ascend_mbatch_shape_data (int32[gear_value_num]); a run's values must equal one
     * gear's, and each input and output then holds that gear's bytes. */
    uint64_t gear_num;               /* 0: a static model */
    uint64_t gear_value_num;
    const int32_t *gear_values;      /* gear g's values: [g * gear_value_num, (g + 1) * gear_value_num) */
    const uint64_t *gear_io_sizes;   /* gear g's bytes of each input, then of each output:
                                      * [g * (input_num + output_num), ...) */
    /* appended for dynamic shapes (docs/dynamic-shapes.md): inputs and outputs whose dims the run
     * decides, within ranges. Each run binds the symbols from the input dims, checks them, writes
     * them to the workspace at symbols_offset (the PREPROCESS_KERNEL tasks read them there) and
     * reports the output dims. Inputs' and outputs' sizes above are those of the largest shapes. */
    uint64_t symbol_num;             /* 0: every shape static */
    const Om2SymbolDesc *symbols;
    uint64_t symbols_offset;         /* workspace offset of int64_t[symbol_num] */
    uint64_t io_dim_num;             /* the dims of every input, then of every output */
    /* Writes io_dim_num dims (each input's, then each output's, in order) for the symbol values. */
    void (*io_dims)(const int64_t *symbols, int64_t *dims);
    /* The assumptions the compile took that the ranges do not decide (two dims equal), checked
     * over the bound symbols before each replay: the Om2GuardCheck of the model's guard_check.so
     * (kAutofuse, om2/om2_autofuse.h), compiled in; NULL when the compile took none. */
    int32_t (*guard_check)(const int64_t *symbols, uint64_t symbol_num, char *error, uint64_t error_len);
    /* appended for load tasks: kernel tasks run once by GertModelLoad, on a stream of their own
     * before the capture (aclrtLaunchKernelV2, aclrtSynchronizeStream), whose outputs are buffers
     * the model owns: allocated at load (aclrtMalloc), freed at unload, addressed by
     * OM2_ARG_MODEL_BUFFER slots and only read by the captured tasks. Winograd's transformed
     * weights are made so from the raw filters in the constants (docs/performance.md). A load
     * task's slots and tiling words are in arg_slots and tiling_data, its args in the args table,
     * as a captured task's. */
    uint64_t model_buffer_num;
    const uint64_t *model_buffer_sizes;  /* bytes of each */
    uint64_t load_task_num;
    const Om2OpDef *load_op_defs;        /* in launch order */
};

/* Defined by <model>_tables.cpp. */
extern const Om2ModelTables kModelTables;

}  // namespace om2

#endif /* OM2_OM2_MODEL_TABLES_H */
