/* kernels_avx2.c - the AVX2 tier (AVX2 + F16C): the 32 lanes of every dot product in 4 ymm
 * accumulators, lanes 0-7, 8-15, 16-23, 24-31, each lane taking the additions the scalar kernel
 * gives it in the same order, so the bytes are the scalar ones. */
#include "kernels_tier.h"

#if KITE_HAVE_AVX2_CODE

#include <immintrin.h>

#include "kernels_lanes.h"
#include "kite_math.h"

KT_AVX2 static void lanes_store(float *s, const __m256 *acc) {
    for (int j = 0; j < 4; j++)
        _mm256_storeu_ps(s + 8 * j, acc[j]);
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

KT_AVX2 float dot_q8_0_avx2(const void *w, const int8_t *xq, const float *xd, int nb) {
    const uint8_t *p = (const uint8_t *)w;
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
    return lanes_finish(p, xq, xd, acc0, acc1, acc2, acc3, b, nb, 0);
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

KT_AVX2 float dot_q4_0_avx2(const void *w, const int8_t *xq, const float *xd,
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
    return lanes_finish(p, xq, xd, acc0, acc1, acc2, acc3, b, nb, 1);
}

#define FLOAT_DOT_AVX2(NAME, LOAD, SCALAR_ELEM)                                                \
    KT_AVX2 float NAME(const void *wp, const float *x, int n) {                                \
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
#define ELEM_F16(wp, i) (kt_f16_table[((const uint16_t *)(wp))[i]])
#define ELEM_BF16(wp, i) (kite_bf16_to_f32(((const uint16_t *)(wp))[i]))

FLOAT_DOT_AVX2(dot_f32_avx2, LOAD_F32, ELEM_F32)
FLOAT_DOT_AVX2(dot_f16_avx2, LOAD_F16, ELEM_F16)
FLOAT_DOT_AVX2(dot_bf16_avx2, LOAD_BF16, ELEM_BF16)

/* s = s * a (or s + x * a), then dot(s, y): one pass, lanes as in dot_f32. */
KT_AVX2 float dot_update_avx2(float *s, const float *x, float a, const float *y, int n,
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

/* quantize_row_act per block of 32: the max of |x| (exact in any order; max_ps(v, m) keeps m
 * when v is NaN, as the scalar compare does), rounding in the current mode like rintf, the clamp,
 * NaN to 0; then the 32 int32 packed to int8 in order. */
KT_AVX2 void quantize_row_act_avx2(const float *x, int k, int8_t *q, float *d) {
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
        const float amax = _mm_cvtss_f32(m4);
        float db = kite_q8_act_scale(amax);
        float id = kite_q8_act_inverse(amax);
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
