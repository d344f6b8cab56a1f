/* quant.h - block formats, activation quantization and the dot products of gemm_gw.
 *
 * Every dot product follows docs/NUMERICS.md: 32 lane partial sums (element i, or block b,
 * goes to lane i % 32), then the butterfly 16, 8, 4, 2, 1. The AVX2 kernels keep the 32 lanes
 * in 4 ymm accumulators and give the same bytes as the scalar ones; they are picked at run
 * time when the CPU has AVX2 and F16C, and the AVX-512 VNNI Q4_0 block dots (the same exact
 * int32 per block, the same float steps) when it also has AVX-512 F/BW/VL/VNNI.
 */
#ifndef KITE_QUANT_H
#define KITE_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define QK 32                 /* values per Q8_0 / Q4_0 block */
#define Q8_0_BYTES 34         /* f16 scale, 32 x int8 */
#define Q4_0_BYTES 18         /* f16 scale, 16 bytes of nibbles */

/* Kernel levels: each one gives the same bytes as the scalar kernels. */
#define QUANT_SIMD_SCALAR 0
#define QUANT_SIMD_AVX2 1     /* AVX2 + F16C */
#define QUANT_SIMD_AVX512 2   /* and AVX-512 F/BW/VL/VNNI for the Q4_0 block dots */

void quant_init(void);        /* picks the kernels; call once before any thread starts */
int quant_have_avx2(void);    /* the CPU can run the AVX2 kernels (and they are compiled in) */
int quant_simd_max(void);     /* the best level this CPU runs (and that is compiled in) */
/* Use at most this level (selftest compares them); QUANT_SIMD_BEST restores the choice. */
void quant_use_simd(int level);
#define QUANT_SIMD_BEST 99
int quant_simd_active(void);
const char *quant_simd_name(void); /* "avx512vnni", "avx2" or "scalar" */

float quant_f16(uint16_t h);  /* table lookup, same bits as kite_f16_to_f32 */

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

/* y[i] = y[i] + x[i] * a, element-wise (a product rounded, then a sum: the same bits either way). */
void vec_add_scaled(float *y, const float *x, float a, int n);
/* y[i] = y[i] + a[i] * b[i], element-wise (likewise). */
void vec_mul_add(float *y, const float *a, const float *b, int n);
int vec_argmax(const float *v, int n); /* first index of the maximum; NaN never wins */

/* Element-wise SiLU (kite_siluf), y may alias the inputs:
 *   vec_silu:      y[i] = silu(x[i])
 *   vec_silu_mul:  y[i] = silu(g[i]) * u[i]     (the SwiGLU product)
 *   vec_mul_silu:  y[i] = a[i] * silu(z[i])     (the DeltaNet output gate) */
void vec_silu(float *y, const float *x, int n);
void vec_silu_mul(float *y, const float *g, const float *u, int n);
void vec_mul_silu(float *y, const float *a, const float *z, int n);

/* The scalar references, always available (selftest compares them with the dispatched ones). */
float dot_q8_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_q4_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb);
float dot_f32_scalar(const float *w, const float *x, int n);
float dot_f16_scalar(const uint16_t *w, const float *x, int n);
float dot_bf16_scalar(const uint16_t *w, const float *x, int n);

#endif
