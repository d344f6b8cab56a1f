/* vec_math.h - element-wise steps of the forward pass and the greedy pick, in scalar C and AVX2
 * (picked by the kernels' tier, kernels.h); both give the same bytes. */
#ifndef KITE_VEC_MATH_H
#define KITE_VEC_MATH_H

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

#endif /* KITE_VEC_MATH_H */
