/* kernels.h - the CPU kernels: block formats, activation quantization and the dot products of
 * gemm_gw and the recurrence, by SIMD tier.
 *
 * Every dot product follows docs/NUMERICS.md: 32 lane partial sums (element i, or block b,
 * goes to lane i % 32), then the butterfly 16, 8, 4, 2, 1. Tiers, each in its own file and each
 * giving the bytes of the scalar one:
 *   kernels_scalar.c  the reference, always compiled;
 *   kernels_avx2.c    the 32 lanes in 4 ymm accumulators; the CPU has AVX2 and F16C;
 *   kernels_avx512.c  the Q4_0 block dots with AVX-512 VNNI (the same exact int32 per block,
 *                     the same float steps); the CPU also has AVX-512 F/BW/VL/VNNI.
 * kernels.c picks the tier at run time. Element-wise steps and argmax: vec_math.h.
 */
#ifndef KITE_KERNELS_H
#define KITE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define QK 32                 /* values per Q8_0 / Q4_0 block */
#define Q8_0_BYTES 34         /* f16 scale, 32 x int8 */
#define Q4_0_BYTES 18         /* f16 scale, 16 bytes of nibbles */

/* Kernel tiers: each one gives the same bytes as the scalar kernels. */
#define KT_SIMD_SCALAR 0
#define KT_SIMD_AVX2 1        /* AVX2 + F16C */
#define KT_SIMD_AVX512 2      /* and AVX-512 F/BW/VL/VNNI for the Q4_0 block dots */
#define KT_SIMD_BEST 99

void kernels_init(void);      /* picks the tier; call once before any thread starts */
int kernels_simd_max(void);   /* the best tier this CPU runs (and that is compiled in) */
/* Use at most this tier (selftest compares them); KT_SIMD_BEST restores the choice. */
void kernels_use_simd(int level);
int kernels_simd_active(void);
const char *kernels_simd_name(void); /* "avx512vnni", "avx2" or "scalar" */

float kernels_f16(uint16_t h); /* table lookup, same bits as kite_f16_to_f32 */

/* x[k] -> q[k] int8 and d[k/32] per NUMERICS.md; k a multiple of 32. */
void quantize_row_act(const float *x, int k, int8_t *q, float *d);
void quantize_row_act_scalar(const float *x, int k, int8_t *q, float *d);
/* The Q4_0 extras of one quantized activation row q (nb blocks), computed once per row and shared
 * by every weight row: s[b] = the sum of the 32 int8 of block b (exact identity:
 * sum (w - 8) x = sum w x - 8 sum x), and p (32 nb bytes) = q with each group of 8 blocks
 * rearranged as the kernel of the level in use reads it (the last nb % 8 blocks are not
 * written): prepare and use under the same level. */
void act_prep_q4(const int8_t *q, int nb, int32_t *s, int8_t *p);

/* Row of a weight tensor of the given ggml type, dequantized exactly to float. */
void dequant_row(int type, const void *row, int n, float *out);

/* Dot of one weight row (nb blocks) with one quantized activation row; xs, xp: act_prep_q4 of xq. */
float dot_q8_0(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_q4_0(const void *w, const int8_t *xq, const float *xd, const int32_t *xs,
               const int8_t *xp, int nb);
/* n consecutive rows (row r at w + r * row_bytes) against one activation row: y[r], the same
 * bytes as n single-row calls (the first and the second half are read side by side). */
void dot_q8_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   int nb, float *y);
void dot_q4_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   const int32_t *xs, const int8_t *xp, int nb, float *y);
/* Dot of one float-family weight row (n values) with a float activation row. */
float dot_f32(const float *w, const float *x, int n);
float dot_f16(const uint16_t *w, const float *x, int n);
float dot_bf16(const uint16_t *w, const float *x, int n);

/* The two passes of the delta rule over one state row s[n] (elementwise updates, then a dot in
 * the canonical order):
 *   dot_scale_f32:  s[i] = s[i] * a;          returns dot(s, x, n)
 *   dot_axpy_f32:   s[i] = s[i] + x[i] * a;   returns dot(s, y, n) */
float dot_scale_f32(float *s, float a, const float *x, int n);
float dot_axpy_f32(float *s, const float *x, float a, const float *y, int n);
float dot_scale_f32_scalar(float *s, float a, const float *x, int n);
float dot_axpy_f32_scalar(float *s, const float *x, float a, const float *y, int n);

/* The scalar references, always available (selftest compares them with the dispatched ones). */
float dot_q8_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_q4_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_f32_scalar(const float *w, const float *x, int n);
float dot_f16_scalar(const uint16_t *w, const float *x, int n);
float dot_bf16_scalar(const uint16_t *w, const float *x, int n);

#endif /* KITE_KERNELS_H */
