/*
 * om2_op_host.h -- the host op library of a dynamic-shape classic .om (GE RT2's op_host "op
 * master", packed in SO_BINS as kSpaceRegistry, so_in_om_flag 0x8000; docs/dynamic-shapes.md).
 *
 * om2gen generates the library per model (om2gen/codegen/host_library.py) and names it for the
 * host it runs on: libom2_op_host_<content hash>_linux_<arch>.so. The classic-OM executor loads
 * it from memory, dlsyms OM2_OP_HOST_ENTRY, checks the table's version against
 * OM2_OP_HOST_VERSION, and then runs each model run the RT2 way (runtime_abi/src/om2_rt2.cpp):
 * bind the symbols from the input shapes, InferShape of every op in order, Tiling of every op,
 * place every tensor of this run's sizes in one arena (by the lifetimes in the table), launch.
 *
 * Per op the pair GE's RT2 runs (runtime/v2/kernel/common_kernel_impl/infer_shape.cc, tiling.cc):
 *   InferShape  its outputs' dims for this run's input dims (its attributes compiled in);
 *   Tiling      the tiling data its kernel reads, the block count first, and its scratch bytes.
 * Both READ THE RUN'S SYMBOL TABLE: symbols[k] is the value of dynamic dim k (Om2OpHostSymbol:
 * dim `axis` of model input `input`), bound from the model's inputs before any op runs, as
 * BindSymbols does for an .om2 (templates/model/load_and_run.cpp.j2). Sizes are the lowering's
 * expressions over the symbols (om2gen/ir/symbolic.py, printed as C with om2/om2_dims.h). Each
 * InferShape also reads its op's input dims: it checks every input it does not define against
 * them (a mismatch is an error naming the op, the input and the dims), and writes the dims of an
 * input that no op writes (a view, e.g. a Reshape's output, or a constant).
 *
 * A data-dependent count (NonZero's, NonMaxSuppression's: GE's third-class ops) is a symbol too,
 * bound from no input: the op whose count_symbol it is writes it on the device. Prepare takes it
 * at its bound (`hi`), so the arena and the outputs are planned for the most it can be; execute
 * waits after that op, reads the count back, and runs InferShape of every op and Tiling of the
 * ops after it again at the count before launching them (only the ops whose InferShape or Tiling
 * read that symbol: Om2OpHostOp.symbol_mask).
 *
 * Control flow (If, Loop: GE's LABEL_SWITCH_BY_INDEX and LABEL_GOTO_EX tasks) is the table's
 * steps: the executor walks them from the first, launching an op at each OM2_OP_HOST_LAUNCH; at an
 * OM2_OP_HOST_SWITCH it waits for the stream, reads the uint32 branch index an earlier kernel wrote
 * and goes on at that step (an index past the last target goes to the last, as ACL's switch does);
 * an OM2_OP_HOST_GOTO goes on at its one target. Every op's InferShape and Tiling run once per run
 * before any launch: a loop's body has the same shapes at every iteration, and the buffers it
 * reads live across the whole loop ([first_op, last_op] spans it, as the compiler recorded).
 *
 * Tensors live in one of four places (Om2OpHostTensor.kind): a model input or output (the
 * caller's buffer), the constants (WEIGHTS_DATA at `offset`), or a buffer of the arena. Buffers
 * are placed per run: the executor sizes each from this run's dims (a tensor's elements times
 * its dtype size, an op's scratch from its Tiling) and gives it an offset so that no two buffers
 * live at one op overlap ([first_op, last_op], as the compiler recorded them).
 */
#ifndef OM2_OM2_OP_HOST_H
#define OM2_OM2_OP_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The table layout below; a loader refuses a library whose table reports another one. */
#define OM2_OP_HOST_VERSION 3u
/* The one symbol a loader dlsyms: an Om2OpHostGetTableFunc. */
#define OM2_OP_HOST_ENTRY "Om2OpHostGetTable"
/* Most dims of one tensor, most tiling words of one op. */
#define OM2_OP_HOST_MAX_RANK 16
#define OM2_OP_HOST_MAX_TILING 64
/* No tensor / buffer (Om2OpHostTable.input_tensors, Om2OpHostOp.scratch_buffer). */
#define OM2_OP_HOST_NONE 0xFFFFFFFFu

/* Om2OpHostTensor.kind */
#define OM2_OP_HOST_INPUT 0u     /* model input `index` */
#define OM2_OP_HOST_OUTPUT 1u    /* model output `index` */
#define OM2_OP_HOST_CONSTANT 2u  /* the constants, at byte `offset` */
#define OM2_OP_HOST_BUFFER 3u    /* arena buffer `index` */

/* Om2OpHostBuffer.kind */
#define OM2_OP_HOST_TENSOR_BYTES 0u   /* tensor `ref`'s bytes at this run's dims */
#define OM2_OP_HOST_SCRATCH 1u        /* op `ref`'s scratch (Om2OpHostTiling.workspace_bytes) */

typedef struct Om2OpHostSymbol {
    const char *name;    /* "N", "S", "x_2" */
    uint32_t input;      /* the model input whose dim gives it (OM2_OP_HOST_NONE, and axis too: a */
                         /* data-dependent count, which the op naming it in count_symbol writes): */
    uint32_t axis;       /* that dim is `multiple` times the symbol (lo~hi%m: the symbol counts */
    int64_t multiple;    /* the m's; a dim m does not divide is refused), else 1 */
    int64_t lo;          /* the symbol's range */
    int64_t hi;          /* -1: unbounded (an .om's -1 dim; the arena grows); a count's bound */
} Om2OpHostSymbol;

typedef struct Om2OpHostTensor {
    const char *name;
    uint32_t kind;       /* OM2_OP_HOST_INPUT ... OM2_OP_HOST_BUFFER */
    uint32_t index;      /* the input, output or buffer */
    uint64_t offset;     /* in the constants (OM2_OP_HOST_CONSTANT) */
    uint32_t rank;
    uint32_t dtype_size; /* bytes per element */
} Om2OpHostTensor;

typedef struct Om2OpHostBuffer {
    uint32_t kind;       /* OM2_OP_HOST_TENSOR_BYTES, OM2_OP_HOST_SCRATCH */
    uint32_t ref;        /* the tensor, or the op */
    uint32_t first_op;   /* live from the op that writes it ... */
    uint32_t last_op;    /* ... to the last that reads it */
} Om2OpHostBuffer;

/* Om2OpHostStep.kind */
#define OM2_OP_HOST_LAUNCH 0u    /* launch op `op` */
#define OM2_OP_HOST_SWITCH 1u    /* wait, read the uint32 in tensor `index`, go on at step targets[index] */
#define OM2_OP_HOST_GOTO 2u      /* go on at step targets[0] */

/* What an op's Tiling writes. */
typedef struct Om2OpHostTiling {
    int64_t block_dim;                         /* blocks to launch (the kernel's block count) */
    int64_t words[OM2_OP_HOST_MAX_TILING];     /* the TilingData fields, in order */
    uint64_t workspace_bytes;                  /* its scratch buffer's bytes this run */
} Om2OpHostTiling;

/* InferShape: writes dims[t][0..rank) of each output tensor t of the op (and of the inputs it
 * defines, see above) from `symbols`, after checking the other inputs' dims. dims[t] is the
 * dims row of tensor t (Om2OpHostTable.tensors order). 0, or nonzero with a message of at most
 * `err_len` bytes in err. */
typedef int32_t (*Om2OpHostInferShapeFunc)(const int64_t *symbols, int64_t *const *dims, char *err,
                                           uint64_t err_len);
/* Tiling: the op's block count, tiling words and scratch bytes for this run's `symbols` (its
 * tensors' dims are the ones InferShape wrote). 0, or nonzero with a message in err. */
typedef int32_t (*Om2OpHostTilingFunc)(const int64_t *symbols, int64_t *const *dims, Om2OpHostTiling *tiling,
                                       char *err, uint64_t err_len);

/* One kernel task of TASK_INFO, in launch order. Its address slots are tensors (slots[]), then,
 * if count_symbol is set, the int64 the kernel writes that count into, then, if scratch_buffer is
 * set, that buffer, then, for a tiling-sink kernel (sink), the address of
 * its tiling (the block count, then the words: the executor keeps it beside the op's args); other
 * kernels take their tiling words inline after the slots. */
typedef struct Om2OpHostOp {
    const char *name;           /* the node */
    const char *type;           /* its op type */
    uint32_t task;              /* its task in TASK_INFO */
    uint32_t slot_num;
    const uint32_t *slots;      /* tensor per address slot: inputs, then outputs */
    uint32_t scratch_buffer;    /* OM2_OP_HOST_NONE or a buffer */
    uint32_t sink;              /* 1: a tiling-sink kernel (its tiling behind an address slot) */
    uint32_t tiling_num;        /* tiling words */
    uint32_t max_block_dim;     /* the most blocks the kernel's launch note declares */
    Om2OpHostInferShapeFunc infer_shape;
    Om2OpHostTilingFunc tiling;
    uint32_t count_symbol;      /* OM2_OP_HOST_NONE or the data-dependent count (a symbol) it writes */
    uint64_t symbol_mask;       /* the symbols its InferShape and Tiling read: bit s for symbol s < 63, */
                                /* bit 63 for any later one */
} Om2OpHostOp;

/* One step of the run, in order: a launch, or a jump of the model's control flow. */
typedef struct Om2OpHostStep {
    uint32_t kind;              /* OM2_OP_HOST_LAUNCH, OM2_OP_HOST_SWITCH, OM2_OP_HOST_GOTO */
    uint32_t task;              /* its task in TASK_INFO: a kernel's, a LABEL_SWITCH_BY_INDEX's, a LABEL_GOTO_EX's */
    uint32_t op;                /* LAUNCH: the op */
    uint32_t index;             /* SWITCH: the tensor holding the uint32 branch index */
    uint32_t target_num;
    const uint32_t *targets;    /* SWITCH, GOTO: steps to go on at (step_num: the run's end) */
} Om2OpHostStep;

typedef struct Om2OpHostTable {
    uint32_t version;           /* OM2_OP_HOST_VERSION */
    uint32_t symbol_num;
    const Om2OpHostSymbol *symbols;
    uint32_t tensor_num;
    const Om2OpHostTensor *tensors;
    uint32_t buffer_num;
    const Om2OpHostBuffer *buffers;
    uint32_t op_num;
    const Om2OpHostOp *ops;
    uint32_t input_num;
    const uint32_t *input_tensors;    /* model input i's tensor (its dims: the run's), or OM2_OP_HOST_NONE */
    uint32_t output_num;
    const uint32_t *output_tensors;   /* the tensor whose dims are model output j's */
    /* Writes the dims of the model's outputs that no op writes (views of other tensors). */
    Om2OpHostInferShapeFunc infer_outputs;
    uint32_t step_num;
    const Om2OpHostStep *steps;       /* the run, every op launched by one LAUNCH step */
} Om2OpHostTable;

typedef const Om2OpHostTable *(*Om2OpHostGetTableFunc)(void);

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_OP_HOST_H */
