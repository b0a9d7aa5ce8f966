/*
 * om2_gemm_lib.c -- the kernel library's packed GEMM: om2_gemm_rect, om2_gemm_rect_t and
 * om2_gemm_rect_t_images of om2/om2_gemm.h, compiled once per target and GEMM blocking (the
 * OM2_GEMM_* defines come from the command line, as the kernels that link it define them) and
 * linked into every kernel binary that calls them (om2gen/toolchain/kernel_lib.py).
 */
#define OM2_GEMM_LIBRARY
#include "om2/om2_gemm.h"
