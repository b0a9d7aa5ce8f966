/*
 * om2_gemm.h -- the packed, register-tiled float32 GEMM behind om2gen's Conv, MatMul and Gemm
 * kernels (GotoBLAS/BLIS structure).
 *
 *   C[M x N] (+)= A[M x K] * B[K x N]
 *
 * Both operands reach the micro-kernel packed: A in panels of OM2_GEMM_MR rows stored k-major
 * ([K][MR], rows past M zero), B in panels of OM2_GEMM_NR columns stored k-major ([K][NR],
 * columns past N zero). A constant operand (conv and Gemm/MatMul weights) is packed at compile
 * time by om2gen, over the whole K, in exactly this layout (om2gen/ops/gemm_pack.py); an operand
 * computed at run time is packed here, KC rows of k at a time, into the task's workspace --
 * straight from a strided matrix or, for convolution, from the input image (im2col fused into
 * the packing, never materialised).
 *
 * The includer defines OM2_GEMM_MR, OM2_GEMM_NR, OM2_GEMM_KC, OM2_GEMM_NC and OM2_GEMM_MC before
 * including this header: om2gen picks them per target (MR and NR fix the layout of the constants
 * it packs, KC, NC and MC the workspace it reserves; om2gen/ops/gemm_pack.py), and the micro-kernel is
 * written for the vector ISA the target's flags enable (AVX-512F, AVX2+FMA, NEON, else GCC
 * vector extensions).
 *
 * Work split: a kernel launch covers the output with rectangular tiles (multiples of MR x NR);
 * each SPMD block computes whole tiles, so blocks never share output bytes, and each block packs
 * into its own slice of the workspace.
 *
 * The kernel library: om2_gemm_rect and its transposed forms (the macro-kernel, the packing and
 * im2col: most of this header) are compiled once per target and blocking, from
 * runtime_abi/src/kernel_lib/om2_gemm_lib.c, which defines OM2_GEMM_LIBRARY, and linked into each
 * kernel binary that calls them (om2gen/toolchain/kernel_lib.py); a kernel sees their
 * declarations only. They work tile by tile on operands described at run time, so nothing is
 * lost by not inlining them into the kernel, and a model's kernels no longer each compile them.
 */
#ifndef OM2_OM2_GEMM_H
#define OM2_OM2_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(OM2_GEMM_MR) || !defined(OM2_GEMM_NR)
#error "define OM2_GEMM_MR and OM2_GEMM_NR before including om2/om2_gemm.h"
#endif

#define OM2_ALWAYS_INLINE static inline __attribute__((always_inline))
/* A function of the kernel library (om2gen/toolchain/kernel_lib.py): linked into the kernel
 * binaries that call it, never exported from them. */
#ifndef OM2_KERNEL_LIB
#define OM2_KERNEL_LIB __attribute__((visibility("hidden")))
#endif

/* ---- vector abstraction ------------------------------------------------------------------ */
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 om2_vf;
#define OM2_VL 16
#define om2_v_load(p) _mm512_loadu_ps(p)
#define om2_v_store(p, v) _mm512_storeu_ps((p), (v))
#define om2_v_set1(x) _mm512_set1_ps(x)
#define om2_v_zero() _mm512_setzero_ps()
#define om2_v_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define om2_v_add(a, b) _mm512_add_ps((a), (b))
#define om2_v_sub(a, b) _mm512_sub_ps((a), (b))
#define om2_v_mul(a, b) _mm512_mul_ps((a), (b))
#define om2_v_max(a, b) _mm512_max_ps((a), (b))
#define om2_v_min(a, b) _mm512_min_ps((a), (b))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 om2_vf;
#define OM2_VL 8
#define om2_v_load(p) _mm256_loadu_ps(p)
#define om2_v_store(p, v) _mm256_storeu_ps((p), (v))
#define om2_v_set1(x) _mm256_set1_ps(x)
#define om2_v_zero() _mm256_setzero_ps()
#define om2_v_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define om2_v_add(a, b) _mm256_add_ps((a), (b))
#define om2_v_sub(a, b) _mm256_sub_ps((a), (b))
#define om2_v_mul(a, b) _mm256_mul_ps((a), (b))
#define om2_v_max(a, b) _mm256_max_ps((a), (b))
#define om2_v_min(a, b) _mm256_min_ps((a), (b))
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
typedef float32x4_t om2_vf;
#define OM2_VL 4
#define om2_v_load(p) vld1q_f32(p)
#define om2_v_store(p, v) vst1q_f32((p), (v))
#define om2_v_set1(x) vdupq_n_f32(x)
#define om2_v_zero() vdupq_n_f32(0.0f)
#define om2_v_fma(a, b, c) vfmaq_f32((c), (a), (b))
#define om2_v_add(a, b) vaddq_f32((a), (b))
#define om2_v_sub(a, b) vsubq_f32((a), (b))
#define om2_v_mul(a, b) vmulq_f32((a), (b))
#define om2_v_max(a, b) vmaxq_f32((a), (b))
#define om2_v_min(a, b) vminq_f32((a), (b))
#else
/* Portable: GCC vector extensions (SSE2 on baseline x86-64). No FMA here, so a multiply and an add. */
typedef float om2_vf __attribute__((vector_size(16), aligned(4)));
#define OM2_VL 4
OM2_ALWAYS_INLINE om2_vf om2_v_load(const float *p) { om2_vf v; memcpy(&v, p, sizeof v); return v; }
OM2_ALWAYS_INLINE void om2_v_store(float *p, om2_vf v) { memcpy(p, &v, sizeof v); }
OM2_ALWAYS_INLINE om2_vf om2_v_set1(float x) { return (om2_vf){x, x, x, x}; }
#define om2_v_zero() om2_v_set1(0.0f)
#define om2_v_fma(a, b, c) ((a) * (b) + (c))
#define om2_v_add(a, b) ((a) + (b))
#define om2_v_sub(a, b) ((a) - (b))
#define om2_v_mul(a, b) ((a) * (b))
/* like x86 maxps/minps: b where either lane is NaN */
OM2_ALWAYS_INLINE om2_vf om2_v_max(om2_vf a, om2_vf b) { for (int i = 0; i < 4; ++i) b[i] = a[i] > b[i] ? a[i] : b[i]; return b; }
OM2_ALWAYS_INLINE om2_vf om2_v_min(om2_vf a, om2_vf b) { for (int i = 0; i < 4; ++i) b[i] = a[i] < b[i] ? a[i] : b[i]; return b; }
#endif

/* Keeps GCC from turning a copy or fill loop into a memmove/memset call (a libc call per run of a
 * few floats costs more than the copy): the index looks modified each iteration. No instruction. */
#define OM2_NO_LIBCALL(j) __asm__("" : "+r"(j))

/* p[0:n] = min(hi, max(lo, p[0:n])) in place (a Relu or Clip fused into a convolution's store;
 * NaN stays NaN): over a tile the kernel has just written, while it is in cache. */
static inline void om2_clamp_run(float *restrict p, int64_t n, float lo, float hi) {
    const om2_vf vlo = om2_v_set1(lo), vhi = om2_v_set1(hi);
    int64_t j = 0;
    for (; j + OM2_VL <= n; j += OM2_VL) om2_v_store(p + j, om2_v_min(vhi, om2_v_max(vlo, om2_v_load(p + j))));
    for (; j < n; ++j) {
        const float v = p[j] < lo ? lo : p[j];
        p[j] = v > hi ? hi : v;
    }
}

/* dst[0:n] = src[0:n], or zeros when src is NULL: the short runs of im2col packing, inline. The
 * tail uses masked accesses, which never touch memory past the run. */
OM2_ALWAYS_INLINE void om2_copy_run(float *restrict dst, const float *restrict src, int64_t n) {
    int64_t j = 0;
    for (; j + OM2_VL <= n; j += OM2_VL) {
        om2_v_store(dst + j, src ? om2_v_load(src + j) : om2_v_zero());
        OM2_NO_LIBCALL(j);
    }
    if (j == n) return;
#if defined(__AVX512F__)
    const __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(dst + j, m, src ? _mm512_maskz_loadu_ps(m, src + j) : _mm512_setzero_ps());
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(dst + j, m, src ? _mm256_maskload_ps(src + j, m) : _mm256_setzero_ps());
#else
    for (; j < n; ++j) dst[j] = src ? src[j] : 0.0f;
#endif
}

#if OM2_GEMM_NR % OM2_VL != 0
#error "OM2_GEMM_NR must be a multiple of the vector length"
#endif
#define OM2_GEMM_NV (OM2_GEMM_NR / OM2_VL)

/* Cache blocking (also om2gen's, which sizes the workspace): KC rows of k per packed block (a B
 * micro-panel of KC x NR stays in L1 while A panels stream from L2), NC columns per B block packed
 * at run time, MC rows per A block packed at run time. */
#if !defined(OM2_GEMM_KC) || !defined(OM2_GEMM_NC) || !defined(OM2_GEMM_MC) || OM2_GEMM_NC % OM2_GEMM_NR != 0 || \
    OM2_GEMM_MC % OM2_GEMM_MR != 0
#error "define OM2_GEMM_KC, OM2_GEMM_NC (a multiple of NR) and OM2_GEMM_MC (a multiple of MR) first"
#endif

/* How a tile's accumulators start. */
enum { OM2_INIT_ZERO = 0, OM2_INIT_ROW_BIAS = 1, OM2_INIT_LOAD = 2 };

/* One tile of `rows` x NR (rows is a constant after inlining: MR, or fewer for short matrices):
 * c[0:mr, 0:nr] = init + sum_k a[k][i] * b[k][j], with mr <= rows. trans (a constant too) stores
 * the tile transposed, element (i, j) at c[j * ldc + i], and takes the bias per column j.
 * pf (NULL: none) is prefetched into L2 alongside, pf_step floats per k: the next packed panel a
 * caller streams from memory, one panel ahead. */
OM2_ALWAYS_INLINE void om2_gemm_tile_pf(const int rows, const int trans, int64_t kc, const float *restrict a,
                                        const float *restrict b, int64_t ldb, float *restrict c, int64_t ldc,
                                        int64_t mr, int64_t nr, int init, const float *restrict bias,
                                        const float *pf, int64_t pf_step) {
    om2_vf acc[OM2_GEMM_MR][OM2_GEMM_NV];
    const int full = !trans && mr == rows && nr == OM2_GEMM_NR;
    float edge[OM2_GEMM_MR * OM2_GEMM_NR];
    /* edge and transposed tiles go through a full-size buffer, so the vector code never touches
     * bytes past C */
    const float *src = c;
    int64_t lds = ldc;
    if (init == OM2_INIT_LOAD && !full) {
        memset(edge, 0, sizeof edge);
        for (int64_t i = 0; i < mr; ++i) {
            if (trans) {
                for (int64_t j = 0; j < nr; ++j) edge[i * OM2_GEMM_NR + j] = c[j * ldc + i];
            } else {
                om2_copy_run(edge + i * OM2_GEMM_NR, c + i * ldc, nr);
            }
        }
        src = edge;
        lds = OM2_GEMM_NR;
    }
    float col_bias[OM2_GEMM_NR];
    if (init == OM2_INIT_ROW_BIAS && trans) {
        om2_copy_run(col_bias, bias, nr);
        om2_copy_run(col_bias + nr, NULL, OM2_GEMM_NR - nr);
    }
#pragma GCC unroll 32
    for (int i = 0; i < rows; ++i) {
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMM_NV; ++v) {
            if (init == OM2_INIT_LOAD) {
                acc[i][v] = om2_v_load(src + i * lds + v * OM2_VL);
            } else if (init == OM2_INIT_ROW_BIAS && trans) {
                acc[i][v] = om2_v_load(col_bias + v * OM2_VL);
            } else if (init == OM2_INIT_ROW_BIAS) {
                acc[i][v] = om2_v_set1(i < mr ? bias[i] : 0.0f);
            } else {
                acc[i][v] = om2_v_zero();
            }
        }
    }
    if (full && init != OM2_INIT_LOAD) {
        /* the next tile to the right (the caller's next column panel): its rows of C start their
         * way into the cache now, so short-k tiles do not stall on their stores */
#pragma GCC unroll 32
        for (int i = 0; i < rows; ++i) __builtin_prefetch(c + i * ldc + OM2_GEMM_NR, 1, 3);
    }
    int64_t k = 0;
    if (rows == 1) {
        /* one row: four independent chains over k, or every FMA would wait for the previous one */
        om2_vf part[3][OM2_GEMM_NV];
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMM_NV; ++v) part[0][v] = part[1][v] = part[2][v] = om2_v_zero();
        for (; k + 4 <= kc; k += 4) {

#pragma GCC unroll 8
            for (int v = 0; v < OM2_GEMM_NV; ++v) {
                acc[0][v] = om2_v_fma(om2_v_set1(a[0]), om2_v_load(b + v * OM2_VL), acc[0][v]);
                part[0][v] = om2_v_fma(om2_v_set1(a[OM2_GEMM_MR]), om2_v_load(b + ldb + v * OM2_VL),
                                       part[0][v]);
                part[1][v] = om2_v_fma(om2_v_set1(a[2 * OM2_GEMM_MR]),
                                       om2_v_load(b + 2 * ldb + v * OM2_VL), part[1][v]);
                part[2][v] = om2_v_fma(om2_v_set1(a[3 * OM2_GEMM_MR]),
                                       om2_v_load(b + 3 * ldb + v * OM2_VL), part[2][v]);
            }
            a += 4 * OM2_GEMM_MR;
            b += 4 * ldb;
        }
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMM_NV; ++v) {
            acc[0][v] = om2_v_add(om2_v_add(acc[0][v], part[0][v]), om2_v_add(part[1][v], part[2][v]));
        }
    }
    for (; k < kc; ++k) {
        om2_vf bv[OM2_GEMM_NV];
        if (pf) __builtin_prefetch(pf + k * pf_step, 0, 2);
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMM_NV; ++v) bv[v] = om2_v_load(b + v * OM2_VL);
#pragma GCC unroll 32
        for (int i = 0; i < rows; ++i) {
            const om2_vf av = om2_v_set1(a[i]);
#pragma GCC unroll 8
            for (int v = 0; v < OM2_GEMM_NV; ++v) acc[i][v] = om2_v_fma(av, bv[v], acc[i][v]);
        }
        a += OM2_GEMM_MR;
        b += ldb;
    }
    if (full) {
#pragma GCC unroll 32
        for (int i = 0; i < rows; ++i) {
#pragma GCC unroll 8
            for (int v = 0; v < OM2_GEMM_NV; ++v) om2_v_store(c + i * ldc + v * OM2_VL, acc[i][v]);
        }
        return;
    }
#pragma GCC unroll 32
    for (int i = 0; i < rows; ++i) {
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMM_NV; ++v) om2_v_store(edge + i * OM2_GEMM_NR + v * OM2_VL, acc[i][v]);
    }
    if (trans) {
        for (int64_t j = 0; j < nr; ++j) {
            for (int64_t i = 0; i < mr; ++i) c[j * ldc + i] = edge[i * OM2_GEMM_NR + j];
        }
        return;
    }
    for (int64_t i = 0; i < mr; ++i) om2_copy_run(c + i * ldc, edge + i * OM2_GEMM_NR, nr);
}

OM2_ALWAYS_INLINE void om2_gemm_tile(const int rows, const int trans, int64_t kc, const float *restrict a,
                                     const float *restrict b, int64_t ldb, float *restrict c, int64_t ldc, int64_t mr,
                                     int64_t nr, int init, const float *restrict bias) {
    om2_gemm_tile_pf(rows, trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, NULL, 0);
}

/* The kernel rows for a panel of mr valid rows: the full MR, or a short kernel (1, 4, or 8 of 16)
 * when most rows would be padding (a 24-channel convolution's second panel, a 5-position image). */
OM2_ALWAYS_INLINE int64_t om2_gemm_rows_for(int64_t mr) {
    if (OM2_GEMM_MR > 4 && mr == 1) return 1;
    if (OM2_GEMM_MR > 4 && mr <= 4) return 4;
    if (OM2_GEMM_MR > 8 && mr <= 8) return 8;
    return OM2_GEMM_MR;
}

/* The tile for mr valid rows, with om2_gemm_rows_for(mr) kernel rows. */
OM2_ALWAYS_INLINE void om2_gemm_tile_any_pf(const int trans, int64_t kc, const float *restrict a,
                                            const float *restrict b, int64_t ldb, float *restrict c, int64_t ldc,
                                            int64_t mr, int64_t nr, int init, const float *restrict bias,
                                            const float *pf, int64_t pf_step) {
#if OM2_GEMM_MR > 4
    if (mr == 1) {
        om2_gemm_tile_pf(1, trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, pf, pf_step);
    } else if (mr <= 4) {
        om2_gemm_tile_pf(4, trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, pf, pf_step);
    } else
#endif
#if OM2_GEMM_MR > 8
    if (mr <= 8) {
        om2_gemm_tile_pf(8, trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, pf, pf_step);
    } else
#endif
    {
        om2_gemm_tile_pf(OM2_GEMM_MR, trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, pf, pf_step);
    }
}

OM2_ALWAYS_INLINE void om2_gemm_tile_any(const int trans, int64_t kc, const float *restrict a, const float *restrict b,
                                         int64_t ldb, float *restrict c, int64_t ldc, int64_t mr, int64_t nr, int init,
                                         const float *restrict bias) {
    om2_gemm_tile_any_pf(trans, kc, a, b, ldb, c, ldc, mr, nr, init, bias, NULL, 0);
}

/* ---- operands ---------------------------------------------------------------------------- */

/* Convolution geometry for im2col packing (any rank as 3-D), for one image and one group:
 * row k of B is (c, kd, kh, kw), column p is (od, oh, ow). */
typedef struct {
    const float *x;                   /* this image's first channel of this group */
    int64_t D, H, W, KD, KH, KW, OD, OH, OW, SD, SH, SW, DD, DH, DW, PF, PT, PL;
    /* 2-D with SW > 1: when planes is set (workspace, om2gen sizes it), om2_gemm_rect first splits
     * the input rows its positions read into C x SW zero-padded column-phase planes, and im2col
     * copies contiguous runs out of them instead of gathering every SW-th element */
    float *planes;
    int64_t C;                        /* channels of this group */
    /* positions past this image's OD*OH*OW continue in the next images, image_stride floats
     * apart (a transposed product over a batch of small images); 0: one image (no planes then) */
    int64_t image_stride;
} Om2Im2col;

/* The column-phase planes of the input rows that output positions [p0, p1) read: plane (c, cph)
 * row r, column j = padded input row ih_lo + r, column j*SW + cph; planes pstride floats apart. */
typedef struct {
    const float *base;
    int64_t ih_lo, R, PWq, pstride;
} Om2Im2colPlanes;

/* Floats of the planes for positions spanning up to `rows` output rows (om2gen mirrors this in
 * om2gen/ops/conv.py): per plane R x PWq and two vectors a row's whole-vector stores overrun. */
static inline int64_t om2_im2col_plane_floats(const Om2Im2col *g, int64_t rows, int64_t *R, int64_t *PWq) {
    *R = (rows - 1) * g->SH + (g->KH - 1) * g->DH + 1;
    *PWq = g->OW + (g->KW - 1) * g->DW / g->SW;
    return (*R * *PWq + 2 * OM2_VL + 15) / 16 * 16;
}

enum { OM2_OPERAND_PACKED = 0, OM2_OPERAND_STRIDED = 1, OM2_OPERAND_IM2COL = 2 };

typedef struct {
    int kind;
    const float *ptr;       /* PACKED: panels over the whole K; STRIDED: element [0][0] */
    int64_t rs, cs;         /* STRIDED: element (r, c) is ptr[r * rs + c * cs] */
    const Om2Im2col *conv;  /* IM2COL */
} Om2Operand;

/* Packs A rows [m0, m0+mc) x k [k0, k0+kc) of a strided matrix into MR-row panels [kc][MR]. */
static inline void om2_pack_a_strided(const Om2Operand *op, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                               float *restrict dst) {
    for (int64_t p = 0; p < mc; p += OM2_GEMM_MR) {
        const int64_t rows = mc - p < OM2_GEMM_MR ? mc - p : OM2_GEMM_MR;
        float *restrict d = dst + p * kc;
        if (op->rs == 1) {
            /* column-major (a pointwise conv's image as the A of a transposed product): rows contiguous */
            for (int64_t k = 0; k < kc; ++k) {
                om2_copy_run(d + k * OM2_GEMM_MR, op->ptr + m0 + p + (k0 + k) * op->cs, rows);
                om2_copy_run(d + k * OM2_GEMM_MR + rows, NULL, OM2_GEMM_MR - rows);
            }
            continue;
        }
        if (op->cs == 1) {
            for (int64_t i = 0; i < rows; ++i) {
                const float *restrict s = op->ptr + (m0 + p + i) * op->rs + k0;
                for (int64_t k = 0; k < kc; ++k) d[k * OM2_GEMM_MR + i] = s[k];
            }
        } else {
            for (int64_t k = 0; k < kc; ++k) {
                const float *restrict s = op->ptr + (m0 + p) * op->rs + (k0 + k) * op->cs;
                for (int64_t i = 0; i < rows; ++i) d[k * OM2_GEMM_MR + i] = s[i * op->rs];
            }
        }
        for (int64_t i = rows; i < OM2_GEMM_MR; ++i) {
            for (int64_t k = 0; k < kc; ++k) d[k * OM2_GEMM_MR + i] = 0.0f;
        }
    }
}

/* Packs B k [k0, k0+kc) x columns [n0, n0+nc) of a strided matrix into NR-column panels [kc][NR]. */
static inline void om2_pack_b_strided(const Om2Operand *op, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                               float *restrict dst) {
    for (int64_t q = 0; q < nc; q += OM2_GEMM_NR) {
        const int64_t cols = nc - q < OM2_GEMM_NR ? nc - q : OM2_GEMM_NR;
        float *restrict d = dst + q * kc;
        for (int64_t k = 0; k < kc; ++k) {
            const float *restrict s = op->ptr + (k0 + k) * op->rs + (n0 + q) * op->cs;
            float *restrict row = d + k * OM2_GEMM_NR;
            if (op->cs == 1) {
                om2_copy_run(row, s, cols);
            } else {
                for (int64_t j = 0; j < cols; ++j) row[j] = s[j * op->cs];
            }
            om2_copy_run(row + cols, NULL, OM2_GEMM_NR - cols);
        }
    }
}

/* dst[0:n] = src[0], src[SW], src[2 SW], ... (every element readable). Stride 2 (downsampling
 * convolutions) is deinterleaved with vector permutes where the ISA has them: whole vectors with
 * plain stores, the tail masked. */
OM2_ALWAYS_INLINE void om2_copy_strided(float *restrict dst, const float *restrict src, int64_t n, int64_t SW) {
    int64_t j = 0;
#if defined(__AVX512F__)
    if (SW == 2) {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (; j + 16 <= n; j += 16) {   /* reads src[2j .. 2j+31): the last float is not needed */
            const __m512 lo = _mm512_loadu_ps(src + 2 * j), hi = _mm512_maskz_loadu_ps(0x7FFF, src + 2 * j + 16);
            _mm512_storeu_ps(dst + j, _mm512_permutex2var_ps(lo, even, hi));
        }
        if (j < n) {
            const int64_t cnt = n - j, need = 2 * cnt - 1;   /* floats read: src[2j .. 2j+need) */
            const __mmask16 m0 = need >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << need) - 1u);
            const __mmask16 m1 = need > 16 ? (__mmask16)((1u << (need - 16)) - 1u) : (__mmask16)0;
            const __m512 lo = _mm512_maskz_loadu_ps(m0, src + 2 * j), hi = _mm512_maskz_loadu_ps(m1, src + 2 * j + 16);
            _mm512_mask_storeu_ps(dst + j, (__mmask16)((1u << cnt) - 1u), _mm512_permutex2var_ps(lo, even, hi));
        }
        return;
    }
#endif
    for (; j < n; ++j) dst[j] = src[j * SW];
}

/* One row of an im2col panel: dst[0:n] = x row xr at columns ow*SW + off for ow in [ow0, ow0+n),
 * zero where that column is outside [0, W), i.e. outside ow in [owlo, owhi) (valid_row 0: the
 * whole input row is padding). */
OM2_ALWAYS_INLINE void om2_im2col_run(float *restrict dst, const float *restrict xr, int valid_row, int64_t ow0,
                                      int64_t n, int64_t SW, int64_t off, int64_t owlo, int64_t owhi) {
    if (!valid_row) {
        om2_copy_run(dst, NULL, n);
        return;
    }
    int64_t lo = owlo - ow0, hi = owhi - ow0;
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    hi = hi > n ? n : hi < lo ? lo : hi;
    const int64_t iw0 = ow0 * SW + off;
    if (lo > 0) om2_copy_run(dst, NULL, lo);
    if (SW == 1) {
        om2_copy_run(dst + lo, xr + iw0 + lo, hi - lo);
    } else {
        om2_copy_strided(dst + lo, xr + iw0 + lo * SW, hi - lo, SW);
    }
    if (hi < n) om2_copy_run(dst + hi, NULL, n - hi);
}

/* dst[0:width) = one zero-padded image row: PL zeros, src[0:W) (zeros for a row outside the image:
 * src NULL), zeros; W and PL clipped to width. Whole-vector stores only: it may also write zeros
 * anywhere in dst[width, width + VL), which the caller must allow (a later row's place, slack). */
OM2_ALWAYS_INLINE void om2_padded_row(float *restrict dst, const float *restrict src, int64_t W, int64_t PL,
                                      int64_t width) {
    const om2_vf zero = om2_v_zero();
    int64_t j = 0;
    const int64_t lo = PL < width ? PL : width;
    int64_t hi = src ? PL + W : lo;
    hi = hi < width ? hi : width;
    for (; j < lo; j += OM2_VL) {           /* spills into the data: rewritten below */
        om2_v_store(dst + j, zero);
        OM2_NO_LIBCALL(j);
    }
    j = lo;
    for (; j + OM2_VL <= hi; j += OM2_VL) {
        om2_v_store(dst + j, om2_v_load(src + j - PL));
        OM2_NO_LIBCALL(j);
    }
    if (j < hi) {
#if defined(__AVX512F__)
        om2_v_store(dst + j, _mm512_maskz_loadu_ps((__mmask16)((1u << (hi - j)) - 1u), src + j - PL));
#else
        float tmp[OM2_VL] = {0};
        for (int64_t l = 0; l < hi - j; ++l) tmp[l] = src[j - PL + l];
        om2_v_store(dst + j, om2_v_load(tmp));
#endif
        j += OM2_VL;
    }
    for (; j < width; j += OM2_VL) {
        om2_v_store(dst + j, zero);
        OM2_NO_LIBCALL(j);
    }
}

/* The column phases of one zero-padded image row: dst_p[j] = padded[j*S + p] for j < width and
 * p < S (dst_p = dst + p * pstride), padded = PL zeros, src[0:W) (src NULL: zeros), zeros. Stride 2
 * deinterleaves the source with vector permutes (AVX-512 or AVX2; read straight from the image:
 * no stall on data just stored). Whole-vector stores: it may also write anywhere in
 * dst_p[width, width + 2 VL) (AVX2: 16 floats). */
OM2_ALWAYS_INLINE void om2_padded_row_phases(float *restrict dst, int64_t pstride, const float *restrict src,
                                             int64_t W, int64_t PL, int64_t width, const int S) {
    /* input columns whose padded column is below S * width */
    int64_t w = S * width - PL;
    w = !src || w < 0 ? 0 : w < W ? w : W;
#if defined(__AVX512F__)
    if (S == 2) {
        const __m512 zero = _mm512_setzero_ps();
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        /* input column i lands in phase (i + PL) % 2 at column (i + PL) / 2 */
        float *restrict de = dst + (PL % 2) * pstride, *restrict dodd = dst + ((PL + 1) % 2) * pstride;
        const int64_t e0 = PL / 2, o0 = (PL + 1) / 2;
        for (int64_t j = 0; j < e0; j += 16) {           /* leading zeros, overwritten by the data after them */
            _mm512_storeu_ps(de + j, zero);
            OM2_NO_LIBCALL(j);
        }
        for (int64_t j = 0; j < o0; j += 16) {
            _mm512_storeu_ps(dodd + j, zero);
            OM2_NO_LIBCALL(j);
        }
        int64_t i = 0;
        for (; i + 32 <= w; i += 32) {
            const __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
            _mm512_storeu_ps(de + e0 + i / 2, _mm512_permutex2var_ps(a, even, b));
            _mm512_storeu_ps(dodd + o0 + i / 2, _mm512_permutex2var_ps(a, odd, b));
        }
        for (; i < w; i += 32) {
            const int64_t cnt = w - i;
            const __mmask16 m0 = cnt >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cnt) - 1u);
            const __mmask16 m1 = cnt >= 32 ? (__mmask16)0xFFFF : cnt > 16 ? (__mmask16)((1u << (cnt - 16)) - 1u) : 0;
            const __m512 a = _mm512_maskz_loadu_ps(m0, src + i), b = _mm512_maskz_loadu_ps(m1, src + i + 16);
            _mm512_storeu_ps(de + e0 + i / 2, _mm512_permutex2var_ps(a, even, b));
            _mm512_storeu_ps(dodd + o0 + i / 2, _mm512_permutex2var_ps(a, odd, b));
        }
        /* trailing zeros: the data's last vectors were zero past the row */
        for (int64_t j = e0 + i / 2; j < width; j += 16) {
            _mm512_storeu_ps(de + j, zero);
            OM2_NO_LIBCALL(j);
        }
        for (int64_t j = o0 + i / 2; j < width; j += 16) {
            _mm512_storeu_ps(dodd + j, zero);
            OM2_NO_LIBCALL(j);
        }
        return;
    }
#elif defined(__AVX2__)
    if (S == 2) {
        const __m256 zero = _mm256_setzero_ps();
        float *restrict de = dst + (PL % 2) * pstride, *restrict dodd = dst + ((PL + 1) % 2) * pstride;
        const int64_t e0 = PL / 2, o0 = (PL + 1) / 2;
        for (int64_t j = 0; j < e0; j += 8) {            /* leading zeros, overwritten by the data after them */
            _mm256_storeu_ps(de + j, zero);
            OM2_NO_LIBCALL(j);
        }
        for (int64_t j = 0; j < o0; j += 8) {
            _mm256_storeu_ps(dodd + j, zero);
            OM2_NO_LIBCALL(j);
        }
        int64_t i = 0;
        for (; i < w; i += 16) {
            __m256 a, b;
            if (i + 16 <= w) {
                a = _mm256_loadu_ps(src + i);
                b = _mm256_loadu_ps(src + i + 8);
            } else {                                    /* the row's last columns, zeros past it */
                float tmp[16] = {0};
                for (int64_t l = 0; l < w - i; ++l) tmp[l] = src[i + l];
                a = _mm256_loadu_ps(tmp);
                b = _mm256_loadu_ps(tmp + 8);
            }
            /* per 128-bit lane a0 a2 b0 b2 | a4 a6 b4 b6 (and the odd ones), then the middle
             * 64-bit quarters swapped: a0 a2 a4 a6 b0 b2 b4 b6 */
            const __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
            const __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
            _mm256_storeu_ps(de + e0 + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
            _mm256_storeu_ps(dodd + o0 + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
        }
        for (int64_t j = e0 + i / 2; j < width; j += 8) {   /* trailing zeros */
            _mm256_storeu_ps(de + j, zero);
            OM2_NO_LIBCALL(j);
        }
        for (int64_t j = o0 + i / 2; j < width; j += 8) {
            _mm256_storeu_ps(dodd + j, zero);
            OM2_NO_LIBCALL(j);
        }
        return;
    }
#endif
    for (int p = 0; p < S; ++p) {
        for (int64_t j = 0; j < width; ++j) {
            const int64_t col = j * S + p - PL;
            dst[p * pstride + j] = col >= 0 && col < w ? src[col] : 0.0f;
        }
    }
}

/* im2col into panels of `width` columns (NR for B; MR when the image is the A operand of a
 * transposed product): row k = (c, kd, kh, kw), columns p in [n0, n0+nc). Each panel row is
 * filled output row by output row, so stride-1 columns are plain copies; with column-phase
 * planes (pl, om2_im2col_build_planes) strided ones are too. */
OM2_ALWAYS_INLINE void om2_pack_im2col(const int width, const Om2Im2col *g, const Om2Im2colPlanes *pl, int64_t k0,
                                       int64_t kc, int64_t n0, int64_t nc, float *restrict dst) {
    const int64_t taps = g->KD * g->KH * g->KW;
    const int64_t npanels = (nc + width - 1) / width;
    const int64_t odi0 = n0 / (g->OH * g->OW), oh0 = (n0 / g->OW) % g->OH, ow00 = n0 % g->OW;
    const int64_t od0 = g->image_stride ? odi0 % g->OD : odi0, img0 = g->image_stride ? odi0 / g->OD : 0;
    for (int64_t kk = 0; kk < kc; ++kk) {
        const int64_t k = k0 + kk;
        const int64_t c = k / taps, t = k % taps;
        const int64_t kw = t % g->KW, kh = (t / g->KW) % g->KH, kd = t / (g->KW * g->KH);
        const float *restrict xc = g->x + img0 * g->image_stride + c * g->D * g->H * g->W;
        const int64_t off = kw * g->DW - g->PL;
        /* output columns whose input column ow*SW + off is inside [0, W) (planes need no bounds) */
        int64_t owlo = 0, owhi = 0;
        if (!pl) {
            owlo = off >= 0 ? 0 : (-off + g->SW - 1) / g->SW;
            owhi = off >= g->W ? 0 : (g->W - off + g->SW - 1) / g->SW;
            owhi = owhi < owlo ? owlo : owhi;
        }
        /* with planes (2-D): output (oh, ow) reads plane (c, kw*DW % SW) at row oh*SH + kh*DH - PT - ih_lo,
         * column ow + kw*DW / SW, a contiguous run */
        const float *restrict src = pl ? pl->base + (c * g->SW + kw * g->DW % g->SW) * pl->pstride +
                                             (kh * g->DH - g->PT - pl->ih_lo) * pl->PWq + kw * g->DW / g->SW
                                       : NULL;
        int64_t od = od0, oh = oh0, ow = ow00, left = nc;
        for (int64_t q = 0; q < npanels; ++q) {
            float *restrict row = dst + q * kc * width + kk * width;
            int64_t j = 0;
            while (j < width && left > 0) {
                int64_t run = g->OW - ow;
                if (run > width - j) run = width - j;
                if (run > left) run = left;
                if (pl) {
                    om2_copy_run(row + j, src + oh * g->SH * pl->PWq + ow, run);
                } else {
                    const int64_t id = od * g->SD + kd * g->DD - g->PF, ih = oh * g->SH + kh * g->DH - g->PT;
                    const int valid_row = id >= 0 && id < g->D && ih >= 0 && ih < g->H;
                    om2_im2col_run(row + j, xc + (valid_row ? (id * g->H + ih) * g->W : 0), valid_row, ow, run,
                                   g->SW, off, owlo, owhi);
                }
                j += run;
                left -= run;
                ow += run;
                if (ow == g->OW) {
                    ow = 0;
                    if (++oh == g->OH) {
                        oh = 0;
                        if (++od == g->OD && g->image_stride) {   /* the next image of the batch */
                            od = 0;
                            xc += g->image_stride;
                        }
                    }
                }
            }
            if (j < width) om2_copy_run(row + j, NULL, width - j);
        }
    }
}

/* Splits the input rows output positions [p0, p1) read into column-phase planes (2-D, SW > 1). */
OM2_ALWAYS_INLINE Om2Im2colPlanes om2_im2col_build_planes(const Om2Im2col *g, int64_t p0, int64_t p1) {
    Om2Im2colPlanes pl;
    const int64_t oh_a = p0 / g->OW, oh_b = (p1 - 1) / g->OW;
    pl.pstride = om2_im2col_plane_floats(g, oh_b - oh_a + 1, &pl.R, &pl.PWq);
    pl.ih_lo = oh_a * g->SH - g->PT;
    pl.base = g->planes;
    for (int64_t c = 0; c < g->C; ++c) {
        const float *restrict xc = g->x + c * g->H * g->W;
        /* rows in increasing order per plane: a row's vector overrun is the next row's place or the slack */
        for (int64_t r = 0; r < pl.R; ++r) {
            const int64_t ih = pl.ih_lo + r;
            om2_padded_row_phases(g->planes + c * g->SW * pl.pstride + r * pl.PWq, pl.pstride,
                                  ih >= 0 && ih < g->H ? xc + ih * g->W : NULL, g->W, g->PL, pl.PWq, (int)g->SW);
        }
    }
    return pl;
}

/* The products (defined below with OM2_GEMM_LIBRARY, in the kernel library):
 * om2_gemm_rect: C[m0:m1, n0:n1] of C = A B; om2_gemm_rect_t: its transpose C^T; _t_images: the
 * transposed product over a batch of small images (see om2_gemm_rect_impl). */
OM2_KERNEL_LIB void om2_gemm_rect(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C, int64_t ldc, int init,
                                  const float *row_bias, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *ws);
OM2_KERNEL_LIB void om2_gemm_rect_t(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C, int64_t ldc,
                                    int init, const float *col_bias, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                                    float *ws);
OM2_KERNEL_LIB void om2_gemm_rect_t_images(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C,
                                           int64_t ldc, int init, const float *col_bias, int64_t m0, int64_t m1,
                                           int64_t n0, int64_t n1, float *ws, int64_t rows_per_image,
                                           int64_t image_stride);

#if defined(OM2_GEMM_LIBRARY)

/* C[m0:m1, n0:n1] of one GEMM (with trans: C^T, element (i, j) stored at C[j * ldc + i], and the bias
 * taken per column). m0 is a multiple of MR and n0 of NR (so packed constant panels line up); init
 * says how C starts (OM2_INIT_ROW_BIAS: row_bias[m], or [n] with trans; OM2_INIT_LOAD: C's current
 * values; not with trans). ws holds B's packing buffer (KC x min(n1 - n0, NC) rounded up to NR
 * columns), then A's (KC x min(m1 - m0, MC) rounded up to MR rows) when A is packed at run time, then
 * with trans an accumulator of (m1 - m0) x (n1 - n0), both rounded up to the register tile: om2gen
 * sizes it (gemm_pack.workspace_floats). A transposed product accumulates over the k blocks there in
 * whole register tiles, untransposed, and is stored transposed (plus the bias) once at the end. */
OM2_ALWAYS_INLINE void om2_gemm_rect_impl(const int trans, int64_t K, const Om2Operand *A, const Om2Operand *B,
                                          float *C, int64_t ldc, int init, const float *row_bias, int64_t m0,
                                          int64_t m1, int64_t n0, int64_t n1, float *ws, int64_t rows_per_image,
                                          int64_t image_stride) {
    if (K == 0) {   /* an empty sum: C is just its start value */
        for (int64_t i = m0; i < m1; ++i) {
            for (int64_t j = n0; j < n1 && init != OM2_INIT_LOAD; ++j) {
                const float start = init == OM2_INIT_ROW_BIAS ? row_bias[trans ? j : i] : 0.0f;
                C[trans ? j * ldc + i : i * ldc + j] = start;
            }
        }
        return;
    }
    /* A constant operand needs no packing, so the other one's blocks span the whole tile: a constant
     * B leaves columns unblocked (A packed once per k block), a constant A rows. */
    const int64_t NCB = B->kind == OM2_OPERAND_PACKED ? (n1 - n0) : OM2_GEMM_NC;
    const int64_t MCB = A->kind == OM2_OPERAND_PACKED ? (m1 - m0) : OM2_GEMM_MC;
    /* B row-major with contiguous rows (a pointwise conv's image, a MatMul input): whole NR-column
     * panels are read where they are, rows ldb apart, instead of being copied */
    const int b_in_place = B->kind == OM2_OPERAND_STRIDED && B->cs == 1;
    const int64_t ncmax = (n1 - n0) < OM2_GEMM_NC ? (n1 - n0) : OM2_GEMM_NC;
    const int64_t mcmax = (m1 - m0) < OM2_GEMM_MC ? (m1 - m0) : OM2_GEMM_MC;
    float *bpack = ws;
    float *apack = ws + OM2_GEMM_KC * ((ncmax + OM2_GEMM_NR - 1) / OM2_GEMM_NR) * OM2_GEMM_NR;
    /* trans: the accumulator, rows m0.., columns n0.. (whole register tiles) */
    const int64_t accw = (n1 - n0 + OM2_GEMM_NR - 1) / OM2_GEMM_NR * OM2_GEMM_NR;
    float *acc = apack + (A->kind == OM2_OPERAND_PACKED ? 0 : OM2_GEMM_KC * ((mcmax + OM2_GEMM_MR - 1) / OM2_GEMM_MR) *
                                                               OM2_GEMM_MR);
    /* a strided convolution's image: its column-phase planes for this tile's positions, once */
    Om2Im2colPlanes a_planes = {0}, b_planes = {0};
    if (A->kind == OM2_OPERAND_IM2COL && A->conv->planes) a_planes = om2_im2col_build_planes(A->conv, m0, m1);
    if (B->kind == OM2_OPERAND_IM2COL && B->conv->planes) b_planes = om2_im2col_build_planes(B->conv, n0, n1);
    for (int64_t nb = n0; nb < n1; nb += NCB) {
        const int64_t nc = (n1 - nb) < NCB ? (n1 - nb) : NCB;
        for (int64_t kb = 0; kb < K; kb += OM2_GEMM_KC) {
            const int64_t kc = (K - kb) < OM2_GEMM_KC ? (K - kb) : OM2_GEMM_KC;
            const float *bp;
            int64_t b_panel_stride;
            if (B->kind == OM2_OPERAND_PACKED) {
                bp = B->ptr + (nb / OM2_GEMM_NR) * K * OM2_GEMM_NR + kb * OM2_GEMM_NR;
                b_panel_stride = K * OM2_GEMM_NR;
            } else {
                if (B->kind == OM2_OPERAND_IM2COL) {
                    om2_pack_im2col(OM2_GEMM_NR, B->conv, b_planes.base ? &b_planes : NULL, kb, kc, nb, nc, bpack);
                } else if (b_in_place) {
                    /* only the last, partial panel is packed, where the panel loop looks for it */
                    const int64_t full = nc / OM2_GEMM_NR * OM2_GEMM_NR;
                    if (full < nc) om2_pack_b_strided(B, kb, kc, nb + full, nc - full, bpack + full * kc);
                } else {
                    om2_pack_b_strided(B, kb, kc, nb, nc, bpack);
                }
                bp = bpack;
                b_panel_stride = kc * OM2_GEMM_NR;
            }
            for (int64_t mb = m0; mb < m1; mb += MCB) {
                const int64_t mc = (m1 - mb) < MCB ? (m1 - mb) : MCB;
                const float *ap;
                int64_t a_panel_stride;
                if (A->kind == OM2_OPERAND_PACKED) {
                    ap = A->ptr + (mb / OM2_GEMM_MR) * K * OM2_GEMM_MR + kb * OM2_GEMM_MR;
                    a_panel_stride = K * OM2_GEMM_MR;
                } else {
                    if (A->kind == OM2_OPERAND_IM2COL) {
                        om2_pack_im2col(OM2_GEMM_MR, A->conv, a_planes.base ? &a_planes : NULL, kb, kc, mb, mc, apack);
                    } else {
                        om2_pack_a_strided(A, mb, mc, kb, kc, apack);
                    }
                    ap = apack;
                    a_panel_stride = kc * OM2_GEMM_MR;
                }
                const int tile_init = kb > 0 ? OM2_INIT_LOAD : init;
                for (int64_t j = 0; j < nc; j += OM2_GEMM_NR) {
                    const int64_t nr = (nc - j) < OM2_GEMM_NR ? (nc - j) : OM2_GEMM_NR;
                    const float *bj = bp + (j / OM2_GEMM_NR) * b_panel_stride;
                    int64_t ldb = OM2_GEMM_NR;
                    if (b_in_place && nr == OM2_GEMM_NR) {   /* a whole panel of a row-major B: read in place */
                        bj = B->ptr + kb * B->rs + nb + j;
                        ldb = B->rs;
                    }
                    for (int64_t i = mb; i < mb + mc; i += OM2_GEMM_MR) {
                        const int64_t mr = (mb + mc - i) < OM2_GEMM_MR ? (mb + mc - i) : OM2_GEMM_MR;
                        const float *ai = ap + ((i - mb) / OM2_GEMM_MR) * a_panel_stride;
                        /* a packed constant's first pass streams it from memory: the first tile of a
                         * B panel prefetches the next B panel, the first column of A tiles the next A one */
                        const float *pf = NULL;
                        int64_t pf_step = 0;
                        if (B->kind == OM2_OPERAND_PACKED && i == mb && j + OM2_GEMM_NR < nc) {
                            pf = bj + b_panel_stride;
                            pf_step = OM2_GEMM_NR;
                        } else if (A->kind == OM2_OPERAND_PACKED && j == 0 && i + OM2_GEMM_MR < mb + mc) {
                            pf = ai + a_panel_stride;
                            pf_step = OM2_GEMM_MR;
                        }
                        if (trans) {
                            /* whole tiles into the accumulator: panels past M and N are zeros */
                            const int64_t rows = om2_gemm_rows_for(mr);
                            om2_gemm_tile_any_pf(0, kc, ai, bj, ldb, acc + (i - m0) * accw + nb + j - n0, accw, rows,
                                                 OM2_GEMM_NR, kb > 0 ? OM2_INIT_LOAD : OM2_INIT_ZERO, NULL, pf, pf_step);
                        } else {
                            om2_gemm_tile_any_pf(0, kc, ai, bj, ldb, C + i * ldc + nb + j, ldc, mr, nr, tile_init,
                                                 row_bias ? row_bias + i : NULL, pf, pf_step);
                        }
                    }
                }
            }
        }
        if (trans) {
            /* C^T[j][i] = acc[i][j] + bias[j] for this block of columns; row i of a batch of images
             * is position i % rows_per_image of image i / rows_per_image, image_stride floats on */
            for (int64_t j = nb; j < nb + nc; ++j) {
                const float b = init == OM2_INIT_ROW_BIAS ? row_bias[j] : 0.0f;
                const float *restrict a = acc + j - n0;
                for (int64_t i = m0; i < m1;) {
                    const int64_t img = i / rows_per_image;
                    const int64_t end = (img + 1) * rows_per_image < m1 ? (img + 1) * rows_per_image : m1;
                    float *restrict c = C + img * image_stride - img * rows_per_image + j * ldc;
                    for (; i < end; ++i) c[i] = a[(i - m0) * accw] + b;
                }
            }
        }
    }
}

OM2_KERNEL_LIB void om2_gemm_rect(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C, int64_t ldc, int init,
                                  const float *row_bias, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *ws) {
    om2_gemm_rect_impl(0, K, A, B, C, ldc, init, row_bias, m0, m1, n0, n1, ws, INT64_MAX, 0);
}

/* The transposed product over a batch of small images: rows m are the positions of all images,
 * rows_per_image each, and row m of C^T[n] lands at C + (m / rows_per_image) * image_stride +
 * n * ldc + m % rows_per_image (A is an im2col operand with its image_stride set). */
OM2_KERNEL_LIB void om2_gemm_rect_t_images(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C,
                                           int64_t ldc, int init, const float *col_bias, int64_t m0, int64_t m1,
                                           int64_t n0, int64_t n1, float *ws, int64_t rows_per_image,
                                           int64_t image_stride) {
    om2_gemm_rect_impl(1, K, A, B, C, ldc, init, col_bias, m0, m1, n0, n1, ws, rows_per_image, image_stride);
}

/* The transposed product: C^T[n][m] = (A B)[m][n] (see om2_gemm_rect_impl). */
OM2_KERNEL_LIB void om2_gemm_rect_t(int64_t K, const Om2Operand *A, const Om2Operand *B, float *C, int64_t ldc, int init,
                                    const float *col_bias, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *ws) {
    om2_gemm_rect_t_images(K, A, B, C, ldc, init, col_bias, m0, m1, n0, n1, ws, INT64_MAX, 0);   /* one image */
}

#endif /* OM2_GEMM_LIBRARY */

#endif /* OM2_OM2_GEMM_H */
