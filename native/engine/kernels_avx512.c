/* kernels_avx512.c - the AVX-512 VNNI tier: the Q4_0 block dots (vpdpbusd gives the same exact
 * int32 per block; the float steps are the AVX2 tier's). Everything else runs at the AVX2 tier. */
#include "kernels_tier.h"

#if KITE_HAVE_AVX512_CODE

#include <immintrin.h>

#include "kernels_lanes.h"

/* Word indexes into two zmm (64 words) holding bytes [0, 128) or [64, 144) of a group of 8
 * Q4_0 blocks (block j at byte 18 j: its f16 scale, then 16 bytes = 8 words of nibbles). */
static uint16_t q4_idx_lo[32], q4_idx_hi[32], q4_idx_scale[32];

void kernels_avx512_init(void) {
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

KT_AVX512 float dot_q4_0_avx512(const void *w, const int8_t *xq, const float *xd,
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
    return lanes_finish(p, xq, xd, acc0, acc1, acc2, acc3, b, nb, 1);
}

/* Two rows, p and p + rb, interleaved group by group: twice the independent work in flight,
 * the same operations per row as dot_q4_0_avx512. */
KT_AVX512 void dot2_q4_0_avx512(const uint8_t *p, size_t rb, const int8_t *xq,
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
    out[0] = lanes_finish(p, xq, xd, a0, a1, a2, a3, b, nb, 1);
    out[1] = lanes_finish(q, xq, xd, c0, c1, c2, c3, b, nb, 1);
}

#endif /* KITE_HAVE_AVX512_CODE */
