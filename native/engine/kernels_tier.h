/* kernels_tier.h - what the tier files share with the dispatch (kernels.c); not for callers.
 *
 * KITE_HAVE_AVX2_CODE / KITE_HAVE_AVX512_CODE: the compiler can build that tier here (x86-64,
 * GCC or clang); whether the CPU runs it is decided at run time. A tier's functions carry its
 * target attribute, so the rest of the engine needs no -mavx2.
 */
#ifndef KITE_KERNELS_TIER_H
#define KITE_KERNELS_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#  define KITE_HAVE_AVX2_CODE 1
#  define KITE_HAVE_AVX512_CODE 1
#  define KT_AVX2 __attribute__((target("avx2,f16c")))
#  define KT_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#  define KITE_HAVE_AVX2_CODE 0
#  define KITE_HAVE_AVX512_CODE 0
#endif

extern float kt_f16_table[65536];  /* f16 bits -> float, filled by kernels_init */

static inline uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* Scalar tails the SIMD tiers finish with: blocks b .. nb-1 added into the 32 lanes as the
 * scalar kernel adds them, then the butterfly. */
float dot_q8_0_lanes_scalar(const uint8_t *w, const int8_t *xq, const float *xd, float *lanes,
                            int b, int nb);
float dot_q4_0_lanes_scalar(const uint8_t *w, const int8_t *xq, const float *xd, float *lanes,
                            int b, int nb);

#if KITE_HAVE_AVX2_CODE
float dot_q8_0_avx2(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_q4_0_avx2(const void *w, const int8_t *xq, const float *xd, const int32_t *xs,
                    const int8_t *xp, int nb);
float dot_f32_avx2(const void *w, const float *x, int n);
float dot_f16_avx2(const void *w, const float *x, int n);
float dot_bf16_avx2(const void *w, const float *x, int n);
/* s = s * a (axpy 0) or s + x * a (axpy 1), then dot(s, y) */
float dot_update_avx2(float *s, const float *x, float a, const float *y, int n, int axpy);
void quantize_row_act_avx2(const float *x, int k, int8_t *q, float *d);
#endif

#if KITE_HAVE_AVX512_CODE
void kernels_avx512_init(void);   /* the permute tables; before the first AVX-512 call */
float dot_q4_0_avx512(const void *w, const int8_t *xq, const float *xd, const int32_t *xs,
                      const int8_t *xp, int nb);
/* rows p and p + rb, side by side: out[0], out[1] */
void dot2_q4_0_avx512(const uint8_t *p, size_t rb, const int8_t *xq, const float *xd,
                      const int32_t *xs, const int8_t *xp, int nb, float *out);
#endif

#endif /* KITE_KERNELS_TIER_H */
