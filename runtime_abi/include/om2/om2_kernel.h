/*
 * om2_kernel.h -- the kernel ABI of om2gen's CPU runtime: what a kernel binary exports and
 * how it reads its arguments. The counterpart of an Ascend C kernel entry
 * (`extern "C" __global__ __aicore__ void k(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling)`).
 *
 * A kernel binary is an ELF shared object exporting one or more entries of type
 * Om2KernelEntry. aclrtLaunchKernelV2(func, numBlocks, args, argsSize, cfg, stream) calls the
 * entry once per block index 0..numBlocks-1, in any order and concurrently (SPMD), each call
 * with the same args buffer. The args buffer holds the kernel's addresses as 8-byte slots in
 * the order inputs, outputs, workspace, followed by the tiling bytes (args_format
 * "{i...}{o...}{ws...}{t}"): a kernel with N address slots finds its tiling data at offset 8*N.
 */
#ifndef OM2_OM2_KERNEL_H
#define OM2_OM2_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define OM2_KERNEL_ABI_VERSION 1u

typedef void (*Om2KernelEntry)(const void *args, uint32_t block_idx, uint32_t block_num);

#ifdef __cplusplus
#define OM2_KERNEL_EXTERN extern "C"
#else
#define OM2_KERNEL_EXTERN
#endif

/* Declares a kernel entry. Inside it, GetBlockIdx()/GetBlockNum() behave as in Ascend C. */
#define OM2_KERNEL(name)                                                                        \
    OM2_KERNEL_EXTERN __attribute__((visibility("default"))) void name(                        \
        const void *om2_args, uint32_t om2_block_idx, uint32_t om2_block_num)

#define GetBlockIdx() ((int64_t)om2_block_idx)
#define GetBlockNum() ((int64_t)om2_block_num)

/* The i-th address slot of the args buffer. */
#define OM2_ADDR(i) (((void *const *)om2_args)[(i)])
/* The tiling data that follows `n_addr` address slots. */
#define OM2_TILING(type, n_addr) ((const type *)((const uint8_t *)om2_args + 8u * (size_t)(n_addr)))

/* The range [*begin, *end) of `total` items that block `idx` of `num` owns (even split). */
static inline void om2_block_range(int64_t total, int64_t idx, int64_t num, int64_t *begin, int64_t *end) {
    int64_t base = total / num, rem = total % num;
    *begin = idx * base + (idx < rem ? idx : rem);
    *end = *begin + base + (idx < rem ? 1 : 0);
}

/* Tile t of `tiles` over [0, extent) in whole units (a register tile's rows or columns): the
 * tiles' sizes differ by at most one unit, so 13 column panels in 4 tiles are 4 + 3 + 3 + 3, not
 * 4 + 4 + 4 + 1 (which two cores would run as 8 + 5). */
static inline void om2_tile_range(int64_t t, int64_t tiles, int64_t extent, int64_t unit, int64_t *lo, int64_t *hi) {
    const int64_t units = (extent + unit - 1) / unit;
    *lo = t * units / tiles * unit;
    *hi = (t + 1) * units / tiles * unit;
    if (*hi > extent) *hi = extent;
}

#endif /* OM2_OM2_KERNEL_H */
