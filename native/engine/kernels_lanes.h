/* kernels_lanes.h - the 32 lanes of a dot product held in four ymm registers (lanes 0-7, 8-15,
 * 16-23, 24-31), shared by the AVX2 and AVX-512 tiers; include only from those files, after
 * kernels_tier.h and <immintrin.h>. */
#ifndef KITE_KERNELS_LANES_H
#define KITE_KERNELS_LANES_H

#ifndef KT_PREFETCH
#  define KT_PREFETCH 2048 /* bytes ahead */
#endif
#ifndef KT_PREFETCH_Q4
#  define KT_PREFETCH_Q4 4096 /* Q4_0: a little better than 2048 in the CPU decode benchmark */
#endif

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

/* The 32 lanes after the 8-block groups: blocks b .. nb-1 (fewer than 8) added as in the scalar
 * kernel, then the butterfly. */
KT_AVX2 static inline float lanes_finish(const uint8_t *p, const int8_t *xq, const float *xd,
                                         __m256 acc0, __m256 acc1, __m256 acc2, __m256 acc3, int b,
                                         int nb, int q4) {
    if (b == nb)
        return butterfly32(acc0, acc1, acc2, acc3);
    float s[32];
    _mm256_storeu_ps(s, acc0);
    _mm256_storeu_ps(s + 8, acc1);
    _mm256_storeu_ps(s + 16, acc2);
    _mm256_storeu_ps(s + 24, acc3);
    return q4 ? dot_q4_0_lanes_scalar(p, xq, xd, s, b, nb) : dot_q8_0_lanes_scalar(p, xq, xd, s, b, nb);
}

#endif /* KITE_KERNELS_LANES_H */
