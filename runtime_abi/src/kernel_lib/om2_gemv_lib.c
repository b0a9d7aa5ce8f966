/*
 * om2_gemv_lib.c -- the kernel library's product of a few rows with a packed B: om2_gemv of
 * om2/om2_gemv.h, compiled once per target and GEMM blocking and linked into every kernel binary
 * that calls it (om2gen/toolchain/kernel_lib.py).
 */
#define OM2_GEMV_LIBRARY
#include "om2/om2_gemv.h"
