/* kite_math.h - the scalar math of kite, written once for C and CUDA.
 *
 * Every function here uses only IEEE basic operations (+, -, *, /, sqrt, compare, bit moves),
 * each rounded on its own: compile C with -ffp-contract=off and nvcc with -fmad=false, never
 * with fast-math. Then the CPU (gcc, clang, MinGW) and the GPU produce the same bits.
 * No libm transcendental is used: glibc's, MinGW's and CUDA's differ in the last bit.
 *
 * Accuracy (checked by `kite selftest` against libm):
 *   kite_expf      <= 2 ulp on [-87, 88]      kite_logf   <= 2 ulp on normal positive floats
 *   kite_log1pf    <= 4 ulp                   kite_sigmoidf, kite_siluf, kite_softplusf follow
 *   kite_rsqrtf    1 / sqrtf(x), both correctly rounded
 *   kite_sin/cos   <= 1e-15 absolute on |x| <= 1e5;  kite_pow (x > 0) <= 1e-14 relative
 *
 * See docs/NUMERICS.md for where each is used.
 */
#ifndef KITE_MATH_H
#define KITE_MATH_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIP__) /* nvcc, or hipcc (clang HIP) */
#  define KITE_FN static inline __host__ __device__
#else
#  define KITE_FN static inline
#  include <math.h> /* sqrtf, sqrt, floorf, floor: exact or correctly rounded */
#endif

/* ---- bit moves ---------------------------------------------------------------------------- */

KITE_FN uint32_t kite_f32_bits(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}

KITE_FN float kite_bits_f32(uint32_t u) {
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
}

KITE_FN uint64_t kite_f64_bits(double d) {
    union { double d; uint64_t u; } v;
    v.d = d;
    return v.u;
}

KITE_FN double kite_bits_f64(uint64_t u) {
    union { double d; uint64_t u; } v;
    v.u = u;
    return v.d;
}

/* 2^n as a float, for -126 <= n <= 127. */
KITE_FN float kite_exp2i(int n) {
    return kite_bits_f32((uint32_t)(n + 127) << 23);
}

/* 2^n as a double, for -1022 <= n <= 1023. */
KITE_FN double kite_exp2i_d(int n) {
    return kite_bits_f64((uint64_t)(n + 1023) << 52);
}

/* ---- half and bfloat16 (exact, no hardware conversion) ------------------------------------ */

KITE_FN float kite_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) /* inf / nan */
        return kite_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return kite_bits_f32(sign);
        /* subnormal: man * 2^-24, exact in float */
        float v = (float)man * kite_exp2i(-24);
        return sign ? -v : v;
    }
    return kite_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round to nearest even; overflow to inf; nan stays nan (quiet). */
KITE_FN uint16_t kite_f32_to_f16(float f) {
    uint32_t x = kite_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return sign; /* rounds to zero */
        man |= 0x800000u;
        int shift = 14 - e; /* 14..24 */
        uint32_t half = (man >> shift);
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | h);
}

KITE_FN float kite_bf16_to_f32(uint16_t b) {
    return kite_bits_f32((uint32_t)b << 16);
}

KITE_FN uint16_t kite_f32_to_bf16(float f) {
    uint32_t x = kite_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    uint32_t r = x + 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(r >> 16);
}

/* Q8_0 activation quantization of a 32-block whose max |x| is amax (docs/NUMERICS.md, llama.cpp's
 * x86 rule): q = rint(x * kite_q8_act_inverse(amax)), and the block's scale d, amax / 127 in f16. */
KITE_FN float kite_q8_act_inverse(float amax) {
    return amax != 0.0f ? 127.0f / amax : 0.0f;
}

KITE_FN float kite_q8_act_scale(float amax) {
    return kite_f16_to_f32(kite_f32_to_f16(amax / 127.0f));
}

/* ---- float functions ---------------------------------------------------------------------- */

KITE_FN float kite_rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}

/* exp(x): Cody-Waite reduction by ln 2, a degree-7 polynomial (cephes expf), scaling by 2^n
 * in two exact steps so that results in the subnormal range round once. */
KITE_FN float kite_expf(float x) {
    if (x != x)
        return x;
    if (x > 88.72283935546875f)
        return kite_bits_f32(0x7f800000u);
    if (x < -103.972084045410156f)
        return 0.0f;
    float kf = floorf(x * 1.44269502162933349609f + 0.5f);
    int n = (int)kf;
    float r = x - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * z + r;
    y = y + 1.0f;
    int n1 = n / 2;
    int n2 = n - n1;
    return y * kite_exp2i(n1) * kite_exp2i(n2);
}

/* log(x): cephes logf. Exact for the special values (0 -> -inf, <0 -> nan, inf -> inf). */
KITE_FN float kite_logf(float x) {
    if (x != x)
        return x;
    if (x < 0.0f)
        return kite_bits_f32(0x7fc00000u);
    if (x == 0.0f)
        return kite_bits_f32(0xff800000u);
    if (x == kite_bits_f32(0x7f800000u))
        return x;
    int e = 0;
    if (x < 1.17549435e-38f) { /* subnormal: scale up exactly */
        x = x * 8388608.0f;
        e = -23;
    }
    uint32_t u = kite_f32_bits(x);
    e += (int)((u >> 23) & 0xffu) - 126;
    float m = kite_bits_f32((u & 0x807fffffu) | 0x3f000000u); /* [0.5, 1) */
    if (m < 0.707106781186547524f) {
        e -= 1;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m + -1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m + -1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m + -1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m + -2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    float fe = (float)e;
    y = y + fe * -2.12194440e-4f;
    y = y + -0.5f * z;
    float r = m + y;
    r = r + fe * 0.693359375f;
    return r;
}

/* log(1 + x) for x >= -1: the compensated form log(u) * x / (u - 1), u = 1 + x. */
KITE_FN float kite_log1pf(float x) {
    float u = 1.0f + x;
    if (u == 1.0f)
        return x;
    if (u == kite_bits_f32(0x7f800000u))
        return u;
    return kite_logf(u) * (x / (u - 1.0f));
}

KITE_FN float kite_sigmoidf(float x) {
    return 1.0f / (1.0f + kite_expf(-x));
}

KITE_FN float kite_siluf(float x) {
    return x * kite_sigmoidf(x);
}

KITE_FN float kite_softplusf(float x) {
    return x > 20.0f ? x : kite_log1pf(kite_expf(x));
}

/* ---- double functions for the RoPE tables (host, once) ------------------------------------ */

/* exp(x) for |x| < 700: reduction by ln 2 (hi/lo), Taylor series to degree 13 on |r| <= 0.35. */
KITE_FN double kite_exp(double x) {
    if (x != x)
        return x;
    if (x > 709.0)
        return kite_bits_f64(0x7ff0000000000000ull);
    if (x < -708.0)
        return 0.0;
    double kf = floor(x * 1.44269504088896338700 + 0.5);
    int n = (int)kf;
    double r = x - kf * 6.93147180369123816490e-01; /* ln2 hi, 32 bits */
    r = r - kf * 1.90821492927058770002e-10;        /* ln2 lo */
    double p = 1.0 / 6227020800.0;                  /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return p * kite_exp2i_d(n);
}

/* log(x) for finite x > 0 (normal): x = 2^e m, m in [sqrt(1/2), sqrt(2)),
 * log(m) = 2 atanh(s), s = (m-1)/(m+1), odd series to s^23. */
KITE_FN double kite_log(double x) {
    if (!(x > 0.0))
        return kite_bits_f64(0x7ff8000000000000ull);
    uint64_t u = kite_f64_bits(x);
    int e = (int)((u >> 52) & 0x7ffu) - 1023;
    double m = kite_bits_f64((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (m > 1.41421356237309504880) {
        m = m * 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = 1.0 / 23.0;
    p = p * s2 + 1.0 / 21.0;
    p = p * s2 + 1.0 / 19.0;
    p = p * s2 + 1.0 / 17.0;
    p = p * s2 + 1.0 / 15.0;
    p = p * s2 + 1.0 / 13.0;
    p = p * s2 + 1.0 / 11.0;
    p = p * s2 + 1.0 / 9.0;
    p = p * s2 + 1.0 / 7.0;
    p = p * s2 + 1.0 / 5.0;
    p = p * s2 + 1.0 / 3.0;
    p = p * s2;
    double lm = 2.0 * s + 2.0 * s * p;
    double de = (double)e;
    return de * 6.93147180369123816490e-01 + (lm + de * 1.90821492927058770002e-10);
}

/* x^y for x > 0. */
KITE_FN double kite_pow(double x, double y) {
    if (y == 0.0)
        return 1.0;
    return kite_exp(y * kite_log(x));
}

KITE_FN double kite_sin_kernel(double r) { /* |r| <= pi/4 */
    double r2 = r * r;
    double p = -1.0 / 121645100408832000.0; /* -1/19! */
    p = p * r2 + 1.0 / 355687428096000.0;
    p = p * r2 + -1.0 / 1307674368000.0;
    p = p * r2 + 1.0 / 6227020800.0;
    p = p * r2 + -1.0 / 39916800.0;
    p = p * r2 + 1.0 / 362880.0;
    p = p * r2 + -1.0 / 5040.0;
    p = p * r2 + 1.0 / 120.0;
    p = p * r2 + -1.0 / 6.0;
    return r + r * (r2 * p);
}

KITE_FN double kite_cos_kernel(double r) { /* |r| <= pi/4 */
    double r2 = r * r;
    double p = 1.0 / 6402373705728000.0; /* 1/18! */
    p = p * r2 + -1.0 / 20922789888000.0;
    p = p * r2 + 1.0 / 87178291200.0;
    p = p * r2 + -1.0 / 479001600.0;
    p = p * r2 + 1.0 / 3628800.0;
    p = p * r2 + -1.0 / 40320.0;
    p = p * r2 + 1.0 / 720.0;
    p = p * r2 + -1.0 / 24.0;
    p = p * r2 + 0.5;
    return 1.0 - r2 * p;
}

/* Reduce x by pi/2 (Cody-Waite, 33 + 53 bits of pi/2; good for |x| <= 1e5): r and quadrant. */
KITE_FN double kite_reduce_pio2(double x, int *quadrant) {
    double n = floor(x * 6.36619772367581382433e-01 + 0.5);
    double r = x - n * 1.57079632673412561417e+00;
    r = r - n * 6.07710050650619224932e-11;
    *quadrant = (int)((int64_t)n & 3);
    return r;
}

KITE_FN double kite_sin(double x) {
    int q;
    double r = kite_reduce_pio2(x, &q);
    switch (q) {
    case 0: return kite_sin_kernel(r);
    case 1: return kite_cos_kernel(r);
    case 2: return -kite_sin_kernel(r);
    default: return -kite_cos_kernel(r);
    }
}

KITE_FN double kite_cos(double x) {
    int q;
    double r = kite_reduce_pio2(x, &q);
    switch (q) {
    case 0: return kite_cos_kernel(r);
    case 1: return -kite_sin_kernel(r);
    case 2: return -kite_cos_kernel(r);
    default: return kite_sin_kernel(r);
    }
}

/* ---- the canonical reduction (docs/NUMERICS.md) ------------------------------------------- */

/* Finish 32 lane partial sums with the butterfly 16, 8, 4, 2, 1; the result is s[0]. */
KITE_FN float kite_sum32_finish(float *s) {
    for (int off = 16; off > 0; off >>= 1)
        for (int l = 0; l < off; l++)
            s[l] = s[l] + s[l + off];
    return s[0];
}

/* dot(a, b, n) in the canonical order: lane i % 32, then the butterfly. */
KITE_FN float kite_dot_ref(const float *a, const float *b, int n) {
    float s[32];
    for (int l = 0; l < 32; l++)
        s[l] = 0.0f;
    for (int i = 0; i < n; i++)
        s[i & 31] = s[i & 31] + a[i] * b[i];
    return kite_sum32_finish(s);
}

/* sum of squares in the canonical order. */
KITE_FN float kite_sumsq(const float *a, int n) {
    return kite_dot_ref(a, a, n);
}

#endif /* KITE_MATH_H */
