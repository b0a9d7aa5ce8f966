/*
 * om2_vmath.h -- expf, erff and tanhf that a C compiler can vectorize.
 *
 * The C library's float functions are calls the compiler cannot inline, so a loop that calls
 * them runs one element at a time. These are branch-free (selects, no calls), float-only and
 * plain C11 (no intrinsics; fmaf where the target has fused multiply-adds, which the compiler
 * inlines and vectorizes, else a multiply and an add), so an element-wise loop around them
 * vectorizes for whatever ISA the kernel is built for. Fused element-wise kernels
 * (templates/kernels/fused_elementwise.c.j2) use them.
 *
 * Accuracy (tests/passes/test_fusion_vmath.py checks it against the C library over the whole
 * float range): om2_expf within 2 ulp down to the subnormal range, om2_erff within 3 ulp for
 * |x| < 1 and 2e-7 absolute beyond, om2_tanhf within 3 ulp for |x| < 0.625 and 3e-7 absolute
 * beyond (the C library's are within 1 ulp; the project's tolerance is 1e-4 relative), with and
 * without FMA. NaN propagates, infinities give the limits, -0 stays -0. The polynomial
 * coefficients are least-squares fits in float64 over Chebyshev nodes, rounded to float.
 */
#ifndef OM2_OM2_VMATH_H
#define OM2_OM2_VMATH_H

#include <math.h>
#include <stdint.h>

/* a * b + c: one fused multiply-add where the target has them (one rounding, half the
 * instructions of the polynomials below), else a multiply and an add */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define OM2_VM_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define OM2_VM_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline float om2_vm_from_bits(uint32_t u) {
    union { uint32_t u; float f; } v = { .u = u };
    return v.f;
}

/* e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, Cody-Waite), e^r by a degree-6
 * polynomial, 2^n applied in two halves so that results down to the subnormals stay exact. */
static inline float om2_expf(float x) {
    const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);   /* beyond: 0 and +inf */
    const float xs = xc == xc ? xc : 0.0f;
    const float shifter = 12582912.0f;   /* 1.5 * 2^23: adding and subtracting it rounds */
    const float n = OM2_VM_FMA(xs, 1.44269504f, shifter) - shifter;
    float r = OM2_VM_FMA(n, -0.693359375f, xs);
    r = OM2_VM_FMA(n, 2.12194440e-4f, r);
    const float q = OM2_VM_FMA(OM2_VM_FMA(OM2_VM_FMA(OM2_VM_FMA(r, 0.0013893835f, 0.008363128f), r, 0.041666944f), r,
                                          0.16666578f), r, 0.5f);
    const float p = 1.0f + OM2_VM_FMA(r * r, q, r);
    const int32_t ni = (int32_t)n;
    const int32_t n1 = ni >> 1, n2 = ni - n1;   /* floor(n / 2): both halves stay in [-75, 64] */
    const float y = p * om2_vm_from_bits((uint32_t)(n1 + 127) << 23) * om2_vm_from_bits((uint32_t)(n2 + 127) << 23);
    return x == x ? y : x;
}

/* erf(x): |x| < 1 as x P(x^2); above, 1 - e^(-x^2) Q(|x|) with Q fitted to erfcx on [1, 4]
 * (from 4 on, erf is 1 in float). */
static inline float om2_erff(float x) {
    const float t = x < 0.0f ? -x : x;
    const float s = x * x;
    float ps = OM2_VM_FMA(s, 7.898139e-05f, -0.0008024335f);
    ps = OM2_VM_FMA(ps, s, 0.0051900516f);
    ps = OM2_VM_FMA(ps, s, -0.026854808f);
    ps = OM2_VM_FMA(ps, s, 0.11283612f);
    ps = OM2_VM_FMA(ps, s, -0.3761263f);
    ps = OM2_VM_FMA(ps, s, 1.1283792f);
    const float small = x * ps;
    const float u = t < 4.0f ? t : 4.0f;
    float q = OM2_VM_FMA(u, 1.4981617e-06f, -4.378835e-05f);
    q = OM2_VM_FMA(q, u, 0.00057919696f);
    q = OM2_VM_FMA(q, u, -0.0045944583f);
    q = OM2_VM_FMA(q, u, 0.024437265f);
    q = OM2_VM_FMA(q, u, -0.09242026f);
    q = OM2_VM_FMA(q, u, 0.2575717f);
    q = OM2_VM_FMA(q, u, -0.54181856f);
    q = OM2_VM_FMA(q, u, 0.8737443f);
    q = OM2_VM_FMA(q, u, -1.0821416f);
    q = OM2_VM_FMA(q, u, 0.9922682f);
    const float mag = 1.0f - om2_expf(-(u * u)) * q;
    const float large = x < 0.0f ? -mag : mag;
    return t < 1.0f ? small : (x == x ? large : x);
}

/* tanh(x): |x| < 0.625 as x + x^3 P(x^2); above, 1 - 2 / (e^(2|x|) + 1) with the sign of x. */
static inline float om2_tanhf(float x) {
    const float t = x < 0.0f ? -x : x;
    const float s = x * x;
    float pt = OM2_VM_FMA(s, 0.0023079691f, -0.008359907f);
    pt = OM2_VM_FMA(pt, s, 0.02177493f);
    pt = OM2_VM_FMA(pt, s, -0.053960226f);
    pt = OM2_VM_FMA(pt, s, 0.1333331f);
    pt = OM2_VM_FMA(pt, s, -0.33333334f);
    const float poly = OM2_VM_FMA(x * s, pt, x);
    const float small = s == 0.0f ? x : poly;   /* keeps -0 */
    const float u = t < 10.0f ? t : 10.0f;
    const float mag = 1.0f - 2.0f / (om2_expf(2.0f * u) + 1.0f);
    const float large = x < 0.0f ? -mag : mag;
    return t < 0.625f ? small : (x == x ? large : x);
}

#endif /* OM2_OM2_VMATH_H */
