/*
 * om2_idw.h -- the exact integer depthwise convolution of one channel plane (ConvInteger and
 * QLinearConv with one input and one output channel per group; templates/kernels/idwconv.c.j2).
 *
 *   acc[oh][ow] = sum_{kh, kw} (X[oh*SH + kh*DH - PT][ow*SW + kw*DW - PL] - zx) * (W[kh][kw] - zw)
 *
 * in int32, exactly (each product is at most 255 * 255; a pad reads zx, so it adds 0).
 *
 * Layout. A band of output rows (the whole plane where it fits the budget ops/int_conv.py
 * sets) is read through its padded input rows, X - zx as int16 with the pads 0, made first, then
 * through pair planes built from them: two taps of one kernel row, kw and kw + 1 (columns j and
 * j + DW), side by side in one int32 word, so that vpmaddwd multiplies and adds two taps per lane. A stride of S rows or columns splits
 * the plane into S x S phases (row r goes to phase r % SH, index r / SH; columns alike), so that
 * every tap pair reads consecutive words for consecutive outputs whatever the strides. In a
 * phase's words, output (oh, ow) and its tap pair at row offset ro and column offset co read
 * word (oh + ro) * Lq + ow + co: a constant offset from q = oh * Lq + ow. The outputs are summed
 * along q, 64 at a time over all of q's range (a row's last Lq - OW values are computed and
 * dropped): no edge columns, no tails.
 *
 * ISA (the includer's target flags): AVX-512BW (vpmaddwd on 16 lanes), AVX2 (8 lanes), SSE2
 * (4 lanes), else portable C; the same int32 sums.
 */
#ifndef OM2_OM2_IDW_H
#define OM2_OM2_IDW_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The outputs summed per step along q; each pair plane carries this many words after its last
 * row, which the steps past the last output read (their sums are dropped). */
#define OM2_IDW_STEP 64

/* xs[j] = row[j] - zx for j in [0, n). */
static inline void om2_idw_row(const void *row, int x_signed, int32_t zx, int64_t n, int16_t *restrict xs) {
    int64_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512i z = _mm512_set1_epi16((int16_t)zx);
    for (; j < n; j += 32) {
        const __mmask32 m = n - j >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << (n - j)) - 1;
        const __m256i b = _mm256_maskz_loadu_epi8(m, (const uint8_t *)row + j);
        const __m512i v = x_signed ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
        _mm512_mask_storeu_epi16(xs + j, m, _mm512_sub_epi16(v, z));
    }
#elif defined(__AVX2__)
    const __m256i z = _mm256_set1_epi16((int16_t)zx);
    for (; j < n && n >= 16; j += 16) {
        if (j + 16 > n) j = n - 16;     /* the last 16 again, overlapping: none past n is written */
        const __m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)row + j));
        const __m256i v = x_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
        _mm256_storeu_si256((__m256i *)(xs + j), _mm256_sub_epi16(v, z));
    }
#endif
    if (x_signed)
        for (; j < n; ++j) xs[j] = (int16_t)((int32_t)((const int8_t *)row)[j] - zx);
    else
        for (; j < n; ++j) xs[j] = (int16_t)((int32_t)((const uint8_t *)row)[j] - zx);
}

/* d[i] = (xs[i], xs[i + DW]) for i in [0, n), n a multiple of 16 (column stride 1). */
static inline void om2_idw_pairs(const int16_t *xs, int64_t DW, int64_t n, int32_t *restrict d) {
    for (int64_t i = 0; i < n; i += 16) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(xs + i)));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(xs + i + DW)));
        _mm512_storeu_si512(d + i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
#elif defined(__AVX2__)
        for (int64_t h = i; h < i + 16; h += 8) {
            const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(xs + h)));
            const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(xs + h + DW)));
            _mm256_storeu_si256((__m256i *)(d + h), _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16)));
        }
#else
        for (int64_t h = i; h < i + 16; ++h)
            d[h] = (int32_t)((uint32_t)(uint16_t)xs[h] | (uint32_t)(uint16_t)xs[h + DW] << 16);
#endif
    }
}

/* The row length of the padded int16 rows: Lq rounded up to 16, times SW, plus DW. */
static inline int64_t om2_idw_row_length(int64_t Lq, int64_t SW, int64_t DW) {
    return ((Lq + 15) & ~(int64_t)15) * SW + DW;
}

/* The padded rows of a band as int16, in phase-major order: padding row r_p (the input's row
 * r_p - PT) at xs + ((r_p % SH) * Hq + r_p / SH) * lx, r_p in [0, SH * Hq), with
 * xs[PL + j] = X[r_p - PT][j] - zx (j < lx - PL), a row outside the image all 0. The columns
 * outside the image are never written (xs was zeroed once), so they stay 0. All the rows are
 * made before any is read (a row's words are read long after they are written: no
 * store-to-load forwarding across unaligned stores). */
static inline void om2_idw_rows(const void *x, int x_signed, int32_t zx, int64_t H, int64_t W, int64_t PT,
                                int64_t PL, int64_t SH, int64_t Hq, int64_t lx, int16_t *restrict xs) {
    const int64_t n = PL + W < lx ? W : lx - PL;
    for (int64_t rp = 0; rp < SH * Hq; ++rp) {
        const int64_t r = rp - PT;
        int16_t *row = xs + ((rp % SH) * Hq + rp / SH) * lx;
        if (r < 0 || r >= H)
            memset(row, 0, (size_t)lx * sizeof(int16_t));
        else
            om2_idw_row((const uint8_t *)x + r * W, x_signed, zx, n, row + PL);
    }
}

/* The pair planes of a band from its padded rows (om2_idw_rows): phase (rp, cp) is [Hq][Lq]
 * words and OM2_IDW_STEP more (a row is built 16 words at a time, up to 15 past its end: into the
 * next row, built after it, or the plane's margin); word (idx, i) = (row[i*SW + cp],
 * row[i*SW + cp + DW]) of padding row idx*SH + rp. */
static inline void om2_idw_planes(const int16_t *xs, int64_t lx, int64_t SH, int64_t SW, int64_t DW, int64_t Hq,
                                  int64_t Lq, int32_t *restrict planes) {
    const int64_t plane = Hq * Lq + OM2_IDW_STEP, lq16 = (Lq + 15) & ~(int64_t)15;
    for (int64_t rp = 0; rp < SH; ++rp) {
        for (int64_t idx = 0; idx < Hq; ++idx) {
            const int16_t *row = xs + (rp * Hq + idx) * lx;
            int32_t *dst = planes + rp * SW * plane + idx * Lq;
            if (SW == 1) {
                om2_idw_pairs(row, DW, lq16, dst);
                continue;
            }
            for (int64_t cp = 0; cp < SW; ++cp) {
                const int16_t *s = row + cp;
                int32_t *d = dst + cp * plane;
                for (int64_t i = 0; i < lq16; ++i)
                    d[i] = (int32_t)((uint32_t)(uint16_t)s[i * SW] | (uint32_t)(uint16_t)s[i * SW + DW] << 16);
            }
        }
    }
}

/* acc[q] for q in [0, qn) rounded up to OM2_IDW_STEP: the sum over the tap pairs p of
 * lo * w_lo + hi * w_hi, word src[p][q] = (lo, hi), weights wp[p] = (w_lo, w_hi) as int16 pairs. */
static inline void om2_idw_sum(const int32_t *const *src, const int32_t *wp, int npairs, int64_t qn,
                               int32_t *restrict acc) {
    for (int64_t q = 0; q < qn; q += OM2_IDW_STEP) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
        __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        for (int p = 0; p < npairs; ++p) {
            const __m512i w = _mm512_set1_epi32(wp[p]);
            const int32_t *s = src[p] + q;
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u)
                a[u] = _mm512_add_epi32(a[u], _mm512_madd_epi16(_mm512_loadu_si512(s + 16 * u), w));
        }
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) _mm512_storeu_si512(acc + q + 16 * u, a[u]);
#elif defined(__AVX2__)
        __m256i a[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_si256();
        for (int p = 0; p < npairs; ++p) {
            const __m256i w = _mm256_set1_epi32(wp[p]);
            const int32_t *s = src[p] + q;
#pragma GCC unroll 8
            for (int u = 0; u < 8; ++u)
                a[u] = _mm256_add_epi32(a[u], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(s + 8 * u)), w));
        }
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) _mm256_storeu_si256((__m256i *)(acc + q + 8 * u), a[u]);
#elif defined(__SSE2__)
        __m128i a[16];
#pragma GCC unroll 16
        for (int u = 0; u < 16; ++u) a[u] = _mm_setzero_si128();
        for (int p = 0; p < npairs; ++p) {
            const __m128i w = _mm_set1_epi32(wp[p]);
            const int32_t *s = src[p] + q;
#pragma GCC unroll 16
            for (int u = 0; u < 16; ++u)
                a[u] = _mm_add_epi32(a[u], _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(s + 4 * u)), w));
        }
#pragma GCC unroll 16
        for (int u = 0; u < 16; ++u) _mm_storeu_si128((__m128i *)(acc + q + 4 * u), a[u]);
#else
        int32_t a[OM2_IDW_STEP] = {0};
        for (int p = 0; p < npairs; ++p) {
            /* (GCC's conversions and shifts of signed values: modulo and arithmetic) */
            const int32_t wlo = (int16_t)wp[p], whi = wp[p] >> 16;
            const int32_t *s = src[p] + q;
            for (int u = 0; u < OM2_IDW_STEP; ++u) a[u] += (int16_t)s[u] * wlo + (s[u] >> 16) * whi;
        }
        memcpy(acc + q, a, sizeof a);
#endif
    }
}

/* The direct form (column dilation 1, column stride 1 or 2): the tap pairs read the padded rows
 * themselves, laid out with pitch SW * Lq (int16), so that (row[j], row[j + 1]) is the int32 at
 * row + j. For output q and pair p the word is at src[p] + SW * q: at stride 2 consecutive
 * outputs read consecutive words; at stride 1 they overlap by one int16, so the words at
 * src[p] + q + 2i (the even outputs) and src[p] + q + 1 + 2i (the odd ones) are summed apart and
 * interleaved once per step. acc[q] for q in [0, qn) rounded up to OM2_IDW_STEP. */
static inline void om2_idw_sum_direct(const int16_t *const *src, const int32_t *wp, int npairs, int64_t SW,
                                      int64_t qn, int32_t *restrict acc) {
    for (int64_t q = 0; q < qn; q += OM2_IDW_STEP) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
        __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
        for (int p = 0; p < npairs; ++p) {
            const __m512i w = _mm512_set1_epi32(wp[p]);
            /* stride 1: a[2h] the even outputs of [q + 32h, q + 32h + 32), a[2h + 1] the odd ones;
             * stride 2: a[u] the outputs [q + 16u, q + 16u + 16) */
            const int16_t *s = src[p] + SW * q;
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u) {
                const int16_t *at = SW == 1 ? s + 32 * (u / 2) + (u % 2) : s + 32 * u;
                a[u] = _mm512_add_epi32(a[u], _mm512_madd_epi16(_mm512_loadu_si512(at), w));
            }
        }
        if (SW == 1) {
            const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            for (int h = 0; h < 2; ++h) {
                _mm512_storeu_si512(acc + q + 32 * h, _mm512_permutex2var_epi32(a[2 * h], lo, a[2 * h + 1]));
                _mm512_storeu_si512(acc + q + 32 * h + 16, _mm512_permutex2var_epi32(a[2 * h], hi, a[2 * h + 1]));
            }
        } else {
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u) _mm512_storeu_si512(acc + q + 16 * u, a[u]);
        }
#elif defined(__AVX2__)
        __m256i a[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_si256();
        for (int p = 0; p < npairs; ++p) {
            const __m256i w = _mm256_set1_epi32(wp[p]);
            const int16_t *s = src[p] + SW * q;
#pragma GCC unroll 8
            for (int u = 0; u < 8; ++u) {
                const int16_t *at = SW == 1 ? s + 16 * (u / 2) + (u % 2) : s + 16 * u;
                a[u] = _mm256_add_epi32(a[u], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at), w));
            }
        }
        if (SW == 1) {
            for (int h = 0; h < 4; ++h) {   /* even e0..e7, odd o0..o7 -> e0 o0 .. e7 o7 */
                const __m256i l = _mm256_unpacklo_epi32(a[2 * h], a[2 * h + 1]);   /* e0 o0 e1 o1 | e4 o4 e5 o5 */
                const __m256i u = _mm256_unpackhi_epi32(a[2 * h], a[2 * h + 1]);   /* e2 o2 e3 o3 | e6 o6 e7 o7 */
                _mm256_storeu_si256((__m256i *)(acc + q + 16 * h), _mm256_permute2x128_si256(l, u, 0x20));
                _mm256_storeu_si256((__m256i *)(acc + q + 16 * h + 8), _mm256_permute2x128_si256(l, u, 0x31));
            }
        } else {
#pragma GCC unroll 8
            for (int u = 0; u < 8; ++u) _mm256_storeu_si256((__m256i *)(acc + q + 8 * u), a[u]);
        }
#else
        for (int64_t i = q; i < q + OM2_IDW_STEP; ++i) {
            int32_t sum = 0;
            for (int p = 0; p < npairs; ++p) {
                const int16_t *s = src[p] + SW * i;
                sum += s[0] * (int32_t)(int16_t)wp[p] + s[1] * (wp[p] >> 16);   /* (GCC: arithmetic shift) */
            }
            acc[i] = sum;
        }
#endif
    }
}

#endif /* OM2_OM2_IDW_H */
