/* gemm.c - see gemm.h. */
#include "gemm.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "cuda_host.h"
#include "gguf.h"
#include "quant.h"

/* Below this many multiply-adds a gemm runs on the calling thread alone. */
#define GEMM_THREAD_MIN 32768

typedef struct gemm_job {
    const kt_weight *w;
    const float *x;
    const int8_t *xq;
    const float *xd;
    const int32_t *xs;
    const int8_t *xp;
    int m;
    float *y;
    atomic_int next;    /* next unclaimed output row */
    int chunk;          /* rows claimed at a time */
} gemm_job;

/* Output rows [r0, r1) for all m activation rows; the weight row is read once and reused. */
static void gemm_rows(const gemm_job *j, int r0, int r1) {
    const kt_weight *w = j->w;
    const int k = w->k, n = w->n_out, nb = k / QK;
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        for (int i = 0; i < j->m; i++) {
            float v;
            switch (w->type) {
            case GGUF_T_Q8_0: v = dot_q8_0(row, j->xq + (size_t)i * k, j->xd + (size_t)i * nb, nb); break;
            case GGUF_T_Q4_0: v = dot_q4_0(row, j->xq + (size_t)i * k, j->xd + (size_t)i * nb,
                                                j->xs + (size_t)i * nb, j->xp + (size_t)i * k, nb); break;
            case GGUF_T_F16: v = dot_f16((const uint16_t *)row, j->x + (size_t)i * k, k); break;
            case GGUF_T_BF16: v = dot_bf16((const uint16_t *)row, j->x + (size_t)i * k, k); break;
            default: v = dot_f32((const float *)row, j->x + (size_t)i * k, k); break;
            }
            j->y[(size_t)i * n + r] = v;
        }
    }
}

/* Threads claim chunks of consecutive output rows until none is left: a thread that the OS
 * delays does not hold the others up. Which thread computes a row never changes its bytes. */
static void gemm_task(void *ctx, int tid, int nthreads) {
    gemm_job *j = (gemm_job *)ctx;
    const int n = j->w->n_out;
    (void)tid;
    (void)nthreads;
    for (;;) {
        int r0 = atomic_fetch_add(&j->next, j->chunk);
        if (r0 >= n)
            break;
        gemm_rows(j, r0, r0 + j->chunk < n ? r0 + j->chunk : n);
    }
}

int gemm_gw(kt_gemm_ctx *ctx, const kt_weight *w, const float *x, int m, float *y) {
    gemm_job j;
    j.w = w;
    j.x = x;
    j.xq = NULL;
    j.xd = NULL;
    j.xs = NULL;
    j.xp = NULL;
    j.m = m;
    j.y = y;
    atomic_init(&j.next, 0);
    j.chunk = 0;
    const int k = w->k;
    if (w->type == GGUF_T_Q8_0 || w->type == GGUF_T_Q4_0) {
        size_t need = (size_t)m * (size_t)k;
        if (need > ctx->cap) {
            free(ctx->xq);
            free(ctx->xd);
            free(ctx->xs);
            free(ctx->xp);
            ctx->xq = malloc(need);
            ctx->xd = malloc(need / QK * sizeof(float));
            ctx->xs = malloc(need / QK * sizeof(int32_t));
            ctx->xp = malloc(need);
            ctx->cap = (ctx->xq && ctx->xd && ctx->xs && ctx->xp) ? need : 0;
            if (!ctx->cap)
                return -1;
        }
        for (int i = 0; i < m; i++)
            quantize_row_act(x + (size_t)i * k, k, ctx->xq + (size_t)i * k,
                             ctx->xd + (size_t)i * (k / QK));
        if (kc_gemm_gw(w->type, w->data, (int64_t)w->nbytes, w->n_out, k, ctx->xq, ctx->xd, m, y))
            return 0;
        if (w->type == GGUF_T_Q4_0)
            for (int i = 0; i < m; i++)
                act_prep_q4(ctx->xq + (size_t)i * k, k / QK, ctx->xs + (size_t)i * (k / QK),
                            ctx->xp + (size_t)i * k);
        j.xq = ctx->xq;
        j.xd = ctx->xd;
        j.xs = ctx->xs;
        j.xp = ctx->xp;
    }
    if ((int64_t)w->n_out * k * m < GEMM_THREAD_MIN)
        gemm_rows(&j, 0, w->n_out);
    else {
        /* about 16 chunks per thread, at least 16 rows each */
        int nt = kt_pool_size(ctx->pool);
        j.chunk = w->n_out / (16 * nt);
        if (j.chunk < 16)
            j.chunk = 16;
        kt_pool_run(ctx->pool, gemm_task, &j);
    }
    return 0;
}

void gemm_ctx_free(kt_gemm_ctx *ctx) {
    free(ctx->xq);
    free(ctx->xd);
    free(ctx->xs);
    free(ctx->xp);
    ctx->xq = NULL;
    ctx->xd = NULL;
    ctx->xs = NULL;
    ctx->xp = NULL;
    ctx->cap = 0;
}

void gemm_gw_ref(const kt_weight *w, const float *x, int m, float *y) {
    const int k = w->k, nb = k / QK;
    int8_t *xq = NULL;
    float *xd = NULL;
    int quant = w->type == GGUF_T_Q8_0 || w->type == GGUF_T_Q4_0;
    if (quant) {
        xq = malloc((size_t)m * k);
        xd = malloc((size_t)m * nb * sizeof(float));
        if (!xq || !xd) {
            free(xq);
            free(xd);
            return;
        }
        for (int i = 0; i < m; i++)
            quantize_row_act(x + (size_t)i * k, k, xq + (size_t)i * k, xd + (size_t)i * nb);
    }
    for (int r = 0; r < w->n_out; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        for (int i = 0; i < m; i++) {
            float v;
            switch (w->type) {
            case GGUF_T_Q8_0: v = dot_q8_0_scalar(row, xq + (size_t)i * k, xd + (size_t)i * nb, nb); break;
            case GGUF_T_Q4_0: v = dot_q4_0_scalar(row, xq + (size_t)i * k, xd + (size_t)i * nb, nb); break;
            case GGUF_T_F16: v = dot_f16_scalar((const uint16_t *)row, x + (size_t)i * k, k); break;
            case GGUF_T_BF16: v = dot_bf16_scalar((const uint16_t *)row, x + (size_t)i * k, k); break;
            default: v = dot_f32_scalar((const float *)row, x + (size_t)i * k, k); break;
            }
            y[(size_t)i * w->n_out + r] = v;
        }
    }
    free(xq);
    free(xd);
}
