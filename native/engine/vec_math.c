/* vec_math.c - see vec_math.h. The AVX2 forms run when the kernels' tier is AVX2 or above. */
#include "vec_math.h"

#include "kernels_tier.h"
#include "kite_math.h"

#if defined(__SSE2__) || defined(_M_X64)
#  include <emmintrin.h> /* the portable greedy pick */
#endif
#if KITE_HAVE_AVX2_CODE
#  include <immintrin.h>
#endif

/* ---- scalar C ---------------------------------------------------------------------------------- */

static void vec_add_scaled_scalar(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++)
        y[i] = y[i] + x[i] * a;
}

static void vec_silu_scalar(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++)
        y[i] = kite_siluf(x[i]);
}

static void vec_mul_add_scalar(float *y, const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++)
        y[i] = y[i] + a[i] * b[i];
}

static void vec_silu_mul_scalar(float *y, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++)
        y[i] = kite_siluf(g[i]) * u[i];
}

static void vec_mul_silu_scalar(float *y, const float *a, const float *z, int n) {
    for (int i = 0; i < n; i++)
        y[i] = a[i] * kite_siluf(z[i]);
}

static int vec_argmax_portable(const float *v, int n) {
    if (n <= 0 || v[0] != v[0])
        return 0;
    float m = v[0];
    int i = 0;
#if defined(__SSE2__) || defined(_M_X64)
    if (n >= 16) {
        __m128 a = _mm_set1_ps(m), b = a, c = a, d = a;
        for (; i + 16 <= n; i += 16) {
            a = _mm_max_ps(_mm_loadu_ps(v + i), a);
            b = _mm_max_ps(_mm_loadu_ps(v + i + 4), b);
            c = _mm_max_ps(_mm_loadu_ps(v + i + 8), c);
            d = _mm_max_ps(_mm_loadu_ps(v + i + 12), d);
        }
        float t[16];
        _mm_storeu_ps(t, a);
        _mm_storeu_ps(t + 4, b);
        _mm_storeu_ps(t + 8, c);
        _mm_storeu_ps(t + 12, d);
        for (int l = 0; l < 16; l++)
            m = t[l] > m ? t[l] : m;
    }
#endif
    for (; i < n; i++)
        m = v[i] > m ? v[i] : m;
    i = 0;
#if defined(__SSE2__) || defined(_M_X64)
    const __m128 mm = _mm_set1_ps(m);
    for (; i + 4 <= n; i += 4)
        if (_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + i), mm)))
            break;
#endif
    for (; i < n; i++)
        if (v[i] == m)
            return i;
    return 0;
}

/* ---- AVX2 ------------------------------------------------------------------------------------- */

#if KITE_HAVE_AVX2_CODE

KT_AVX2 static int vec_argmax_avx2(const float *v, int n) {
    if (n <= 0 || v[0] != v[0])
        return 0;
    float m = v[0];
    int i = 0;
    if (n >= 64) {
        __m256 a[8];
        for (int u = 0; u < 8; u++)
            a[u] = _mm256_set1_ps(m);
        for (; i + 64 <= n; i += 64)
            for (int u = 0; u < 8; u++)
                a[u] = _mm256_max_ps(_mm256_loadu_ps(v + i + 8 * u), a[u]);
        float t[64];
        for (int u = 0; u < 8; u++)
            _mm256_storeu_ps(t + 8 * u, a[u]);
        for (int l = 0; l < 64; l++)
            m = t[l] > m ? t[l] : m;
    }
    for (; i < n; i++)
        m = v[i] > m ? v[i] : m;
    const __m256 mm = _mm256_set1_ps(m);
    i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 e0 = _mm256_cmp_ps(_mm256_loadu_ps(v + i), mm, _CMP_EQ_OQ);
        const __m256 e1 = _mm256_cmp_ps(_mm256_loadu_ps(v + i + 8), mm, _CMP_EQ_OQ);
        const __m256 e2 = _mm256_cmp_ps(_mm256_loadu_ps(v + i + 16), mm, _CMP_EQ_OQ);
        const __m256 e3 = _mm256_cmp_ps(_mm256_loadu_ps(v + i + 24), mm, _CMP_EQ_OQ);
        if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(e0, e1), _mm256_or_ps(e2, e3))))
            break;
    }
    for (; i < n; i++)
        if (v[i] == m)
            return i;
    return 0;
}

KT_AVX2 static void vec_mul_add_avx2(float *y, const float *a, const float *b, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                              _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i))));
    for (; i < n; i++)
        y[i] = y[i] + a[i] * b[i];
}

KT_AVX2 static void vec_add_scaled_avx2(float *y, const float *x, float a, int n) {
    const __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                              _mm256_mul_ps(_mm256_loadu_ps(x + i), av)));
    for (; i < n; i++)
        y[i] = y[i] + x[i] * a;
}

/* kite_expf on 8 lanes: the same operations in the same order (no FMA in this target), the
 * range checks as blends. Lanes out of range compute garbage that the blends drop. */
KT_AVX2 static inline __m256 expf8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 kf = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609f)),
                                              _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(0.693359375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(kf, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, z), r), one);
    /* n1 = n / 2 rounded toward zero as in C, n2 = n - n1; 2^n as exponent bits */
    __m256i n = _mm256_cvttps_epi32(kf);
    __m256i n1 = _mm256_srai_epi32(_mm256_sub_epi32(n, _mm256_srai_epi32(n, 31)), 1);
    __m256i n2 = _mm256_sub_epi32(n, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(-103.972084045410156f), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000)),
                         _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* kite_siluf on 8 lanes: x * (1 / (1 + exp(-x))), -x a sign flip as in C. */
KT_AVX2 static inline __m256 silu8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = expf8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_mul_ps(x, _mm256_div_ps(one, _mm256_add_ps(one, e)));
}

/* mode 0: y = silu(a); 1: y = silu(a) * b; 2: y = a * silu(b) (the operand order of the C). */
KT_AVX2 static void vec_silu_avx2(float *y, const float *a, const float *b, int n, int mode) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 va = _mm256_loadu_ps(a + i);
        __m256 v = mode == 2 ? _mm256_mul_ps(va, silu8(_mm256_loadu_ps(b + i))) : silu8(va);
        if (mode == 1)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++)
        y[i] = mode == 0 ? kite_siluf(a[i]) : mode == 1 ? kite_siluf(a[i]) * b[i] : a[i] * kite_siluf(b[i]);
}

#define AVX2_OR(avx2_call, portable_call) (kernels_simd_active() ? (avx2_call) : (portable_call))
#else
#define AVX2_OR(avx2_call, portable_call) (portable_call)
#endif /* KITE_HAVE_AVX2_CODE */

/* ---- dispatch --------------------------------------------------------------------------------- */

void vec_add_scaled(float *y, const float *x, float a, int n) {
    AVX2_OR(vec_add_scaled_avx2(y, x, a, n), vec_add_scaled_scalar(y, x, a, n));
}

void vec_mul_add(float *y, const float *a, const float *b, int n) {
    AVX2_OR(vec_mul_add_avx2(y, a, b, n), vec_mul_add_scalar(y, a, b, n));
}

void vec_silu(float *y, const float *x, int n) {
    AVX2_OR(vec_silu_avx2(y, x, NULL, n, 0), vec_silu_scalar(y, x, n));
}

void vec_silu_mul(float *y, const float *g, const float *u, int n) {
    AVX2_OR(vec_silu_avx2(y, g, u, n, 1), vec_silu_mul_scalar(y, g, u, n));
}

void vec_mul_silu(float *y, const float *a, const float *z, int n) {
    AVX2_OR(vec_silu_avx2(y, a, z, n, 2), vec_mul_silu_scalar(y, a, z, n));
}

/* Greedy pick: the first index of the maximum, NaNs never win, and a NaN at index 0 gives 0
 * (the result of the plain loop `if (v[i] > v[best]) best = i`). Done in two passes without a
 * loop-carried load: the maximum over independent lanes (x > m ? x : m is exact in any order,
 * NaN skipped; maxps(x, m) is that very operation), then the first index that compares equal
 * to it. Every level gives the same index. */
int vec_argmax(const float *v, int n) {
    return AVX2_OR(vec_argmax_avx2(v, n), vec_argmax_portable(v, n));
}
