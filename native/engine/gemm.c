/* gemm.c - see gemm.h. */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "gguf.h"
#include "kernels.h"
#include "vec_math.h"

/* Below this many multiply-adds a gemm runs on the calling thread alone. */
#define GEMM_THREAD_MIN 32768
#define GEMM_MAX_PARTS 4

/* One weight of a job; its rows are rows r0 .. r0 + n_out - 1 of the job's row space. */
typedef struct gemm_part {
    const kt_weight *w;
    float *y;
    int r0;
} gemm_part;

typedef struct gemm_job {
    gemm_part part[GEMM_MAX_PARTS];
    int n_part;
    int n_rows;         /* rows of all parts */
    const kt_weight *up; /* SwiGLU: y = silu(part 0 . x) * (up . x), tmp holds the up values */
    float *tmp;
    const float *x;
    const int8_t *xq;
    const float *xd;
    const int32_t *xs;
    const int8_t *xp;
    int m;
    int chunk;          /* rows per unit of work */
} gemm_job;

static float row_dot(const gemm_job *j, const kt_weight *w, int r, int i) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    const int k = w->k, nb = k / QK;
    switch (w->type) {
    case GGUF_T_Q8_0: return dot_q8_0(row, j->xq + (size_t)i * k, j->xd + (size_t)i * nb, nb);
    case GGUF_T_Q4_0: return dot_q4_0(row, j->xq + (size_t)i * k, j->xd + (size_t)i * nb,
                                      j->xs + (size_t)i * nb, j->xp + (size_t)i * k, nb);
    case GGUF_T_F16: return dot_f16((const uint16_t *)row, j->x + (size_t)i * k, k);
    case GGUF_T_BF16: return dot_bf16((const uint16_t *)row, j->x + (size_t)i * k, k);
    default: return dot_f32((const float *)row, j->x + (size_t)i * k, k);
    }
}

/* y[r] for rows [r0, r1) of w against activation row 0. */
static void rows_m1(const gemm_job *j, const kt_weight *w, int r0, int r1, float *y) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    const int nb = w->k / QK;
    if (w->type == GGUF_T_Q4_0)
        dot_q4_0_rows(row, w->row_bytes, r1 - r0, j->xq, j->xd, j->xs, j->xp, nb, y + r0);
    else if (w->type == GGUF_T_Q8_0)
        dot_q8_0_rows(row, w->row_bytes, r1 - r0, j->xq, j->xd, nb, y + r0);
    else
        for (int r = r0; r < r1; r++)
            y[r] = row_dot(j, w, r, 0);
}

/* Rows [r0, r1) of one part for all m activation rows; the weight row is read once and reused. */
static void gemm_rows(const gemm_job *j, const gemm_part *p, int r0, int r1) {
    const int n = p->w->n_out;
    if (j->m == 1) {
        rows_m1(j, p->w, r0, r1, p->y);
        if (j->up)
            rows_m1(j, j->up, r0, r1, j->tmp);
    } else
        for (int r = r0; r < r1; r++)
            for (int i = 0; i < j->m; i++) {
                p->y[(size_t)i * n + r] = row_dot(j, p->w, r, i);
                if (j->up)
                    j->tmp[(size_t)i * n + r] = row_dot(j, j->up, r, i);
            }
    if (j->up) /* the product while the rows are in cache */
        for (int i = 0; i < j->m; i++)
            vec_silu_mul(p->y + (size_t)i * n + r0, p->y + (size_t)i * n + r0,
                         j->tmp + (size_t)i * n + r0, r1 - r0);
}

/* Rows [r0, r1) of the job's row space, which may cross from one part into the next. */
static void gemm_span(const gemm_job *j, int r0, int r1) {
    for (int q = 0; q < j->n_part; q++) {
        const gemm_part *p = &j->part[q];
        int a = r0 > p->r0 ? r0 : p->r0, b = p->r0 + p->w->n_out;
        b = r1 < b ? r1 : b;
        if (a < b)
            gemm_rows(j, p, a - p->r0, b - p->r0);
    }
}

/* Unit u: the u-th chunk of consecutive rows (the pool hands chunks out in turn). */
static void gemm_unit(void *arg, int u, int tid) {
    const gemm_job *j = (const gemm_job *)arg;
    const int r0 = u * j->chunk;
    (void)tid;
    gemm_span(j, r0, r0 + j->chunk < j->n_rows ? r0 + j->chunk : j->n_rows);
}

static int is_quant(const kt_weight *w) {
    return w->type == GGUF_T_Q8_0 || w->type == GGUF_T_Q4_0;
}

/* Quantize the m rows of x (k values each) into ctx once for every quantized weight. */
static int quantize_x(kt_gemm_ctx *ctx, const float *x, int m, int k) {
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
        quantize_row_act(x + (size_t)i * k, k, ctx->xq + (size_t)i * k, ctx->xd + (size_t)i * (k / QK));
    return 0;
}

/* Adds w to the job unless the per-op offload computed it already. */
static void job_add(gemm_job *j, kt_gemm_ctx *ctx, const kt_weight *w, float *y) {
    if (is_quant(w) && kc_gemm_gw(w->type, w->data, (int64_t)w->nbytes, w->n_out, w->k, ctx->xq,
                                  ctx->xd, j->m, y))
        return;
    gemm_part *p = &j->part[j->n_part++];
    p->w = w;
    p->y = y;
    p->r0 = j->n_rows;
    j->n_rows += w->n_out;
}

static void job_init(gemm_job *j, const float *x, int m) {
    memset(j, 0, sizeof *j);
    j->x = x;
    j->m = m;
}

/* Runs the parts of j (all with k inputs) on the pool, or inline when small. */
static void job_run(gemm_job *j, kt_gemm_ctx *ctx, int k) {
    int q4 = 0, quant = 0;
    if (!j->n_rows)
        return;
    for (int q = 0; q < j->n_part; q++) {
        quant |= is_quant(j->part[q].w);
        q4 |= j->part[q].w->type == GGUF_T_Q4_0;
    }
    if (j->up) {
        quant |= is_quant(j->up);
        q4 |= j->up->type == GGUF_T_Q4_0;
    }
    if (q4)
        for (int i = 0; i < j->m; i++)
            act_prep_q4(ctx->xq + (size_t)i * k, k / QK, ctx->xs + (size_t)i * (k / QK),
                        ctx->xp + (size_t)i * k);
    if (quant) {
        j->xq = ctx->xq;
        j->xd = ctx->xd;
        j->xs = ctx->xs;
        j->xp = ctx->xp;
    }
    int64_t macs = (int64_t)j->n_rows * k * j->m * (j->up ? 2 : 1);
    if (macs < GEMM_THREAD_MIN) {
        gemm_span(j, 0, j->n_rows);
        return;
    }
    /* about 16 chunks per thread, at least 16 rows each */
    int nt = kt_pool_size(ctx->pool);
    j->chunk = j->n_rows / (16 * nt);
    if (j->chunk < 16)
        j->chunk = 16;
    kt_pool_for(ctx->pool, (j->n_rows + j->chunk - 1) / j->chunk, gemm_unit, j);
}

int gemm_gw_n(kt_gemm_ctx *ctx, int n, const kt_weight *const *w, float *const *y, const float *x,
              int m) {
    gemm_job j;
    int quant = 0;
    if (n < 1 || n > GEMM_MAX_PARTS)
        return -1;
    job_init(&j, x, m);
    for (int q = 0; q < n; q++) {
        if (w[q]->k != w[0]->k)
            return -1;
        quant |= is_quant(w[q]);
    }
    if (quant && quantize_x(ctx, x, m, w[0]->k))
        return -1;
    for (int q = 0; q < n; q++)
        job_add(&j, ctx, w[q], y[q]);
    job_run(&j, ctx, w[0]->k);
    return 0;
}

int gemm_gw(kt_gemm_ctx *ctx, const kt_weight *w, const float *x, int m, float *y) {
    return gemm_gw_n(ctx, 1, &w, &y, x, m);
}

int gemm_gw_glu(kt_gemm_ctx *ctx, const kt_weight *gate, const kt_weight *up, const float *x,
                int m, float *y, float *tmp) {
    gemm_job j;
    if (gate->k != up->k || gate->n_out != up->n_out)
        return -1;
    job_init(&j, x, m);
    if ((is_quant(gate) || is_quant(up)) && quantize_x(ctx, x, m, gate->k))
        return -1;
    job_add(&j, ctx, gate, y);
    int gate_cpu = j.n_part;
    job_add(&j, ctx, up, tmp);
    if (gate_cpu && j.n_part == 2) { /* both on the CPU: one pass, the product fused */
        j.n_part = 1;
        j.n_rows = gate->n_out;
        j.up = up;
        j.tmp = tmp;
        job_run(&j, ctx, gate->k);
        return 0;
    }
    job_run(&j, ctx, gate->k);
    for (int i = 0; i < m; i++)
        vec_silu_mul(y + (size_t)i * gate->n_out, y + (size_t)i * gate->n_out,
                     tmp + (size_t)i * gate->n_out, gate->n_out);
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
