/* quant.c - see quant.h. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "gguf.h"
#include "kite_math.h"

#if defined(__SSE2__) || defined(_M_X64)
#  include <emmintrin.h> /* the portable greedy pick */
#endif

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#  define KITE_HAVE_AVX2_CODE 1
#  include <cpuid.h>
#  include <immintrin.h>
#  define KT_AVX2 __attribute__((target("avx2,f16c")))
#else
#  define KITE_HAVE_AVX2_CODE 0
#endif
#if KITE_HAVE_AVX2_CODE
#  define KITE_HAVE_AVX512_CODE 1
#  define KT_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#  define KITE_HAVE_AVX512_CODE 0
#endif

static float f16_table[65536];
static int cpu_level;  /* the best QUANT_SIMD_* this CPU runs */
static int simd_on;    /* the QUANT_SIMD_* in use */

float quant_f16(uint16_t h) {
    return f16_table[h];
}

static uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* ---- activation quantization and dequantization ------------------------------------------ */

void quantize_row_act_scalar(const float *x, int k, int8_t *q, float *d) {
    for (int b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int i = 0; i < QK; i++) {
            float a = fabsf(xb[i]);
            if (a > amax)
                amax = a;
        }
        float db = amax / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        for (int i = 0; i < QK; i++) {
            float v = rintf(xb[i] * id);
            v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
            if (v != v)
                v = 0.0f;
            q[b * QK + i] = (int8_t)v;
        }
        d[b] = db;
    }
}

void act_prep_q4(const int8_t *q, int nb, int32_t *s, int8_t *p) {
    for (int b = 0; b < nb; b++) {
        int32_t t = 0;
        for (int i = 0; i < QK; i++)
            t += q[b * QK + i];
        s[b] = t;
    }
    for (int g = 0; g + 8 <= nb; g += 8) {
        int8_t *o = p + (size_t)g * QK;
        if (simd_on >= QUANT_SIMD_AVX512) /* blocks 0-3 then 4-7: 64 bytes of low halves, 64 of high */
            for (int j = 0; j < 8; j++) {
                const int8_t *a = q + (size_t)(g + j) * QK;
                memcpy(o + 128 * (j / 4) + 16 * (j % 4), a, 16);
                memcpy(o + 128 * (j / 4) + 64 + 16 * (j % 4), a + 16, 16);
            }
        else /* per j < 4: low halves of blocks j and j + 4, then their high halves */
            for (int j = 0; j < 4; j++) {
                const int8_t *a = q + (size_t)(g + j) * QK, *c = q + (size_t)(g + j + 4) * QK;
                memcpy(o + 64 * j, a, 16);
                memcpy(o + 64 * j + 16, c, 16);
                memcpy(o + 64 * j + 32, a + 16, 16);
                memcpy(o + 64 * j + 48, c + 16, 16);
            }
    }
}

void dequant_row(int type, const void *row, int n, float *out) {
    const uint8_t *p = (const uint8_t *)row;
    switch (type) {
    case GGUF_T_F32:
        memcpy(out, row, (size_t)n * sizeof(float));
        break;
    case GGUF_T_F16:
        for (int i = 0; i < n; i++)
            out[i] = f16_table[rd16(p + 2 * i)];
        break;
    case GGUF_T_BF16:
        for (int i = 0; i < n; i++)
            out[i] = kite_bf16_to_f32(rd16(p + 2 * i));
        break;
    case GGUF_T_Q8_0:
        for (int b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + (size_t)b * Q8_0_BYTES;
            float wd = f16_table[rd16(blk)];
            for (int i = 0; i < QK; i++)
                out[b * QK + i] = wd * (float)(int8_t)blk[2 + i];
        }
        break;
    case GGUF_T_Q4_0:
        for (int b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + (size_t)b * Q4_0_BYTES;
            float wd = f16_table[rd16(blk)];
            for (int j = 0; j < 16; j++) {
                out[b * QK + j] = wd * (float)((blk[2 + j] & 15) - 8);
                out[b * QK + j + 16] = wd * (float)((blk[2 + j] >> 4) - 8);
            }
        }
        break;
    default:
        memset(out, 0, (size_t)n * sizeof(float));
    }
}

/* ---- scalar kernels (the reference) -------------------------------------------------------- */

static void lanes_zero(float *s) {
    for (int l = 0; l < 32; l++)
        s[l] = 0.0f;
}

float dot_q8_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb) {
    const uint8_t *p = (const uint8_t *)w;
    float s[32];
    lanes_zero(s);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = p + (size_t)b * Q8_0_BYTES;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int i = 0; i < QK; i++)
            isum += (int32_t)(int8_t)blk[2 + i] * (int32_t)qb[i];
        float scale = f16_table[rd16(blk)] * xd[b];
        s[b & 31] = s[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(s);
}

float dot_q4_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb) {
    const uint8_t *p = (const uint8_t *)w;
    float s[32];
    lanes_zero(s);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = p + (size_t)b * Q4_0_BYTES;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (int32_t)((blk[2 + j] & 15) - 8) * (int32_t)qb[j];
            isum += (int32_t)((blk[2 + j] >> 4) - 8) * (int32_t)qb[j + 16];
        }
        float scale = f16_table[rd16(blk)] * xd[b];
        s[b & 31] = s[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(s);
}

float dot_f32_scalar(const float *w, const float *x, int n) {
    return kite_dot_ref(w, x, n);
}

float dot_f16_scalar(const uint16_t *w, const float *x, int n) {
    float s[32];
    lanes_zero(s);
    for (int i = 0; i < n; i++)
        s[i & 31] = s[i & 31] + f16_table[w[i]] * x[i];
    return kite_sum32_finish(s);
}

float dot_bf16_scalar(const uint16_t *w, const float *x, int n) {
    float s[32];
    lanes_zero(s);
    for (int i = 0; i < n; i++)
        s[i & 31] = s[i & 31] + kite_bf16_to_f32(w[i]) * x[i];
    return kite_sum32_finish(s);
}

float dot_scale_f32_scalar(float *s, float a, const float *x, int n) {
    for (int i = 0; i < n; i++)
        s[i] = s[i] * a;
    return kite_dot_ref(s, x, n);
}

float dot_axpy_f32_scalar(float *s, const float *x, float a, const float *y, int n) {
    for (int i = 0; i < n; i++)
        s[i] = s[i] + x[i] * a;
    return kite_dot_ref(s, y, n);
}

static void vec_silu_mul_scalar(float *y, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++)
        y[i] = kite_siluf(g[i]) * u[i];
}

static void vec_mul_silu_scalar(float *y, const float *a, const float *z, int n) {
    for (int i = 0; i < n; i++)
        y[i] = a[i] * kite_siluf(z[i]);
}

/* ---- AVX2 kernels: lanes 0-7, 8-15, 16-23, 24-31 in acc[0..3] ----------------------------- */

#if KITE_HAVE_AVX2_CODE

KT_AVX2 static void lanes_store(float *s, const __m256 *acc) {
    for (int j = 0; j < 4; j++)
        _mm256_storeu_ps(s + 8 * j, acc[j]);
}

/* The butterfly 16, 8, 4, 2, 1 on the 32 lanes held as acc0..acc3: the same additions, pair
 * for pair, as kite_sum32_finish. */
KT_AVX2 static inline float butterfly32(__m256 acc0, __m256 acc1, __m256 acc2, __m256 acc3) {
    __m256 a0 = _mm256_add_ps(acc0, acc2);                   /* off 16: lanes 0-7  */
    __m256 a1 = _mm256_add_ps(acc1, acc3);                   /*         lanes 8-15 */
    __m256 b = _mm256_add_ps(a0, a1);                        /* off 8 */
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1)); /* off 4 */
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));           /* off 2 */
    __m128 e = _mm_add_ss(d, _mm_shuffle_ps(d, d, 1));       /* off 1 */
    return _mm_cvtss_f32(e);
}

/* 8 int32 partial sums of one block of 32 int8 products. */
KT_AVX2 static inline __m256i block_dot_i8(__m256i w, __m256i x) {
    __m256i aw = _mm256_sign_epi8(w, w);
    __m256i sx = _mm256_sign_epi8(x, w);
    __m256i p16 = _mm256_maddubs_epi16(aw, sx);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* The f16 scales of 8 consecutive Q4_0 blocks (at blk + 18 i) as 8 words: the 32-byte load at
 * blk + 32 j holds the scale of block 2 j in the low word of dword j of its low half and that of
 * block 2 j + 1 in the high word of dword j of its high half; one dword blend per load, then the
 * two halves interleave by words. The loads stay inside the 8 blocks. */
KT_AVX2 static inline __attribute__((always_inline)) __m128i scales8_q4(const uint8_t *blk) {
    __m256i s01 = _mm256_loadu_si256((const __m256i *)blk);
    __m256i s23 = _mm256_loadu_si256((const __m256i *)(blk + 32));
    __m256i s45 = _mm256_loadu_si256((const __m256i *)(blk + 64));
    __m256i s67 = _mm256_loadu_si256((const __m256i *)(blk + 96));
    __m256i v = _mm256_blend_epi32(_mm256_blend_epi32(s01, s23, 0x22),
                                   _mm256_blend_epi32(s45, s67, 0x88), 0xCC);
    return _mm_blend_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1), 0xAA);
}

#ifndef KT_PREFETCH
#  define KT_PREFETCH 2048 /* bytes ahead */
#endif
#ifndef KT_PREFETCH_Q4
#  define KT_PREFETCH_Q4 4096 /* Q4_0: a little better than 2048 in the CPU decode benchmark */
#endif

/* Q8_0, 8 consecutive blocks b0..b0+7: [p_b0, ..., p_b0+7] with p_b = (float)isum_b * (wd_b * d_b). */
KT_AVX2 static inline __attribute__((always_inline)) __m256 group8(const uint8_t *p, const int8_t *xq,
                                                                 const float *xd, int b0) {
    const int bb = Q8_0_BYTES;
    const uint8_t *blk = p + (size_t)b0 * bb;
    const int8_t *x = xq + (size_t)b0 * QK;
    /* the weights stream through once: ask for the lines a little ahead of use */
    _mm_prefetch((const char *)blk + KT_PREFETCH, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH + 128, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH + 192, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH + 256, _MM_HINT_T0);
#define KT_BLOCK(i)                                                                            \
    block_dot_i8(_mm256_loadu_si256((const __m256i *)(blk + (i) * bb + 2)),                    \
                 _mm256_loadu_si256((const __m256i *)(x + (i) * QK)))
    __m256i t0 = _mm256_hadd_epi32(KT_BLOCK(0), KT_BLOCK(1));
    __m256i t1 = _mm256_hadd_epi32(KT_BLOCK(2), KT_BLOCK(3));
    __m256i t2 = _mm256_hadd_epi32(KT_BLOCK(4), KT_BLOCK(5));
    __m256i t3 = _mm256_hadd_epi32(KT_BLOCK(6), KT_BLOCK(7));
#undef KT_BLOCK
    __m256i u0 = _mm256_hadd_epi32(t0, t1);
    __m256i u1 = _mm256_hadd_epi32(t2, t3);
    __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                    _mm256_permute2x128_si256(u0, u1, 0x31));
    /* the 8 f16 scales (F16C conversion is exact, like the table) */
    __m128i wd = _mm_setr_epi16((short)rd16(blk), (short)rd16(blk + bb), (short)rd16(blk + 2 * bb),
                                (short)rd16(blk + 3 * bb), (short)rd16(blk + 4 * bb),
                                (short)rd16(blk + 5 * bb), (short)rd16(blk + 6 * bb),
                                (short)rd16(blk + 7 * bb));
    __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(wd), _mm256_loadu_ps(xd + b0));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale);
}

KT_AVX2 static float dot_q8_0_avx2(const void *w, const int8_t *xq, const float *xd, int nb) {
    const uint8_t *p = (const uint8_t *)w;
    const int bb = Q8_0_BYTES;
    /* lanes 0-7, 8-15, 16-23, 24-31: block b goes to lane b % 32 */
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int b = 0;
    for (; b + 32 <= nb; b += 32) {
        acc0 = _mm256_add_ps(acc0, group8(p, xq, xd, b));
        acc1 = _mm256_add_ps(acc1, group8(p, xq, xd, b + 8));
        acc2 = _mm256_add_ps(acc2, group8(p, xq, xd, b + 16));
        acc3 = _mm256_add_ps(acc3, group8(p, xq, xd, b + 24));
    }
    if (b + 8 <= nb) {
        acc0 = _mm256_add_ps(acc0, group8(p, xq, xd, b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc1 = _mm256_add_ps(acc1, group8(p, xq, xd, b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc2 = _mm256_add_ps(acc2, group8(p, xq, xd, b));
        b += 8;
    }
    if (b == nb)
        return butterfly32(acc0, acc1, acc2, acc3);
    float s[32];
    _mm256_storeu_ps(s, acc0);
    _mm256_storeu_ps(s + 8, acc1);
    _mm256_storeu_ps(s + 16, acc2);
    _mm256_storeu_ps(s + 24, acc3);
    for (; b < nb; b++) { /* the last nb % 8 blocks, as in the scalar kernel */
        const uint8_t *blk = p + (size_t)b * bb;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int j = 0; j < QK; j++)
            isum += (int8_t)blk[2 + j] * qb[j];
        float scale = f16_table[rd16(blk)] * xd[b];
        s[b & 31] = s[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(s);
}

/* Q4_0, 8 consecutive blocks b0..b0+7, same p_b as group8. The unsigned nibbles q (0..15) go
 * straight into maddubs against the signed activations and isum_b = sum q x - 8 xs[b] (exact).
 * Blocks j and j + 4 share a register (j in the low half, j + 4 in the high half): the low
 * nibbles (elements 0..15) and the high nibbles (16..31) each meet their activations, which
 * act_prep_q4 laid out in that order (xp), and the two products add up in 16 bits. Bounds:
 * |q x pair| <= 2 * 15 * 127 = 3810 (quantize_row_act clamps x to +-127), so the sums of 2, 4
 * and 8 pairs below (7620, 15240, 30480) are exact in 16 bits; the last pair sum is 32-bit. */
KT_AVX2 static inline __attribute__((always_inline)) __m256i q4_pair(const uint8_t *blk,
                                                                   const int8_t *xp, int j,
                                                                   __m256i m4) {
    __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk + j * Q4_0_BYTES + 2))),
        _mm_loadu_si128((const __m128i *)(blk + (j + 4) * Q4_0_BYTES + 2)), 1);
    __m256i lo = _mm256_and_si256(v, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    return _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(xp + 64 * j))),
        _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xp + 64 * j + 32))));
}

KT_AVX2 static inline __attribute__((always_inline)) __m256 group8_q4(const uint8_t *p,
                                                                    const int8_t *xp,
                                                                    const float *xd,
                                                                    const int32_t *xs, int b0) {
    const uint8_t *blk = p + (size_t)b0 * Q4_0_BYTES;
    const int8_t *x = xp + (size_t)b0 * QK;
    const __m256i m4 = _mm256_set1_epi8(15);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4 + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4 + 128, _MM_HINT_T0);
    __m256i t0 = _mm256_hadd_epi16(q4_pair(blk, x, 0, m4), q4_pair(blk, x, 1, m4));
    __m256i t1 = _mm256_hadd_epi16(q4_pair(blk, x, 2, m4), q4_pair(blk, x, 3, m4));
    /* low half: blocks 0-3, high half: 4-7 */
    __m256i isum = _mm256_madd_epi16(_mm256_hadd_epi16(t0, t1), _mm256_set1_epi16(1));
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xs + b0)), 3));
    __m128i wd = scales8_q4(blk);
    __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(wd), _mm256_loadu_ps(xd + b0));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale);
}

/* Blocks b .. nb-1 (fewer than 8) into the lanes s, as in the scalar kernel, then the butterfly. */
static float q4_tail(const uint8_t *p, const int8_t *xq, const float *xd, float *s, int b, int nb) {
    for (; b < nb; b++) {
        const uint8_t *blk = p + (size_t)b * Q4_0_BYTES;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((blk[2 + j] & 15) - 8) * qb[j] + ((blk[2 + j] >> 4) - 8) * qb[j + 16];
        float scale = f16_table[rd16(blk)] * xd[b];
        s[b & 31] = s[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(s);
}

/* The 32 lanes after the 8-block groups: blocks b .. nb-1 (fewer than 8) added as in the scalar
 * kernel, then the butterfly. */
KT_AVX2 static inline float q4_finish(const uint8_t *p, const int8_t *xq, const float *xd,
                                      __m256 acc0, __m256 acc1, __m256 acc2, __m256 acc3, int b,
                                      int nb) {
    if (b == nb)
        return butterfly32(acc0, acc1, acc2, acc3);
    float s[32];
    _mm256_storeu_ps(s, acc0);
    _mm256_storeu_ps(s + 8, acc1);
    _mm256_storeu_ps(s + 16, acc2);
    _mm256_storeu_ps(s + 24, acc3);
    return q4_tail(p, xq, xd, s, b, nb);
}

KT_AVX2 static float dot_q4_0_avx2(const void *w, const int8_t *xq, const float *xd,
                                   const int32_t *xs, const int8_t *xp, int nb) {
    const uint8_t *p = (const uint8_t *)w;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int b = 0;
    for (; b + 32 <= nb; b += 32) {
        acc0 = _mm256_add_ps(acc0, group8_q4(p, xp, xd, xs, b));
        acc1 = _mm256_add_ps(acc1, group8_q4(p, xp, xd, xs, b + 8));
        acc2 = _mm256_add_ps(acc2, group8_q4(p, xp, xd, xs, b + 16));
        acc3 = _mm256_add_ps(acc3, group8_q4(p, xp, xd, xs, b + 24));
    }
    if (b + 8 <= nb) {
        acc0 = _mm256_add_ps(acc0, group8_q4(p, xp, xd, xs, b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc1 = _mm256_add_ps(acc1, group8_q4(p, xp, xd, xs, b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc2 = _mm256_add_ps(acc2, group8_q4(p, xp, xd, xs, b));
        b += 8;
    }
    return q4_finish(p, xq, xd, acc0, acc1, acc2, acc3, b, nb);
}

#define FLOAT_DOT_AVX2(NAME, LOAD, SCALAR_ELEM)                                                \
    KT_AVX2 static float NAME(const void *wp, const float *x, int n) {                         \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),       \
                         _mm256_setzero_ps()};                                                 \
        int i = 0;                                                                             \
        for (; i + 32 <= n; i += 32)                                                           \
            for (int j = 0; j < 4; j++)                                                        \
                acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(LOAD(wp, i + 8 * j),              \
                                                             _mm256_loadu_ps(x + i + 8 * j))); \
        if (i == n)                                                                            \
            return butterfly32(acc[0], acc[1], acc[2], acc[3]);                                \
        float s[32];                                                                           \
        lanes_store(s, acc);                                                                   \
        for (; i < n; i++)                                                                     \
            s[i & 31] = s[i & 31] + SCALAR_ELEM(wp, i) * x[i];                                 \
        return kite_sum32_finish(s);                                                           \
    }

#define LOAD_F32(wp, i) _mm256_loadu_ps((const float *)(wp) + (i))
#define LOAD_F16(wp, i) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)(wp) + (i))))
#define LOAD_BF16(wp, i)                                                                       \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                     \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)(wp) + (i)))), 16))
#define ELEM_F32(wp, i) (((const float *)(wp))[i])
#define ELEM_F16(wp, i) (f16_table[((const uint16_t *)(wp))[i]])
#define ELEM_BF16(wp, i) (kite_bf16_to_f32(((const uint16_t *)(wp))[i]))

FLOAT_DOT_AVX2(dot_f32_avx2, LOAD_F32, ELEM_F32)
FLOAT_DOT_AVX2(dot_f16_avx2, LOAD_F16, ELEM_F16)
FLOAT_DOT_AVX2(dot_bf16_avx2, LOAD_BF16, ELEM_BF16)

/* s = s * a (or s + x * a), then dot(s, y): one pass, lanes as in dot_f32. */
KT_AVX2 static float dot_update_avx2(float *s, const float *x, float a, const float *y, int n,
                                     int axpy) {
    const __m256 av = _mm256_set1_ps(a);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++) {
            __m256 sv = _mm256_loadu_ps(s + i + 8 * j);
            sv = axpy ? _mm256_add_ps(sv, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), av))
                      : _mm256_mul_ps(sv, av);
            _mm256_storeu_ps(s + i + 8 * j, sv);
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(sv, _mm256_loadu_ps(y + i + 8 * j)));
        }
    if (i == n)
        return butterfly32(acc[0], acc[1], acc[2], acc[3]);
    float l[32];
    lanes_store(l, acc);
    for (; i < n; i++) {
        s[i] = axpy ? s[i] + x[i] * a : s[i] * a;
        l[i & 31] = l[i & 31] + s[i] * y[i];
    }
    return kite_sum32_finish(l);
}

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

/* quantize_row_act per block of 32: the max of |x| (exact in any order; max_ps(v, m) keeps m
 * when v is NaN, as the scalar compare does), rounding in the current mode like rintf, the clamp,
 * NaN to 0; then the 32 int32 packed to int8 in order. */
KT_AVX2 static void quantize_row_act_avx2(const float *x, int k, int8_t *q, float *d) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f);
    for (int b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xb + 8 * j);
            mx = _mm256_max_ps(_mm256_and_ps(v[j], absmask), mx);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float db = _mm_cvtss_f32(m4) / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        const __m256 idv = _mm256_set1_ps(id);
        __m256i iv[4];
        for (int j = 0; j < 4; j++) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(v[j], idv), _MM_FROUND_CUR_DIRECTION);
            __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
            r = _mm256_min_ps(_mm256_max_ps(r, nlim), lim);
            iv[j] = _mm256_cvtps_epi32(_mm256_andnot_ps(nan, r));
        }
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * QK), p);
        d[b] = db;
    }
}

#endif /* KITE_HAVE_AVX2_CODE */

/* ---- AVX-512 VNNI kernels (the block dots only; the float steps are the AVX2 ones) ---------- */

#if KITE_HAVE_AVX512_CODE

/* Word indexes into two zmm (64 words) holding bytes [0, 128) or [64, 144) of a group of 8
 * Q4_0 blocks (block j at byte 18 j: its f16 scale, then 16 bytes = 8 words of nibbles). */
static uint16_t q4_idx_lo[32], q4_idx_hi[32], q4_idx_scale[32];

static void q4_idx_init(void) {
    for (int w = 0; w < 32; w++) {
        q4_idx_lo[w] = (uint16_t)(9 * (w / 8) + 1 + w % 8);  /* blocks 0-3 from bytes [0, 128) */
        int hw = 37 + 9 * (w / 8) + w % 8;                 /* blocks 4-7: group word index */
        q4_idx_hi[w] = (uint16_t)(hw < 64 ? hw - 32 : hw - 8); /* bytes [64, 128) then [80, 144) */
        q4_idx_scale[w] = (uint16_t)(w < 8 ? 9 * w : 0);   /* the 8 scales */
    }
}

/* Q4_0, 8 blocks: the same p_b as group8_q4. Three loads inside the group's 144 bytes; word
 * permutes put the nibbles of blocks 0-3 and 4-7 into one zmm each (block j in 128-bit lane
 * j % 4), and the scales into 8 words. vpdpbusd adds the unsigned nibble times signed
 * activation products 4 at a time into int32 (exact); act_prep_q4 laid out the activations as
 * [low halves of blocks 0-3 | their high halves | the same for blocks 4-7]. Then the 4 dwords
 * of each block are summed and the 8 sums put in block order. */
KT_AVX512 static inline __attribute__((always_inline)) __m256 group8_q4_512(
    const uint8_t *p, const int8_t *xp, const float *xd, const int32_t *xs, int b0, __m512i ilo,
    __m512i ihi, __m512i isc) {
    const uint8_t *blk = p + (size_t)b0 * Q4_0_BYTES;
    const int8_t *x = xp + (size_t)b0 * QK;
    const __m512i m4 = _mm512_set1_epi8(15);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4 + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + KT_PREFETCH_Q4 + 128, _MM_HINT_T0);
    __m512i z0 = _mm512_loadu_si512(blk), z1 = _mm512_loadu_si512(blk + 64);
    __m512i z2 = _mm512_loadu_si512(blk + 80);
    __m512i v0 = _mm512_permutex2var_epi16(z0, ilo, z1);
    __m512i v1 = _mm512_permutex2var_epi16(z1, ihi, z2);
    __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v0, m4),
                                    _mm512_loadu_si512(x));
    a = _mm512_dpbusd_epi32(a, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4), _mm512_loadu_si512(x + 64));
    __m512i b = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v1, m4),
                                    _mm512_loadu_si512(x + 128));
    b = _mm512_dpbusd_epi32(b, _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4), _mm512_loadu_si512(x + 192));
    /* lane l: [a0 + a2, b0 + b2, a1 + a3, b1 + b3], then [A, B, A, B]: block l and block l + 4 */
    __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
    __m256i isum = _mm512_castsi512_si256(_mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), t));
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xs + b0)), 3));
    __m128i wd = _mm512_castsi512_si128(_mm512_permutex2var_epi16(z0, isc, z1));
    __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(wd), _mm256_loadu_ps(xd + b0));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale);
}

KT_AVX512 static float dot_q4_0_avx512(const void *w, const int8_t *xq, const float *xd,
                                       const int32_t *xs, const int8_t *xp, int nb) {
    const uint8_t *p = (const uint8_t *)w;
    const __m512i ilo = _mm512_loadu_si512(q4_idx_lo), ihi = _mm512_loadu_si512(q4_idx_hi);
    const __m512i isc = _mm512_loadu_si512(q4_idx_scale);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int b = 0;
#define KT_G(B) group8_q4_512(p, xp, xd, xs, (B), ilo, ihi, isc)
    for (; b + 32 <= nb; b += 32) {
        acc0 = _mm256_add_ps(acc0, KT_G(b));
        acc1 = _mm256_add_ps(acc1, KT_G(b + 8));
        acc2 = _mm256_add_ps(acc2, KT_G(b + 16));
        acc3 = _mm256_add_ps(acc3, KT_G(b + 24));
    }
    if (b + 8 <= nb) {
        acc0 = _mm256_add_ps(acc0, KT_G(b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc1 = _mm256_add_ps(acc1, KT_G(b));
        b += 8;
    }
    if (b + 8 <= nb) {
        acc2 = _mm256_add_ps(acc2, KT_G(b));
        b += 8;
    }
#undef KT_G
    return q4_finish(p, xq, xd, acc0, acc1, acc2, acc3, b, nb);
}

/* Two rows, p and p + rb, interleaved group by group: twice the independent work in flight,
 * the same operations per row as dot_q4_0_avx512. */
KT_AVX512 static void dot2_q4_0_avx512(const uint8_t *p, size_t rb, const int8_t *xq,
                                       const float *xd, const int32_t *xs, const int8_t *xp,
                                       int nb, float *out) {
    const uint8_t *q = p + rb;
    const __m512i ilo = _mm512_loadu_si512(q4_idx_lo), ihi = _mm512_loadu_si512(q4_idx_hi);
    const __m512i isc = _mm512_loadu_si512(q4_idx_scale);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps();
    __m256 a3 = _mm256_setzero_ps(), c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
    __m256 c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
    int b = 0;
#define KT_G2(A, C, B)                                                                         \
    do {                                                                                       \
        A = _mm256_add_ps(A, group8_q4_512(p, xp, xd, xs, (B), ilo, ihi, isc));                \
        C = _mm256_add_ps(C, group8_q4_512(q, xp, xd, xs, (B), ilo, ihi, isc));                \
    } while (0)
    for (; b + 32 <= nb; b += 32) {
        KT_G2(a0, c0, b);
        KT_G2(a1, c1, b + 8);
        KT_G2(a2, c2, b + 16);
        KT_G2(a3, c3, b + 24);
    }
    if (b + 8 <= nb) {
        KT_G2(a0, c0, b);
        b += 8;
    }
    if (b + 8 <= nb) {
        KT_G2(a1, c1, b);
        b += 8;
    }
    if (b + 8 <= nb) {
        KT_G2(a2, c2, b);
        b += 8;
    }
#undef KT_G2
    out[0] = q4_finish(p, xq, xd, a0, a1, a2, a3, b, nb);
    out[1] = q4_finish(q, xq, xd, c0, c1, c2, c3, b, nb);
}

#endif /* KITE_HAVE_AVX512_CODE */

/* ---- dispatch ----------------------------------------------------------------------------- */

void quant_init(void) {
    for (uint32_t h = 0; h < 65536; h++)
        f16_table[h] = kite_f16_to_f32((uint16_t)h);
#if KITE_HAVE_AVX2_CODE
    __builtin_cpu_init();
    {
        /* f16c through cpuid: clang 14 rejects __builtin_cpu_supports("f16c") */
        unsigned a = 0, b = 0, c = 0, d = 0;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        if (__builtin_cpu_supports("avx2") && f16c)
            cpu_level = QUANT_SIMD_AVX2;
    }
#endif
#if KITE_HAVE_AVX512_CODE
    /* these report 0 unless the OS saves the zmm state too */
    if (cpu_level == QUANT_SIMD_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni")) {
        q4_idx_init();
        cpu_level = QUANT_SIMD_AVX512;
    }
#endif
    simd_on = cpu_level;
}

int quant_have_avx2(void) { return cpu_level >= QUANT_SIMD_AVX2; }
int quant_simd_max(void) { return cpu_level; }
void quant_use_simd(int level) { simd_on = level < 0 ? 0 : level < cpu_level ? level : cpu_level; }
int quant_simd_active(void) { return simd_on; }
const char *quant_simd_name(void) {
    return simd_on >= QUANT_SIMD_AVX512 ? "avx512vnni" : simd_on ? "avx2" : "scalar";
}

float dot_q8_0(const void *w, const int8_t *xq, const float *xd, int nb) {
#if KITE_HAVE_AVX2_CODE
    if (simd_on)
        return dot_q8_0_avx2(w, xq, xd, nb);
#endif
    return dot_q8_0_scalar(w, xq, xd, nb);
}

float dot_q4_0(const void *w, const int8_t *xq, const float *xd, const int32_t *xs,
               const int8_t *xp, int nb) {
#if KITE_HAVE_AVX512_CODE
    if (simd_on >= QUANT_SIMD_AVX512)
        return dot_q4_0_avx512(w, xq, xd, xs, xp, nb);
#endif
#if KITE_HAVE_AVX2_CODE
    if (simd_on)
        return dot_q4_0_avx2(w, xq, xd, xs, xp, nb);
#endif
    (void)xs;
    (void)xp;
    return dot_q4_0_scalar(w, xq, xd, nb);
}

#ifndef KT_STREAMS
#  define KT_STREAMS 2
#endif
/* Rows i, h + i, 2 h + i, ... go together (h = n / KT_STREAMS): several streams through memory
 * keep more lines in flight than one (the hardware prefetch alone does not), and each row is
 * computed as alone. */
void dot_q4_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   const int32_t *xs, const int8_t *xp, int nb, float *y) {
    const uint8_t *p = (const uint8_t *)w;
    const int h = n / KT_STREAMS;
    const size_t gap = (size_t)h * row_bytes;
    for (int i = 0; i < h; i++)
        for (int k = 0; k < KT_STREAMS; k += 2) {
            const uint8_t *a = p + (size_t)(k * h + i) * row_bytes;
#if KITE_HAVE_AVX512_CODE
            if (simd_on >= QUANT_SIMD_AVX512) {
                float o[2];
                dot2_q4_0_avx512(a, gap, xq, xd, xs, xp, nb, o);
                y[k * h + i] = o[0];
                y[(k + 1) * h + i] = o[1];
                continue;
            }
#endif
            y[k * h + i] = dot_q4_0(a, xq, xd, xs, xp, nb);
            y[(k + 1) * h + i] = dot_q4_0(a + gap, xq, xd, xs, xp, nb);
        }
    for (int r = KT_STREAMS * h; r < n; r++)
        y[r] = dot_q4_0(p + (size_t)r * row_bytes, xq, xd, xs, xp, nb);
}

void dot_q8_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   int nb, float *y) {
    const uint8_t *p = (const uint8_t *)w;
    const int h = n / KT_STREAMS;
    for (int i = 0; i < h; i++)
        for (int k = 0; k < KT_STREAMS; k++)
            y[k * h + i] = dot_q8_0(p + (size_t)(k * h + i) * row_bytes, xq, xd, nb);
    for (int r = KT_STREAMS * h; r < n; r++)
        y[r] = dot_q8_0(p + (size_t)r * row_bytes, xq, xd, nb);
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

/* The AVX2 kernel when it is compiled in and enabled, else the portable one: the same bytes. */
#if KITE_HAVE_AVX2_CODE
#define AVX2_OR(avx2_call, portable_call) (simd_on ? (avx2_call) : (portable_call))
#else
#define AVX2_OR(avx2_call, portable_call) (portable_call)
#endif

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

float dot_f32(const float *w, const float *x, int n) {
    return AVX2_OR(dot_f32_avx2(w, x, n), dot_f32_scalar(w, x, n));
}

float dot_f16(const uint16_t *w, const float *x, int n) {
    return AVX2_OR(dot_f16_avx2(w, x, n), dot_f16_scalar(w, x, n));
}

float dot_bf16(const uint16_t *w, const float *x, int n) {
    return AVX2_OR(dot_bf16_avx2(w, x, n), dot_bf16_scalar(w, x, n));
}

float dot_scale_f32(float *s, float a, const float *x, int n) {
    return AVX2_OR(dot_update_avx2(s, NULL, a, x, n, 0), dot_scale_f32_scalar(s, a, x, n));
}

float dot_axpy_f32(float *s, const float *x, float a, const float *y, int n) {
    return AVX2_OR(dot_update_avx2(s, x, a, y, n, 1), dot_axpy_f32_scalar(s, x, a, y, n));
}

void vec_add_scaled(float *y, const float *x, float a, int n) {
    AVX2_OR(vec_add_scaled_avx2(y, x, a, n), vec_add_scaled_scalar(y, x, a, n));
}

void quantize_row_act(const float *x, int k, int8_t *q, float *d) {
    AVX2_OR(quantize_row_act_avx2(x, k, q, d), quantize_row_act_scalar(x, k, q, d));
}

void vec_silu_mul(float *y, const float *g, const float *u, int n) {
    AVX2_OR(vec_silu_avx2(y, g, u, n, 1), vec_silu_mul_scalar(y, g, u, n));
}

void vec_mul_silu(float *y, const float *a, const float *z, int n) {
    AVX2_OR(vec_silu_avx2(y, a, z, n, 2), vec_mul_silu_scalar(y, a, z, n));
}

void vec_silu(float *y, const float *x, int n) {
    AVX2_OR(vec_silu_avx2(y, x, NULL, n, 0), vec_silu_scalar(y, x, n));
}

void vec_mul_add(float *y, const float *a, const float *b, int n) {
    AVX2_OR(vec_mul_add_avx2(y, a, b, n), vec_mul_add_scalar(y, a, b, n));
}

/* Greedy pick: the first index of the maximum, NaNs never win, and a NaN at index 0 gives 0
 * (the result of the plain loop `if (v[i] > v[best]) best = i`). Done in two passes without a
 * loop-carried load: the maximum over independent lanes (x > m ? x : m is exact in any order,
 * NaN skipped; maxps(x, m) is that very operation), then the first index that compares equal
 * to it. Every level gives the same index. */
int vec_argmax(const float *v, int n) {
    return AVX2_OR(vec_argmax_avx2(v, n), vec_argmax_portable(v, n));
}
