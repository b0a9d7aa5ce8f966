/*
 * om2_dims.h -- the integer helpers of a dynamic model's size expressions (om2gen/ir/symbolic.py
 * prints them): the tiling functions of the device tiling library (PREPROCESS_KERNEL tasks) and
 * the model code that computes output shapes evaluate sizes with these, over the model's
 * symbols (one int64 per dynamic dim, docs/dynamic-shapes.md).
 */
#ifndef OM2_OM2_DIMS_H
#define OM2_OM2_DIMS_H

#include <stdint.h>

/* Python's a // b (floor division) for b > 0: sizes divide by positive numbers only. */
static inline int64_t om2_floordiv(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static inline int64_t om2_min(int64_t a, int64_t b) { return a < b ? a : b; }

static inline int64_t om2_max(int64_t a, int64_t b) { return a > b ? a : b; }

#endif /* OM2_OM2_DIMS_H */
