/* gemm.h - gemm_gw: y[m][r] = W[r, :] . x[m, :] for a weight tensor W of n_out rows of k values.
 *
 * Q8_0/Q4_0: the activations are quantized per 32-block once, the per-op offload
 * (kc_gemm_gw) is tried first, else the CPU threads split the output rows r. Float weights
 * (F32, F16, BF16) go straight to the CPU. Canonical order: docs/NUMERICS.md.
 */
#ifndef KITE_GEMM_H
#define KITE_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "threads.h"

/* A weight matrix inside the mapped model file. */
typedef struct kt_weight {
    int type;           /* ggml type (GGUF_T_*) */
    int k;              /* values per row (ggml ne0) */
    int n_out;          /* rows (ggml ne1) */
    size_t row_bytes;
    const void *data;
    size_t nbytes;
} kt_weight;

/* Scratch for the quantized activations, grown on demand. */
typedef struct kt_gemm_ctx {
    kt_pool *pool;
    int8_t *xq;
    float *xd;
    size_t cap;         /* values xq can hold */
    int32_t *xs;        /* Q4_0: per-block sums of xq, cap / 32 of them */
    int8_t *xp;         /* Q4_0: xq rearranged for the kernel, cap values (act_prep_q4) */
} kt_gemm_ctx;

/* 0 on success, -1 when out of memory. x is [m][w->k], y is [m][w->n_out]. */
int gemm_gw(kt_gemm_ctx *ctx, const kt_weight *w, const float *x, int m, float *y);
/* n (1..4) weights that read the same x (the same k): the activations are quantized once and
 * all their rows go out in one pool dispatch; y[q] is [m][w[q]->n_out]. */
int gemm_gw_n(kt_gemm_ctx *ctx, int n, const kt_weight *const *w, float *const *y, const float *x,
              int m);
/* The SwiGLU input of ffn_down: y[i][r] = silu(gate_r . x_i) * (up_r . x_i), the two products
 * and the element-wise step exactly as separate calls would do them; tmp [m][n_out] is scratch
 * (it ends up holding the up values). gate and up have the same shape. */
int gemm_gw_glu(kt_gemm_ctx *ctx, const kt_weight *gate, const kt_weight *up, const float *x,
                int m, float *y, float *tmp);
void gemm_ctx_free(kt_gemm_ctx *ctx);

/* The slow reference: dequantized-free single-thread scalar kernels (selftest). */
void gemm_gw_ref(const kt_weight *w, const float *x, int m, float *y);

#endif
