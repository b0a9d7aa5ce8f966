/*
 * om2_vmath.h -- expf, erff and tanhf that a C compiler can vectorize, and the logistic and
 * tanh of ONNX Runtime's MLAS.
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

/* The logistic function and tanh as MLAS (ONNX Runtime's CPU math library: logistic.cpp,
 * tanh.cpp and their FMA3 kernels) computes them, so that Sigmoid, Tanh and the recurrent ops'
 * gates equal ORT's bit for bit: an odd over an even polynomial in x^2 (Eigen's rational
 * interpolants), the input clamped to [-18, 18] (logistic) or [-9, 9] (tanh) as MAXPS/MINPS do
 * (a NaN passes through), Horner steps as fused multiply-adds in MLAS's order (its kernel for
 * targets without FMA uses a multiply and an add, as OM2_VM_FMA does there). The logistic adds
 * 0.5 and clamps at 0 (not at 1). Within 1.7e-7 (logistic) and 3.1e-7 (tanh) of the exact values:
 * less accurate than om2_tanhf near 0, which is why both exist. Why it matters: a quantized
 * model quantizes activations dynamically, so one ulp of a Sigmoid moves a value across a
 * rounding boundary and the difference grows through every integer layer after it. */
static inline float om2_mlas_logisticf(float x) {
    float v = x < -18.0f ? -18.0f : x;
    v = v > 18.0f ? 18.0f : v;
    const float s = v * v;
    float p = OM2_VM_FMA(s, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = OM2_VM_FMA(p, s, 6.08574864600143e-05f);
    p = OM2_VM_FMA(p, s, 8.51377133304701e-03f);
    p = OM2_VM_FMA(p, s, 2.48287947061529e-01f);
    p = p * v;
    float q = OM2_VM_FMA(s, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = OM2_VM_FMA(q, s, 6.29106785017040e-06f);
    q = OM2_VM_FMA(q, s, 1.70198817374094e-03f);
    q = OM2_VM_FMA(q, s, 1.16817656904453e-01f);
    q = OM2_VM_FMA(q, s, 9.93151921023180e-01f);
    const float r = p / q + 0.5f;
    return r < 0.0f ? 0.0f : r;   /* MLAS clamps below only: near 18 it gives 1.0000001 */
}

static inline float om2_mlas_tanhf(float x) {
    float v = x < -9.0f ? -9.0f : x;
    v = v > 9.0f ? 9.0f : v;
    const float s = v * v;
    float p = OM2_VM_FMA(s, -2.76076847742355e-16f, 2.00018790482477e-13f);
    p = OM2_VM_FMA(p, s, -8.60467152213735e-11f);
    p = OM2_VM_FMA(p, s, 5.12229709037114e-08f);
    p = OM2_VM_FMA(p, s, 1.48572235717979e-05f);
    p = OM2_VM_FMA(p, s, 6.37261928875436e-04f);
    p = OM2_VM_FMA(p, s, 4.89352455891786e-03f);
    p = p * v;
    float q = OM2_VM_FMA(s, 1.19825839466702e-06f, 1.18534705686654e-04f);
    q = OM2_VM_FMA(q, s, 2.26843463243900e-03f);
    q = OM2_VM_FMA(q, s, 4.89352518554385e-03f);
    return p / q;
}

#endif /* OM2_OM2_VMATH_H */
