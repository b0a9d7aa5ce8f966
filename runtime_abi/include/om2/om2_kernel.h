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

/* The i-th address slot of the args buffer. */
#define OM2_ADDR(i) (((void *const *)om2_args)[(i)])

#ifndef OM2_TILING_SINK
/* Declares a kernel entry. Inside it, GetBlockIdx()/GetBlockNum() behave as in Ascend C. */
#define OM2_KERNEL(name)                                                                        \
    OM2_KERNEL_EXTERN __attribute__((visibility("default"))) void name(                        \
        const void *om2_args, uint32_t om2_block_idx, uint32_t om2_block_num)

/* The tiling data that follows `n_addr` address slots. */
#define OM2_TILING(type, n_addr) ((const type *)((const uint8_t *)om2_args + 8u * (size_t)(n_addr)))
#else
/* Tiling sink (a kernel of a dynamic model, docs/dynamic-shapes.md): the tiling is not in the args
 * buffer but in device memory, written before each launch by the kernel's PREPROCESS_KERNEL task
 * from the shapes of the run, and address slot OM2_TILING_SINK points at it. Its first int64 is
 * the block count that tiling chose; the task launches the most blocks any size in range needs,
 * and the blocks past the chosen count return at once, so the kernel body sees GetBlockNum() as
 * the tiling's count, as a static launch would. */
#define OM2_KERNEL(name)                                                                        \
    static void name##_blocks(const void *om2_args, uint32_t om2_block_idx, uint32_t om2_block_num); \
    OM2_KERNEL_EXTERN __attribute__((visibility("default"))) void name(                        \
        const void *om2_args, uint32_t om2_block_idx, uint32_t om2_block_num) {                \
        const int64_t om2_blocks = *(const int64_t *)OM2_ADDR(OM2_TILING_SINK);                \
        (void)om2_block_num;                                                                    \
        if ((int64_t)om2_block_idx < om2_blocks) name##_blocks(om2_args, om2_block_idx, (uint32_t)om2_blocks); \
    }                                                                                           \
    static void name##_blocks(const void *om2_args, uint32_t om2_block_idx, uint32_t om2_block_num)

/* The tiling data after the block count, at the address in slot `n_addr` (== OM2_TILING_SINK). */
#define OM2_TILING(type, n_addr) ((const type *)((const int64_t *)OM2_ADDR(n_addr) + 1))
#endif

#define GetBlockIdx() ((int64_t)om2_block_idx)
#define GetBlockNum() ((int64_t)om2_block_num)

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
