/*
 * om2_autofuse.h -- the entry points of the two kAutofuse shared objects (so_in_om_flag 0x2000)
 * om2gen makes for a dynamic model with fused element-wise groups (docs/so-in-om.md):
 *
 *   libom2_autofuse_<digest>.so (vendor vendors/om2gen): per fused node (GE's bin_file_path names
 *     this library on the node), its InferShape (output dims from input dims) and its host Tiling
 *     (the tiling data from the run's symbols: the same C as the node's function in the device
 *     tiling library, op_master_device), named by the node's C identifier.
 *   guard_check.so (vendor "", as GE): one function checking, before a run, every assumption the
 *     compile made that the ranges do not decide (two dims taken as equal), naming the node that
 *     relies on it.
 *
 * Host code for the model's target, loaded from memory (om2_so_in_om.h). Dims and symbols are
 * int64; every function returns OM2_AUTOFUSE_OK or an error code and then writes a NUL-terminated
 * message of at most error_len bytes to `error`.
 */
#ifndef OM2_OM2_AUTOFUSE_H
#define OM2_OM2_AUTOFUSE_H

#include <stdint.h>

#define OM2_AUTOFUSE_ABI_VERSION 1u

#define OM2_AUTOFUSE_OK 0
#define OM2_AUTOFUSE_GUARD_FAILED 1      /* an assumption does not hold for this run */
#define OM2_AUTOFUSE_BAD_SHAPE 2         /* the inputs' dims do not broadcast as the node needs */
#define OM2_AUTOFUSE_BAD_CALL 3          /* wrong symbol count */

#define OM2_AUTOFUSE_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Both libraries: the OM2_AUTOFUSE_ABI_VERSION they were generated for. */
typedef uint32_t (*Om2AutofuseAbiVersionFn)(void);
#define OM2_AUTOFUSE_ABI_VERSION_SYMBOL "Om2AutofuseAbiVersion"

/* guard_check.so: symbols[symbol_num] in the model's symbol order (model_meta.json
 * dynamic_shapes.symbols). */
typedef int32_t (*Om2GuardCheckFn)(const int64_t *symbols, uint64_t symbol_num, char *error, uint64_t error_len);
#define OM2_GUARD_CHECK_SYMBOL "Om2GuardCheck"

/* The autofuse library, per fused node <id>:
 *   Om2AutofuseInferShape_<id>: input_dims[i] the dims of the node's input i (its rank fixed at
 *     compile time), output_dims[j] receives output j's;
 *   Om2AutofuseTiling_<id>: tiling[0] the block count, then the kernel's TilingData fields. */
typedef int32_t (*Om2AutofuseInferShapeFn)(const int64_t *const *input_dims, int64_t *const *output_dims,
                                           char *error, uint64_t error_len);
typedef int32_t (*Om2AutofuseTilingFn)(const int64_t *symbols, uint64_t symbol_num, int64_t *tiling,
                                       char *error, uint64_t error_len);
#define OM2_AUTOFUSE_INFER_SHAPE_PREFIX "Om2AutofuseInferShape_"
#define OM2_AUTOFUSE_TILING_PREFIX "Om2AutofuseTiling_"

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_AUTOFUSE_H */
