/*
 * om2_igemm.h -- the exact 8-bit integer GEMM behind om2gen's MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv, QGemm, MatMulIntegerToFloat and the folded QDQ Conv/MatMul/Gemm.
 *
 *   Y[m, n] = epilogue( sum_k (A[m, k] - za) * (B[k, n] - zb[n]) )
 *
 * Both operands are bytes (uint8 or int8 each, as ONNX allows). The product is computed on
 * A' = A ^ 0x80 if A is int8 (so A' is uint8, A' = A + 128) and B' = B ^ 0x80 if B is uint8 (so
 * B' is int8, B' = B - 128), the operand kinds of vpdpbusd; the zero points shift with them
 * (za' = za + oa, zb' = zb - ob), and
 *
 *   sum_k (A - za)(B - zb) = sum A'B' - za' colsum(B')[n] - zb'[n] rowsum(A')[m] + K za' zb'[n]
 *
 * in int32, exactly: no step saturates (vpmaddubsw, which would, is not used: its int16 pair sum
 * overflows for u8 x s8 values; the AVX2 path widens to int16 and uses vpmaddwd instead).
 *
 * Layout. B panels of OM2_IGEMM_NR = 16 columns, k in groups of 4: [K4][16][4] int8 (one 64-byte
 * row per k group; k and columns past K and N zero), with colsum(B') per padded column; a
 * constant B is packed so at compile time (om2gen/ops/igemm_pack.py), an input B here, per tile.
 * A panels of OM2_IGEMM_MR rows: [K4][MR][4] uint8 in the block's workspace, packed per tile
 * from a strided matrix or from a convolution's input (im2col fused into the packing), with
 * rowsum(A') per row. Where each k's MR values are contiguous (a pointwise convolution; an
 * im2col panel inside the image at column stride 1, its per-k offsets precomputed) four k are
 * interleaved at a time; a row-major A moves four k as one word.
 *
 * ISA (the includer's target flags): AVX-512 with VNNI (vpdpbusd) when the CPU has it (checked
 * once with cpuid: the x86_64-avx512 target does not promise VNNI), else AVX-512BW; AVX2
 * (vpmovsxbw + vpmaddwd); elsewhere portable C. All give the same int32 sums.
 */
#ifndef OM2_OM2_IGEMM_H
#define OM2_OM2_IGEMM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef OM2_IGEMM_MR
#error "define OM2_IGEMM_MR before including om2/om2_igemm.h"
#endif
#define OM2_IGEMM_NR 16

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <cpuid.h>
#endif

/* ---- operands ------------------------------------------------------------------------------ */

/* One image (and group) of a 2-D convolution read as A: row = output position, column k =
 * (channel, kernel row, kernel column). Pads read `pad` (the input's zero point). */
typedef struct {
    const uint8_t *x;               /* the group's first channel */
    int64_t H, W, KH, KW, OW, SH, SW, DH, DW, PT, PL;
    const int32_t *koff;            /* per k: c * H * W + kh * DH * W + kw * DW (or NULL) */
} Om2IgemmIm2col;

typedef struct {
    const uint8_t *p;               /* strided A: element (m, k) at p[m * rs + k * cs] */
    int64_t rs, cs;
    const Om2IgemmIm2col *conv;     /* or a convolution's input (p unused) */
    uint8_t flip;                   /* 0x80 for int8 A */
    uint8_t pad;                    /* the raw value of a pad (im2col) */
} Om2IgemmA;

typedef struct {
    const int8_t *panels;           /* packed B (compile time): [N16][K4][16][4] */
    const int32_t *colsum;          /* colsum(B') per padded column */
    const uint8_t *p;               /* or strided B: element (k, n) at p[k * rs + n * cs] */
    int64_t rs, cs;
    uint8_t flip;                   /* 0x80 for uint8 B */
} Om2IgemmB;

enum { OM2_IOUT_I32 = 0, OM2_IOUT_Q8 = 1, OM2_IOUT_F32 = 2 };

/* What becomes of the exact int32 sums. */
typedef struct {
    int kind;
    void *y;                        /* element (m, n) at y[m * rs + n * cs] */
    int64_t rs, cs;
    int32_t za;                     /* za' (shifted as A was) */
    const void *zb;                 /* raw zero points of B (uint8/int8), zb_step 0: one for all */
    int64_t zb_step;
    int zb_signed;
    int32_t ob;                     /* B's shift: 128 for uint8 B */
    int need_rowsum;                /* 0 when every zb' is 0 (then rowsum(A') is not needed) */
    const int32_t *bias;            /* Q8: int32 bias per column, added before scaling (or NULL) */
    const float *fbias;             /* F32: float bias per column, added after (or NULL) */
    float sa, sy;                   /* Q8: (sa * sb[n]) / sy; F32: sa * sb[n] */
    const float *sb;
    int64_t sb_step;
    int32_t zy;                     /* Q8: the output's zero point and range */
    int y_signed;
} Om2IgemmOut;

/* ---- packing ------------------------------------------------------------------------------- */

static inline int64_t om2_igemm_k4(int64_t K) { return (K + 3) / 4; }

/* Bytes of a block's workspace for a tile of up to `tile_n` columns: A's panel (+ rowsums) and,
 * for a B read from an input, its packed panels (+ colsums). om2gen/ops/igemm_pack.py mirrors it. */
static inline int64_t om2_igemm_ws_bytes(int64_t K, int64_t tile_n, int b_packed) {
    const int64_t k4 = om2_igemm_k4(K), np = (tile_n + OM2_IGEMM_NR - 1) / OM2_IGEMM_NR;
    int64_t bytes = k4 * 4 * OM2_IGEMM_MR + 4 * OM2_IGEMM_MR + 64;
    if (!b_packed) bytes += np * (k4 * 64 + 4 * OM2_IGEMM_NR) + 64;
    return bytes;
}

/* rowsum(A') of a packed panel (k past K packed as 0). */
static inline void om2_igemm_rowsum(const uint8_t *pa, int64_t k4, int32_t *rowsum) {
    int32_t s[OM2_IGEMM_MR * 4] = {0};
    for (int64_t k = 0; k < k4; ++k)
        for (int i = 0; i < OM2_IGEMM_MR * 4; ++i) s[i] += pa[k * OM2_IGEMM_MR * 4 + i];
    for (int r = 0; r < OM2_IGEMM_MR; ++r) rowsum[r] = s[4 * r] + s[4 * r + 1] + s[4 * r + 2] + s[4 * r + 3];
}

/* A full panel whose MR values of each k are contiguous bytes: at base + koff[k] (an im2col
 * panel inside the image at column stride 1), or at base + k * kstride (a pointwise
 * convolution's image, positions contiguous). Four k at a time: their rows interleaved into
 * [MR][4] (SSE2 unpacks for MR = 8), then XOR the flip. */
static inline void om2_igemm_pack_a_contiguous(const uint8_t *base, const int32_t *koff, int64_t kstride, int64_t K,
                                               uint8_t flip, uint8_t *pa) {
    const int64_t k4 = om2_igemm_k4(K);
    static const uint8_t zeros[OM2_IGEMM_MR] = {0};
    for (int64_t g = 0; g < k4; ++g) {
        const uint8_t *src[4];
        for (int j = 0; j < 4; ++j) {
            const int64_t k = 4 * g + j;
            src[j] = k < K ? base + (koff ? (int64_t)koff[k] : k * kstride) : NULL;
        }
        uint8_t *dst = pa + g * 4 * OM2_IGEMM_MR;
#if defined(__AVX2__) && OM2_IGEMM_MR == 8
        if (src[3]) {   /* (k past K: the scalar path, which leaves its bytes 0) */
            const __m128i f = _mm_set1_epi8((char)flip);
            __m128i v[4];
            for (int j = 0; j < 4; ++j) v[j] = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)src[j]), f);
            const __m128i ab = _mm_unpacklo_epi8(v[0], v[1]), cd = _mm_unpacklo_epi8(v[2], v[3]);
            _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(ab, cd));
            _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(ab, cd));
            continue;
        }
#endif
        for (int j = 0; j < 4; ++j) {
            const uint8_t *sj = src[j] ? src[j] : zeros;
            const uint8_t fj = src[j] ? flip : 0;
            for (int r = 0; r < OM2_IGEMM_MR; ++r) dst[4 * r + j] = (uint8_t)(sj[r] ^ fj);
        }
    }
}

#if defined(__AVX2__) && OM2_IGEMM_MR == 8
/* A convolution's panel of 8 positions every tap of which is inside the image, at column stride
 * SW (1 or 2): positions [0, n1) at base0 + r * SW, the rest (the next output row's first ones) at
 * base1 + r * SW; k's byte of position r at that + koff[k]. Four k at a time as in
 * om2_igemm_pack_a_contiguous, each k's 8 bytes one load (stride 2: 16 bytes, the even ones kept)
 * or, across the row break, two blended. */
static inline __m128i om2_igemm_load8(const uint8_t *p, int64_t SW) {
    if (SW == 1) return _mm_loadl_epi64((const __m128i *)p);
    const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), even);
}

static inline void om2_igemm_pack_a_rows(const uint8_t *base0, const uint8_t *base1, int64_t n1, int64_t SW,
                                         const int32_t *koff, int64_t K, uint8_t flip, uint8_t *pa) {
    const int64_t k4 = om2_igemm_k4(K);
    const __m128i f = _mm_set1_epi8((char)flip);
    static const int8_t first[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    const __m128i keep = _mm_loadl_epi64((const __m128i *)(first + 8 - n1));   /* bytes [0, n1) of base0 */
    for (int64_t g = 0; g < k4; ++g) {
        uint8_t *dst = pa + g * 4 * OM2_IGEMM_MR;
        if (4 * g + 3 < K) {
            __m128i v[4];
            for (int j = 0; j < 4; ++j) {
                const int64_t o = koff[4 * g + j];
                __m128i a = om2_igemm_load8(base0 + o, SW);
                if (n1 < 8) a = _mm_blendv_epi8(om2_igemm_load8(base1 + o, SW), a, keep);
                v[j] = _mm_xor_si128(a, f);
            }
            const __m128i ab = _mm_unpacklo_epi8(v[0], v[1]), cd = _mm_unpacklo_epi8(v[2], v[3]);
            _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(ab, cd));
            _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(ab, cd));
            continue;
        }
        memset(dst, 0, 4 * OM2_IGEMM_MR);   /* (k past K: 0) */
        for (int64_t k = 4 * g; k < K; ++k)
            for (int64_t r = 0; r < OM2_IGEMM_MR; ++r)
                dst[4 * r + (k & 3)] = (uint8_t)((r < n1 ? base0 : base1)[r * SW + koff[k]] ^ flip);
    }
}
#endif

/* A's rows [m0, m0 + rows) into one panel (rows past `rows` zero), and their rowsum(A'). */
static inline void om2_igemm_pack_a(const Om2IgemmA *A, int64_t K, int64_t m0, int64_t rows, uint8_t *pa,
                                    int32_t *rowsum) {
    const int64_t k4 = om2_igemm_k4(K);
#if defined(__AVX2__) && OM2_IGEMM_MR == 8
    if (rows == OM2_IGEMM_MR && A->conv && A->conv->koff && A->conv->PT == 0 && A->conv->PL == 0 &&
        (A->conv->SW == 1 || A->conv->SW == 2)) {
        /* no pads (the image padded beforehand, or none asked): every tap of every position is
         * inside; the 8 positions lie in one output row or two */
        const Om2IgemmIm2col *g = A->conv;
        const int64_t oh = m0 / g->OW, ow = m0 % g->OW, n1 = g->OW - ow < 8 ? g->OW - ow : 8;
        if (n1 == 8 || OM2_IGEMM_MR - n1 <= g->OW) {
            const uint8_t *base0 = g->x + oh * g->SH * g->W + ow * g->SW;
            const uint8_t *base1 = g->x + (oh + 1) * g->SH * g->W - n1 * g->SW;
            om2_igemm_pack_a_rows(base0, base1, n1, g->SW, g->koff, K, A->flip, pa);
            om2_igemm_rowsum(pa, k4, rowsum);
            return;
        }
    }
#endif
    if (rows == OM2_IGEMM_MR && A->conv && A->conv->koff && A->conv->SW == 1) {
        /* all MR positions in one output row, every tap of each inside the image: contiguous */
        const Om2IgemmIm2col *g = A->conv;
        const int64_t oh = m0 / g->OW, ow = m0 % g->OW, ih0 = oh * g->SH - g->PT, iw0 = ow - g->PL;
        if (ow + OM2_IGEMM_MR <= g->OW && ih0 >= 0 && ih0 + (g->KH - 1) * g->DH < g->H && iw0 >= 0 &&
            iw0 + OM2_IGEMM_MR - 1 + (g->KW - 1) * g->DW < g->W) {
            om2_igemm_pack_a_contiguous(g->x + ih0 * g->W + iw0, g->koff, 0, K, A->flip, pa);
            om2_igemm_rowsum(pa, k4, rowsum);
            return;
        }
    }
    if (rows == OM2_IGEMM_MR && !A->conv && A->rs == 1) {   /* k-major A: each k's rows contiguous */
        om2_igemm_pack_a_contiguous(A->p + m0, NULL, A->cs, K, A->flip, pa);
        om2_igemm_rowsum(pa, k4, rowsum);
        return;
    }
    memset(pa, 0, (size_t)(k4 * 4 * OM2_IGEMM_MR));
    for (int64_t r = 0; r < OM2_IGEMM_MR; ++r) rowsum[r] = 0;
    if (A->conv) {
        const Om2IgemmIm2col *g = A->conv;
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t pos = m0 + r, ih0 = pos / g->OW * g->SH - g->PT, iw0 = pos % g->OW * g->SW - g->PL;
            if (g->koff && ih0 >= 0 && ih0 + (g->KH - 1) * g->DH < g->H && iw0 >= 0 &&
                iw0 + (g->KW - 1) * g->DW < g->W) {   /* every tap inside: read through the offsets, 4 k a word */
                const uint8_t *b = g->x + ih0 * g->W + iw0;
                const uint32_t f4 = 0x01010101u * A->flip;
                int64_t k = 0;
                for (; k + 4 <= K; k += 4) {
                    const uint32_t w = ((uint32_t)b[g->koff[k]] | (uint32_t)b[g->koff[k + 1]] << 8 |
                                        (uint32_t)b[g->koff[k + 2]] << 16 | (uint32_t)b[g->koff[k + 3]] << 24) ^ f4;
                    memcpy(pa + (k >> 2) * 4 * OM2_IGEMM_MR + r * 4, &w, 4);
                }
                for (; k < K; ++k) pa[(k >> 2) * 4 * OM2_IGEMM_MR + r * 4 + (k & 3)] = b[g->koff[k]] ^ A->flip;
                continue;
            }
            const uint8_t padv = A->pad ^ A->flip;
            const int64_t taps = g->KH * g->KW;
            if (taps <= 64) {   /* the taps' offsets and whether each is inside, once for the row */
                int64_t off[64];
                uint8_t in[64];
                for (int64_t t = 0; t < taps; ++t) {
                    const int64_t ih = ih0 + t / g->KW * g->DH, iw = iw0 + t % g->KW * g->DW;
                    in[t] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
                    off[t] = in[t] ? ih * g->W + iw : 0;
                }
                int64_t k = 0;
                for (const uint8_t *xc = g->x; k < K; xc += g->H * g->W)
                    for (int64_t t = 0; t < taps; ++t, ++k)
                        pa[(k >> 2) * 4 * OM2_IGEMM_MR + r * 4 + (k & 3)] =
                            in[t] ? (uint8_t)(xc[off[t]] ^ A->flip) : padv;
                continue;
            }
            int64_t k = 0;
            for (const uint8_t *xc = g->x; k < K; xc += g->H * g->W) {
                for (int64_t kh = 0; kh < g->KH; ++kh) {
                    const int64_t ih = ih0 + kh * g->DH;
                    const int row_in = ih >= 0 && ih < g->H;
                    for (int64_t kw = 0; kw < g->KW; ++kw, ++k) {
                        const int64_t iw = iw0 + kw * g->DW;
                        const uint8_t v = row_in && iw >= 0 && iw < g->W ? (uint8_t)(xc[ih * g->W + iw] ^ A->flip) : padv;
                        pa[(k >> 2) * 4 * OM2_IGEMM_MR + r * 4 + (k & 3)] = v;
                    }
                }
            }
        }
        int32_t sums[OM2_IGEMM_MR];
        om2_igemm_rowsum(pa, k4, sums);
        for (int64_t r = 0; r < rows; ++r) rowsum[r] = sums[r];
        return;
    }
    if (A->cs == 1) {   /* row-major A: four k of a row are one 32-bit word */
        const uint32_t f4 = 0x01010101u * A->flip;
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t *src = A->p + (m0 + r) * A->rs;
            for (int64_t g = 0; g < K / 4; ++g) {
                uint32_t w;
                memcpy(&w, src + 4 * g, 4);
                w ^= f4;
                memcpy(pa + g * 4 * OM2_IGEMM_MR + r * 4, &w, 4);
            }
            for (int64_t k = K / 4 * 4; k < K; ++k) pa[(k >> 2) * 4 * OM2_IGEMM_MR + r * 4 + (k & 3)] = src[k] ^ A->flip;
        }
        om2_igemm_rowsum(pa, k4, rowsum);
        return;
    }
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t *src = A->p + (m0 + r) * A->rs;
        uint8_t *dst = pa + r * 4;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; ++k) {
            const uint8_t v = src[k * A->cs] ^ A->flip;
            dst[(k >> 2) * 4 * OM2_IGEMM_MR + (k & 3)] = v;
            sum += v;
        }
        rowsum[r] = sum;
    }
}

/* An input B's columns [n0, n0 + cols) into panels (what a constant B is packed into at compile
 * time), with colsum(B'). */
static inline void om2_igemm_pack_b(const Om2IgemmB *B, int64_t K, int64_t n0, int64_t cols, int8_t *pb,
                                    int32_t *colsum) {
    const int64_t k4 = om2_igemm_k4(K), np = (cols + OM2_IGEMM_NR - 1) / OM2_IGEMM_NR;
    memset(pb, 0, (size_t)(np * k4 * 64));
    for (int64_t c = 0; c < np * OM2_IGEMM_NR; ++c) colsum[c] = 0;
    for (int64_t k = 0; k < K; ++k) {
        const uint8_t *src = B->p + k * B->rs + n0 * B->cs;
        for (int64_t c = 0; c < cols; ++c) {
            const int8_t v = (int8_t)(src[c * B->cs] ^ B->flip);
            pb[(c / OM2_IGEMM_NR) * k4 * 64 + (k >> 2) * 64 + (c % OM2_IGEMM_NR) * 4 + (k & 3)] = v;
            colsum[c] += v;
        }
    }
}

/* ---- micro-kernels: acc[MR][32] = A panel x one or two B panels ----------------------------- */

#if defined(__AVX512F__) && defined(__AVX512BW__)
__attribute__((target("avx512vnni"))) static void om2_igemm_kernel_vnni(int64_t k4, const uint8_t *pa,
                                                                           const int8_t *b0, const int8_t *b1,
                                                                           int32_t *acc) {
    __m512i c0[OM2_IGEMM_MR], c1[OM2_IGEMM_MR];
#pragma GCC unroll 16
    for (int r = 0; r < OM2_IGEMM_MR; ++r) c0[r] = c1[r] = _mm512_setzero_si512();
    if (b1) {
        for (int64_t k = 0; k < k4; ++k) {
            const __m512i v0 = _mm512_loadu_si512(b0 + k * 64), v1 = _mm512_loadu_si512(b1 + k * 64);
            const uint8_t *a = pa + k * 4 * OM2_IGEMM_MR;
#pragma GCC unroll 16
            for (int r = 0; r < OM2_IGEMM_MR; ++r) {
                int32_t w;
                memcpy(&w, a + 4 * r, 4);
                const __m512i av = _mm512_set1_epi32(w);
                c0[r] = _mm512_dpbusd_epi32(c0[r], av, v0);
                c1[r] = _mm512_dpbusd_epi32(c1[r], av, v1);
            }
        }
    } else {
        for (int64_t k = 0; k < k4; ++k) {
            const __m512i v0 = _mm512_loadu_si512(b0 + k * 64);
            const uint8_t *a = pa + k * 4 * OM2_IGEMM_MR;
#pragma GCC unroll 16
            for (int r = 0; r < OM2_IGEMM_MR; ++r) {
                int32_t w;
                memcpy(&w, a + 4 * r, 4);
                c0[r] = _mm512_dpbusd_epi32(c0[r], _mm512_set1_epi32(w), v0);
            }
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < OM2_IGEMM_MR; ++r) {
        _mm512_storeu_si512(acc + r * 32, c0[r]);
        _mm512_storeu_si512(acc + r * 32 + 16, c1[r]);
    }
}

/* Without VNNI: B widened to int16 and multiplied with vpmaddwd by A's 4 values widened (pairs of
 * k summed into int32 lanes, the two halves of each column's sum added at the end). */
static void om2_igemm_kernel_bw(int64_t k4, const uint8_t *pa, const int8_t *b0, int32_t *acc) {
    __m512i lo[OM2_IGEMM_MR], hi[OM2_IGEMM_MR];
#pragma GCC unroll 16
    for (int r = 0; r < OM2_IGEMM_MR; ++r) lo[r] = hi[r] = _mm512_setzero_si512();
    for (int64_t k = 0; k < k4; ++k) {
        const __m512i v0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b0 + k * 64)));
        const __m512i v1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b0 + k * 64 + 32)));
        const uint8_t *a = pa + k * 4 * OM2_IGEMM_MR;
#pragma GCC unroll 16
        for (int r = 0; r < OM2_IGEMM_MR; ++r) {
            const int64_t w = (int64_t)a[4 * r] | (int64_t)a[4 * r + 1] << 16 | (int64_t)a[4 * r + 2] << 32 |
                              (int64_t)a[4 * r + 3] << 48;
            const __m512i av = _mm512_set1_epi64(w);
            lo[r] = _mm512_add_epi32(lo[r], _mm512_madd_epi16(av, v0));
            hi[r] = _mm512_add_epi32(hi[r], _mm512_madd_epi16(av, v1));
        }
    }
    for (int r = 0; r < OM2_IGEMM_MR; ++r) {
        int32_t t[32];
        _mm512_storeu_si512(t, lo[r]);
        _mm512_storeu_si512(t + 16, hi[r]);
        for (int c = 0; c < 16; ++c) acc[r * 32 + c] = t[2 * c] + t[2 * c + 1];
    }
}

static inline int om2_igemm_has_vnni(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1u);
    }
    return known;
}
#elif defined(__AVX2__)
/* AVX2: B widened to int16 (vpmovsxbw), A's 4 values broadcast and widened (vpbroadcastd +
 * vpmovzxbw: no scalar work per row), vpmaddwd sums pairs of k into int32 lanes; each column's
 * two halves are added at the end. */
static void om2_igemm_kernel_avx2(int64_t k4, const uint8_t *pa, const int8_t *b0, int32_t *acc) {
    __m256i c[OM2_IGEMM_MR][4];
#pragma GCC unroll 16
    for (int r = 0; r < OM2_IGEMM_MR; ++r) c[r][0] = c[r][1] = c[r][2] = c[r][3] = _mm256_setzero_si256();
    for (int64_t k = 0; k < k4; ++k) {
        const int8_t *b = b0 + k * 64;
        const uint8_t *a = pa + k * 4 * OM2_IGEMM_MR;
        __m256i av[OM2_IGEMM_MR];
#pragma GCC unroll 16
        for (int r = 0; r < OM2_IGEMM_MR; ++r) {   /* the row's 4 bytes in every 32-bit lane, widened */
            int32_t w;
            memcpy(&w, a + 4 * r, 4);
            av[r] = _mm256_cvtepu8_epi16(_mm_set1_epi32(w));
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16 * j)));
#pragma GCC unroll 16
            for (int r = 0; r < OM2_IGEMM_MR; ++r) c[r][j] = _mm256_add_epi32(c[r][j], _mm256_madd_epi16(av[r], v));
        }
    }
    for (int r = 0; r < OM2_IGEMM_MR; ++r) {
        int32_t t[32];
        for (int j = 0; j < 4; ++j) _mm256_storeu_si256((__m256i *)(t + 8 * j), c[r][j]);
        for (int col = 0; col < 16; ++col) acc[r * 32 + col] = t[2 * col] + t[2 * col + 1];
    }
}
#else
static void om2_igemm_kernel_c(int64_t k4, const uint8_t *pa, const int8_t *b0, int32_t *acc) {
    int32_t c[OM2_IGEMM_MR][16] = {{0}};
    for (int64_t k = 0; k < k4; ++k) {
        const int8_t *b = b0 + k * 64;
        const uint8_t *a = pa + k * 4 * OM2_IGEMM_MR;
        for (int r = 0; r < OM2_IGEMM_MR; ++r) {
            for (int col = 0; col < 16; ++col) {
                c[r][col] += a[4 * r] * b[4 * col] + a[4 * r + 1] * b[4 * col + 1] + a[4 * r + 2] * b[4 * col + 2] +
                             a[4 * r + 3] * b[4 * col + 3];
            }
        }
    }
    for (int r = 0; r < OM2_IGEMM_MR; ++r) memcpy(acc + r * 32, c[r], sizeof c[r]);
}
#endif

/* acc[r][0..16) (and [16..32) when b1) for one A panel over k4 groups. */
static inline void om2_igemm_kernel(int64_t k4, const uint8_t *pa, const int8_t *b0, const int8_t *b1, int32_t *acc) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (om2_igemm_has_vnni()) {
        om2_igemm_kernel_vnni(k4, pa, b0, b1, acc);
        return;
    }
    om2_igemm_kernel_bw(k4, pa, b0, acc);
    if (b1) {
        int32_t hi[OM2_IGEMM_MR * 32];
        om2_igemm_kernel_bw(k4, pa, b1, hi);
        for (int r = 0; r < OM2_IGEMM_MR; ++r) memcpy(acc + r * 32 + 16, hi + r * 32, 16 * sizeof(int32_t));
    }
#elif defined(__AVX2__)
    om2_igemm_kernel_avx2(k4, pa, b0, acc);
    if (b1) {
        int32_t hi[OM2_IGEMM_MR * 32];
        om2_igemm_kernel_avx2(k4, pa, b1, hi);
        for (int r = 0; r < OM2_IGEMM_MR; ++r) memcpy(acc + r * 32 + 16, hi + r * 32, 16 * sizeof(int32_t));
    }
#else
    om2_igemm_kernel_c(k4, pa, b0, acc);
    if (b1) {
        int32_t hi[OM2_IGEMM_MR * 32];
        om2_igemm_kernel_c(k4, pa, b1, hi);
        for (int r = 0; r < OM2_IGEMM_MR; ++r) memcpy(acc + r * 32 + 16, hi + r * 32, 16 * sizeof(int32_t));
    }
#endif
}

/* ---- epilogue ------------------------------------------------------------------------------ */

/* Round half to even then saturate, as MLAS requantizes (and QuantizeLinear defines): the
 * clamp to [qmin - zy, qmax - zy] first (same result: the bounds are integers), so that the
 * float-to-int conversion never overflows. */
static inline int32_t om2_requant(float v, int32_t zy, int32_t qmin, int32_t qmax) {
    const float lo = (float)(qmin - zy), hi = (float)(qmax - zy);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    /* |v| <= 255 here: adding and taking away 1.5 * 2^23 rounds it to an integer, half to even
     * (the default rounding mode), as MLAS does (MLAS_ROUNDING_BIAS_MAGIC), without libm */
    v = v == v ? v : 0.0f;    /* (a NaN scale: stored as the zero point) */
    return (int32_t)((v + 12582912.0f) - 12582912.0f) + zy;
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* om2_requant's steps on 16 lanes: the bounds first in max and min, so that a NaN passes them as
 * the conditionals let it, then becomes 0; lo, hi = qmin - zy, qmax - zy. */
static inline __m512i om2_requant16(__m512 v, __m512 lo, __m512 hi, __m512i zy) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
    return _mm512_add_epi32(_mm512_cvtps_epi32(v), zy);
}
#elif defined(__AVX2__)
static inline __m256i om2_requant8(__m256 v, __m256 lo, __m256 hi, __m256i zy) {
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), zy);
}

/* 32 int32 values that fit a byte as 32 bytes (the saturating packs keep them; the 8-bit pack
 * signed or not by qmin's sign), in order. */
static inline void om2_store_bytes32(const __m256i r[4], int32_t qmin, uint8_t *out) {
    const __m256i w0 = _mm256_packs_epi32(r[0], r[1]), w1 = _mm256_packs_epi32(r[2], r[3]);
    const __m256i p = qmin < 0 ? _mm256_packs_epi16(w0, w1) : _mm256_packus_epi16(w0, w1);
    _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif

/* out[i] = om2_requant((float)(acc[i] + bias) * mult, zy, qmin, qmax) as a byte, for i in [0, n),
 * n a multiple of 32: the same steps on vectors (om2_requant16, om2_requant8). */
static inline void om2_requant_bytes(const int32_t *acc, int64_t n, int32_t bias, float mult, int32_t zy,
                                     int32_t qmin, int32_t qmax, uint8_t *restrict out) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512 lo = _mm512_set1_ps((float)(qmin - zy)), hi = _mm512_set1_ps((float)(qmax - zy));
    const __m512 m = _mm512_set1_ps(mult);
    const __m512i b = _mm512_set1_epi32(bias), z = _mm512_set1_epi32(zy);
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_loadu_si512(acc + i), b)), m);
        _mm_storeu_si128((__m128i *)(out + i), _mm512_cvtepi32_epi8(om2_requant16(v, lo, hi, z)));
    }
#elif defined(__AVX2__)
    const __m256 lo = _mm256_set1_ps((float)(qmin - zy)), hi = _mm256_set1_ps((float)(qmax - zy));
    const __m256 m = _mm256_set1_ps(mult);
    const __m256i b = _mm256_set1_epi32(bias), z = _mm256_set1_epi32(zy);
    for (int64_t i = 0; i < n; i += 32) {
        __m256i r[4];
        for (int u = 0; u < 4; ++u) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(acc + i + 8 * u));
            r[u] = om2_requant8(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a, b)), m), lo, hi, z);
        }
        om2_store_bytes32(r, qmin, out + i);
    }
#else
    for (int64_t i = 0; i < n; ++i) out[i] = (uint8_t)om2_requant((float)(acc[i] + bias) * mult, zy, qmin, qmax);
#endif
}

/* out[c] = om2_requant((float)(a[c] + corr[c] - zbp[c] * rs) * mult[c], zy, qmin, qmax) as a byte,
 * for the 32 columns of one row of a micro-tile, on vectors. */
static inline void om2_requant_cols(const int32_t *a, const int32_t *corr, const int32_t *zbp, int32_t rs,
                                    const float *mult, int32_t zy, int32_t qmin, int32_t qmax, uint8_t *restrict out) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512 lo = _mm512_set1_ps((float)(qmin - zy)), hi = _mm512_set1_ps((float)(qmax - zy));
    const __m512i z = _mm512_set1_epi32(zy), r = _mm512_set1_epi32(rs);
    for (int c = 0; c < 32; c += 16) {
        const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(_mm512_loadu_si512(a + c), _mm512_loadu_si512(corr + c)),
                                           _mm512_mullo_epi32(_mm512_loadu_si512(zbp + c), r));
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_loadu_ps(mult + c));
        _mm_storeu_si128((__m128i *)(out + c), _mm512_cvtepi32_epi8(om2_requant16(v, lo, hi, z)));
    }
#elif defined(__AVX2__)
    const __m256 lo = _mm256_set1_ps((float)(qmin - zy)), hi = _mm256_set1_ps((float)(qmax - zy));
    const __m256i z = _mm256_set1_epi32(zy), r = _mm256_set1_epi32(rs);
    __m256i w[4];
    for (int u = 0; u < 4; ++u) {
        const __m256i s = _mm256_sub_epi32(
            _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(a + 8 * u)),
                             _mm256_loadu_si256((const __m256i *)(corr + 8 * u))),
            _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(zbp + 8 * u)), r));
        w[u] = om2_requant8(_mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_loadu_ps(mult + 8 * u)), lo, hi, z);
    }
    om2_store_bytes32(w, qmin, out);
#else
    for (int c = 0; c < 32; ++c)
        out[c] = (uint8_t)om2_requant((float)(a[c] + corr[c] - zbp[c] * rs) * mult[c], zy, qmin, qmax);
#endif
}

#if defined(__SSE2__) && OM2_IGEMM_MR == 8
/* An 8 x 32 byte tile (8 positions, 32 channels) stored transposed: channel c's 8 positions as one
 * 8-byte word at y + c * cs, for c in [0, cols). Byte unpacks, then 16-bit, then 32-bit ones. */
static inline void om2_igemm_store_columns(const uint8_t q[8][32], int64_t cols, int64_t cs, uint8_t *y) {
    for (int h = 0; h < 32 && h < cols; h += 16) {
        __m128i r[8], t[8], u[8], w[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128((const __m128i *)(q[i] + h));
        for (int i = 0; i < 4; ++i) {
            t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);       /* columns 0-7, rows 2i, 2i+1 */
            t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);   /* columns 8-15 */
        }
        for (int i = 0; i < 2; ++i) {   /* rows 4i..4i+3: columns 0-3, 4-7, 8-11, 12-15 */
            u[4 * i] = _mm_unpacklo_epi16(t[4 * i], t[4 * i + 2]);
            u[4 * i + 1] = _mm_unpackhi_epi16(t[4 * i], t[4 * i + 2]);
            u[4 * i + 2] = _mm_unpacklo_epi16(t[4 * i + 1], t[4 * i + 3]);
            u[4 * i + 3] = _mm_unpackhi_epi16(t[4 * i + 1], t[4 * i + 3]);
        }
        for (int i = 0; i < 4; ++i) {   /* all 8 rows: columns 4i + (0, 1) and 4i + (2, 3) */
            w[2 * i] = _mm_unpacklo_epi32(u[i], u[4 + i]);
            w[2 * i + 1] = _mm_unpackhi_epi32(u[i], u[4 + i]);
        }
        const int64_t n = cols - h < 16 ? cols - h : 16;
        for (int64_t c = 0; c < n; ++c) {
            const __m128i v = w[c / 2];
            _mm_storel_epi64((__m128i *)(y + (h + c) * cs), c % 2 ? _mm_unpackhi_epi64(v, v) : v);
        }
    }
}
#endif

/* The corrected sums of rows [0, rows) x columns [0, cols) of acc (columns n0.. of the output,
 * rows m0..), through the epilogue. */
static inline void om2_igemm_store(const Om2IgemmOut *o, int64_t K, const int32_t *acc, const int32_t *rowsum,
                                   const int32_t *colsum, int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    int32_t zbp[32] = {0}, corr[32] = {0};   /* (the columns past cols are computed and dropped) */
    float mult[32] = {0};
    for (int64_t c = 0; c < cols; ++c) {
        const int64_t n = n0 + c;
        const int32_t zb = o->zb_signed ? ((const int8_t *)o->zb)[n * o->zb_step]
                                        : ((const uint8_t *)o->zb)[n * o->zb_step];
        zbp[c] = zb - o->ob;
        corr[c] = (int32_t)K * o->za * zbp[c] - o->za * colsum[c];
        if (o->kind == OM2_IOUT_Q8) {
            corr[c] += o->bias ? o->bias[n] : 0;
            mult[c] = o->sa * o->sb[n * o->sb_step] / o->sy;
        } else if (o->kind == OM2_IOUT_F32) {
            mult[c] = o->sa * o->sb[n * o->sb_step];
        }
    }
    const int32_t qmin = o->y_signed ? -128 : 0, qmax = o->y_signed ? 127 : 255;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t m = m0 + r;
        const int32_t *a = acc + r * 32;
        const int32_t rs = o->need_rowsum ? rowsum[r] : 0;
        if (o->kind == OM2_IOUT_I32) {
            int32_t *y = (int32_t *)o->y + m * o->rs + n0 * o->cs;
            for (int64_t c = 0; c < cols; ++c) y[c * o->cs] = a[c] + corr[c] - zbp[c] * rs;
        } else if (o->kind == OM2_IOUT_F32) {
            float *y = (float *)o->y + m * o->rs + n0 * o->cs;
            for (int64_t c = 0; c < cols; ++c) {
                const float v = (float)(a[c] + corr[c] - zbp[c] * rs) * mult[c];
                y[c * o->cs] = o->fbias ? v + o->fbias[n0 + c] : v;
            }
        }
    }
    if (o->kind != OM2_IOUT_Q8) return;
    /* requantized a row of columns at a time (om2_requant_cols), then stored: a row's bytes at
     * once (row-major output), or a convolution's 8 positions per channel at once */
    uint8_t q[OM2_IGEMM_MR][32];
    for (int64_t r = 0; r < rows; ++r)
        om2_requant_cols(acc + r * 32, corr, zbp, o->need_rowsum ? rowsum[r] : 0, mult, o->zy, qmin, qmax, q[r]);
    uint8_t *y = (uint8_t *)o->y + m0 * o->rs + n0 * o->cs;
    if (o->cs == 1) {
        for (int64_t r = 0; r < rows; ++r) memcpy(y + r * o->rs, q[r], (size_t)cols);
        return;
    }
#if defined(__SSE2__) && OM2_IGEMM_MR == 8
    if (o->rs == 1 && rows == 8) {
        om2_igemm_store_columns(q, cols, o->cs, y);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * o->rs + c * o->cs] = q[r][c];
}

/* ---- one tile ------------------------------------------------------------------------------ */

/* Output rows [m0, m1) x columns [n0, n1) (n0 a multiple of 16): A packed a panel at a time
 * into ws, B's panels from the compile-time packing or packed into ws here (once per tile). */
static inline void om2_igemm_tile(int64_t K, const Om2IgemmA *A, const Om2IgemmB *B, const Om2IgemmOut *o,
                                  int64_t m0, int64_t m1, int64_t n0, int64_t n1, uint8_t *ws) {
    const int64_t k4 = om2_igemm_k4(K), panel = k4 * 64;
    uint8_t *pa = ws;
    int32_t *rowsum = (int32_t *)(ws + ((k4 * 4 * OM2_IGEMM_MR + 63) & ~(int64_t)63));
    const int8_t *pb;
    const int32_t *colsum;
    if (B->panels) {
        pb = B->panels + (n0 / OM2_IGEMM_NR) * panel;
        colsum = B->colsum + n0;
    } else {
        int8_t *own = (int8_t *)(ws + ((k4 * 4 * OM2_IGEMM_MR + 4 * OM2_IGEMM_MR + 127) & ~(int64_t)63));
        const int64_t np = (n1 - n0 + OM2_IGEMM_NR - 1) / OM2_IGEMM_NR;
        int32_t *sums = (int32_t *)(own + np * panel);
        om2_igemm_pack_b(B, K, n0, n1 - n0, own, sums);
        pb = own;
        colsum = sums;
    }
    int32_t acc[OM2_IGEMM_MR * 32];
    for (int64_t m = m0; m < m1; m += OM2_IGEMM_MR) {
        const int64_t rows = m1 - m < OM2_IGEMM_MR ? m1 - m : OM2_IGEMM_MR;
        om2_igemm_pack_a(A, K, m, rows, pa, rowsum);
        for (int64_t n = n0; n < n1; n += 32) {
            const int64_t p = (n - n0) / OM2_IGEMM_NR, cols = n1 - n < 32 ? n1 - n : 32;
            om2_igemm_kernel(k4, pa, pb + p * panel, cols > 16 ? pb + (p + 1) * panel : NULL, acc);
            om2_igemm_store(o, K, acc, rowsum, colsum + (n - n0), m, rows, n, cols);
        }
    }
}

#endif /* OM2_OM2_IGEMM_H */
