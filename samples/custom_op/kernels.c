/*
 * kernels.c -- the SPMD kernels of the sample custom operators (ops.cpp), following the kernel
 * ABI of om2/om2_kernel.h. build.py compiles this file into a kernel binary (an ELF shared
 * object) whose bytes are embedded in libom2_sample_ops.so; the operators load it from memory
 * with aclrtBinaryLoadFromData and launch these entries with aclrtLaunchKernelV2.
 *
 * Each launch runs the entry once per block index, concurrently; every block handles the even
 * share of the `total` elements that om2_block_range gives it.
 *
 * The tiling structs are mirrored in ops.cpp (AddCustomTiling, ScaleShiftTiling): keep both in
 * sync. They contain only fixed-size fields in natural alignment, so C and C++ lay them out
 * identically.
 */
#include <stdint.h>

#include "om2/om2_kernel.h"

typedef struct AddCustomTiling {
    int64_t total; /* elements of each tensor */
} AddCustomTiling;

typedef struct ScaleShiftTiling {
    int64_t total; /* elements of each tensor */
    float alpha;
    float beta;
} ScaleShiftTiling;

/* args {a}{b}{z}{tiling}: z = a + b (float32, same shape). */
OM2_KERNEL(add_custom) {
    const float *restrict a = (const float *)OM2_ADDR(0);
    const float *restrict b = (const float *)OM2_ADDR(1);
    float *restrict z = (float *)OM2_ADDR(2);
    const AddCustomTiling *tiling = OM2_TILING(AddCustomTiling, 3);
    int64_t begin, end;
    om2_block_range(tiling->total, GetBlockIdx(), GetBlockNum(), &begin, &end);
    for (int64_t i = begin; i < end; ++i) z[i] = a[i] + b[i];
}

/* args {x}{y0}{y1}{tiling}: y0 = x * alpha + beta, y1 = x * alpha - beta (float32). */
OM2_KERNEL(scale_shift) {
    const float *restrict x = (const float *)OM2_ADDR(0);
    float *restrict y0 = (float *)OM2_ADDR(1);
    float *restrict y1 = (float *)OM2_ADDR(2);
    const ScaleShiftTiling *tiling = OM2_TILING(ScaleShiftTiling, 3);
    const float alpha = tiling->alpha, beta = tiling->beta;
    int64_t begin, end;
    om2_block_range(tiling->total, GetBlockIdx(), GetBlockNum(), &begin, &end);
    for (int64_t i = begin; i < end; ++i) {
        const float scaled = x[i] * alpha;
        y0[i] = scaled + beta;
        y1[i] = scaled - beta;
    }
}
