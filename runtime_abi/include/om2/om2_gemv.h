/*
 * om2_gemv.h -- a product of a few rows with a B packed at compile time (a matrix-vector product and
 * its small-batch cousins), with the epilogue of Gemm fused into its store:
 *
 *   Y[M x N] = clamp(alpha * A[M x K] * B[K x N] + beta * C, lo, hi),  M <= OM2_GEMV_MAX_ROWS
 *
 * With so few rows there is next to no reuse of B: the product is bound by streaming B's packed
 * panels (om2/om2_gemm.h's layout, [K][NR] per panel over the whole K) from memory. So, unlike
 * om2_gemm_rect, each panel is read exactly once over the whole K (no KC blocks, no reload and
 * store of Y between them), A is read where it is (no packing of one row into an MR-row panel),
 * and several panels are streamed side by side, each into accumulators of its own, so that the
 * FMAs have enough independent chains to hide their latency. No software prefetch: the hardware
 * streams the panels better (Zen 4, MLP layers from L3: 94 GB/s without, 78-83 GB/s with
 * prefetches 8-32 rows ahead).
 *
 * The includer defines the packed GEMM's configuration (OM2_GEMM_MR/NR/KC/NC/MC) first, as for
 * om2/om2_gemm.h, which this header includes for its vector abstraction.
 */
#ifndef OM2_OM2_GEMV_H
#define OM2_OM2_GEMV_H

#include "om2/om2_gemm.h"

#define OM2_GEMV_MAX_ROWS 4

/* Accumulator registers a group of panels may take: half the vector register file, the rest
 * holds the B vectors just loaded and the broadcast A values. */
#ifndef OM2_GEMV_ACCS
#if defined(__AVX512F__) || defined(__aarch64__)
#define OM2_GEMV_ACCS 16
#else
#define OM2_GEMV_ACCS 8
#endif
#endif

/* Panels streamed side by side: as many as the accumulators allow for one row, at most this. */
#ifndef OM2_GEMV_MAX_PANELS
#define OM2_GEMV_MAX_PANELS 4
#endif

#define OM2_GEMV_NV OM2_GEMM_NV

/* Panels side by side for `rows` rows: as many as OM2_GEMV_ACCS accumulators hold, 1 to MAX_PANELS. */
#define OM2_GEMV_PANELS(rows)                                                                                  \
    (OM2_GEMV_ACCS / ((rows) * OM2_GEMV_NV) < 1                   ? 1                                        \
     : OM2_GEMV_ACCS / ((rows) * OM2_GEMV_NV) > OM2_GEMV_MAX_PANELS ? OM2_GEMV_MAX_PANELS                     \
                                                                   : OM2_GEMV_ACCS / ((rows) * OM2_GEMV_NV))

/* Independent chains over k: two when a group alone has too few accumulators to cover the FMA
 * latency (k alternates between them). */
#define OM2_GEMV_CHAINS(rows, np) ((rows) * (np) * OM2_GEMV_NV >= 8 ? 1 : 2)

typedef struct {
    const float *a;         /* A element (i, k) at a[i * a_rs + k * a_cs] */
    int64_t a_rs, a_cs;
    const float *b;         /* B packed: panels of NR columns, [ceil(N / NR)][K][NR], columns past N zero */
    const float *c;         /* C element (i, j) at c[i * c_rs + j * c_cs], c_cs 0 or 1 (broadcast over columns) */
    int64_t c_rs, c_cs;
    float *y;               /* Y element (i, j) at y[i * ldy + j] */
    int64_t ldy;
    float alpha, beta, lo, hi;
} Om2Gemv;

/* Y[i][j:j+VL) = clamp(alpha * r + beta * C[i][j:j+VL)), the columns from n1 on left alone. */
OM2_ALWAYS_INLINE void om2_gemv_store(const int scale, const int bias, const int clamp, const Om2Gemv *g, om2_vf r,
                                      int64_t i, int64_t j, int64_t n1) {
    if (j >= n1) return;   /* a vector of padding columns */
    const int64_t valid = n1 - j < OM2_VL ? n1 - j : OM2_VL;
    if (scale) r = om2_v_mul(r, om2_v_set1(g->alpha));
    if (bias) {
        const float *cp = g->c + i * g->c_rs + j * g->c_cs;
        om2_vf cv;
        if (g->c_cs == 0) {
            cv = om2_v_set1(cp[0]);
        } else if (valid == OM2_VL) {
            cv = om2_v_load(cp);
        } else {
            float buf[OM2_VL];
            om2_copy_run(buf, cp, valid);
            om2_copy_run(buf + valid, NULL, OM2_VL - valid);
            cv = om2_v_load(buf);
        }
        if (bias == 2) cv = om2_v_mul(cv, om2_v_set1(g->beta));
        r = om2_v_add(r, cv);
    }
    if (clamp) r = om2_v_min(om2_v_set1(g->hi), om2_v_max(om2_v_set1(g->lo), r));
    float *yp = g->y + i * g->ldy + j;
    if (valid == OM2_VL) {
        om2_v_store(yp, r);
    } else {
        float buf[OM2_VL];
        om2_v_store(buf, r);
        om2_copy_run(yp, buf, valid);
    }
}

/* One k of a group: acc[i][p] += A[i][k] * (row k of panel p); a points at A[0][k], b at row k of
 * the first panel, the next panel ps floats on. */
OM2_ALWAYS_INLINE void om2_gemv_step(const int rows, const int np,
                                     om2_vf acc[OM2_GEMV_MAX_ROWS][OM2_GEMV_MAX_PANELS][OM2_GEMV_NV],
                                     const float *restrict a, int64_t a_rs, const float *restrict b, int64_t ps) {
    om2_vf av[OM2_GEMV_MAX_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < rows; ++i) av[i] = om2_v_set1(a[i * a_rs]);
#pragma GCC unroll 8
    for (int p = 0; p < np; ++p) {
#pragma GCC unroll 8
        for (int v = 0; v < OM2_GEMV_NV; ++v) {
            const om2_vf bv = om2_v_load(b + p * ps + v * OM2_VL);
#pragma GCC unroll 4
            for (int i = 0; i < rows; ++i) acc[i][p][v] = om2_v_fma(av[i], bv, acc[i][p][v]);
        }
    }
}

/* Y[0:rows, columns of panels [p0, p0 + np)) (stores stop at column n1); rows and np are constants
 * after inlining, so the accumulators live in registers. Each panel is read once, over the whole K. */
OM2_ALWAYS_INLINE void om2_gemv_group(const int rows, const int np, const int scale, const int bias, const int clamp,
                                      const Om2Gemv *g, int64_t K, int64_t p0, int64_t n1) {
    const int chains = OM2_GEMV_CHAINS(rows, np);
    om2_vf acc[2][OM2_GEMV_MAX_ROWS][OM2_GEMV_MAX_PANELS][OM2_GEMV_NV] = {0};
    const int64_t ps = K * OM2_GEMM_NR;   /* floats per panel */
    const float *restrict b = g->b + p0 * ps;
    const float *restrict a = g->a;
    const int64_t a_rs = g->a_rs, a_cs = g->a_cs;
    int64_t k = 0;
    if (chains == 2) {
        for (; k + 2 <= K; k += 2) {
            om2_gemv_step(rows, np, acc[0], a + k * a_cs, a_rs, b + k * OM2_GEMM_NR, ps);
            om2_gemv_step(rows, np, acc[1], a + (k + 1) * a_cs, a_rs, b + (k + 1) * OM2_GEMM_NR, ps);
        }
    }
    for (; k < K; ++k) om2_gemv_step(rows, np, acc[0], a + k * a_cs, a_rs, b + k * OM2_GEMM_NR, ps);
#pragma GCC unroll 4
    for (int i = 0; i < rows; ++i) {
#pragma GCC unroll 8
        for (int p = 0; p < np; ++p) {
#pragma GCC unroll 8
            for (int v = 0; v < OM2_GEMV_NV; ++v) {
                om2_vf r = chains == 2 ? om2_v_add(acc[0][i][p][v], acc[1][i][p][v]) : acc[0][i][p][v];
                om2_gemv_store(scale, bias, clamp, g, r, i, (p0 + p) * OM2_GEMM_NR + v * OM2_VL, n1);
            }
        }
    }
}

/* Columns [n0, n1) of Y for `rows` rows (a constant after inlining); n0 a multiple of NR. */
OM2_ALWAYS_INLINE void om2_gemv_rows(const int rows, const int scale, const int bias, const int clamp,
                                     const Om2Gemv *g, int64_t K, int64_t n0, int64_t n1) {
    const int np = OM2_GEMV_PANELS(rows);
    const int64_t p1 = (n1 + OM2_GEMM_NR - 1) / OM2_GEMM_NR;
    int64_t p = n0 / OM2_GEMM_NR;
    for (; p + np <= p1; p += np) om2_gemv_group(rows, np, scale, bias, clamp, g, K, p, n1);
    for (; p < p1; ++p) om2_gemv_group(rows, 1, scale, bias, clamp, g, K, p, n1);
}

/* Y[0:M, n0:n1), in blocks of up to OM2_GEMV_MAX_ROWS rows (meant for M no larger). scale
 * (alpha != 1), bias (0: none, 1: + C, 2: + beta * C) and clamp say the epilogue: tested once
 * per stored vector, never in the k loop, so one compiled product serves every kernel (it is in
 * the kernel library, runtime_abi/src/kernel_lib/om2_gemv_lib.c, as om2_gemm_rect is). */
OM2_KERNEL_LIB void om2_gemv(int scale, int bias, int clamp, const Om2Gemv *g, int64_t M, int64_t K, int64_t n0,
                             int64_t n1);

#if defined(OM2_GEMV_LIBRARY)
OM2_KERNEL_LIB void om2_gemv(const int scale, const int bias, const int clamp, const Om2Gemv *g, int64_t M,
                             int64_t K, int64_t n0, int64_t n1) {
    for (int64_t i0 = 0; i0 < M; i0 += OM2_GEMV_MAX_ROWS) {
        Om2Gemv h = *g;
        h.a += i0 * g->a_rs;
        h.y += i0 * g->ldy;
        if (bias) h.c += i0 * g->c_rs;
        const int64_t rows = M - i0 < OM2_GEMV_MAX_ROWS ? M - i0 : OM2_GEMV_MAX_ROWS;
        if (K == 0) {   /* an empty sum: alpha * 0 + beta * C */
            for (int64_t i = 0; i < rows; ++i) {
                for (int64_t j = n0; j < n1; j += OM2_VL) om2_gemv_store(0, bias, clamp, &h, om2_v_zero(), i, j, n1);
            }
        } else if (rows == 1) {
            om2_gemv_rows(1, scale, bias, clamp, &h, K, n0, n1);
        } else if (rows == 2) {
            om2_gemv_rows(2, scale, bias, clamp, &h, K, n0, n1);
        } else if (rows == 3) {
            om2_gemv_rows(3, scale, bias, clamp, &h, K, n0, n1);
        } else {
            om2_gemv_rows(4, scale, bias, clamp, &h, K, n0, n1);
        }
    }
}
#endif /* OM2_GEMV_LIBRARY */

#endif /* OM2_OM2_GEMV_H */
