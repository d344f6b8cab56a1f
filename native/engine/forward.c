/* forward.c - the CPU forward pass of Qwen3.5 text, in the canonical order of docs/NUMERICS.md.
 *
 * kt_forward_rows() runs m rows (positions pos .. pos+m-1) through the model. Matrix products
 * take all m rows at once (the weights are read once per pass); everything that carries state
 * from one position to the next (conv, recurrence, KV cache, attention) goes row by row in
 * position order. Each output element is computed by the same operations whatever m is, so m
 * rows give the bytes of m single-row calls.
 *
 * Threads: matrix products split their output rows; the conv splits its channels, the
 * recurrence and the attention their heads (each unit over all m rows in order). No unit
 * shares a float reduction with another, so the bytes do not depend on the thread count.
 */
#include "forward.h"

#include <string.h>

#include "kernels.h"
#include "kite_math.h"
#include "vec_math.h"

/* ---- small operations ---------------------------------------------------------------------- */

/* y = RMSNorm(x) * w over n values (y may be x). */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    float ss = kite_sumsq(x, n);
    float mean = ss / (float)n;
    float s = kite_rsqrtf(mean + eps);
    for (int i = 0; i < n; i++)
        y[i] = (x[i] * s) * w[i];
}

/* x = x / sqrt(sum x^2 + eps), in place. */
static void l2norm(float *x, int n, float eps) {
    float ss = kite_sumsq(x, n);
    float s = kite_rsqrtf(ss + eps);
    for (int i = 0; i < n; i++)
        x[i] = x[i] * s;
}

/* NeoX rotation of the first n_rot dims of one head at one position. */
static void rope(float *v, const float *cos_row, const float *sin_row, int half) {
    for (int i = 0; i < half; i++) {
        float x0 = v[i], x1 = v[i + half];
        float c = cos_row[i], s = sin_row[i];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
    }
}

static void embed(const kt_model *md, int32_t token, float *x) {
    const kt_weight *w = &md->token_embd;
    dequant_row(w->type, (const uint8_t *)w->data + (size_t)token * w->row_bytes, w->k, x);
}

static void add_rows(float *x, const float *d, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] + d[i];
}

/* ---- gated full attention ------------------------------------------------------------------- */

/* One query head over positions 0..pos of its KV head: o[D], then the sigmoid output gate.
 * score [max_pos] and acc [32][D] are the calling thread's scratch. */
static void attend_head(const kt_model *md, kt_state *st, int kv_layer, const float *q,
                        const float *gate, int kvh, int pos, float *o, float *score, float *acc) {
    const kt_hparams *hp = &md->hp;
    const int D = hp->head_dim, KVD = hp->n_head_kv * D;
    const float *kc = st->k_cache + (size_t)kv_layer * hp->max_pos * KVD + (size_t)kvh * D;
    const float *vc = st->v_cache + (size_t)kv_layer * hp->max_pos * KVD + (size_t)kvh * D;
    const float scale = kite_rsqrtf((float)D);
    float mx = 0.0f;
    for (int t = 0; t <= pos; t++) {
        score[t] = dot_f32(q, kc + (size_t)t * KVD, D) * scale;
        if (t == 0 || score[t] > mx)
            mx = score[t];
    }
    float lanes[32];
    for (int l = 0; l < 32; l++)
        lanes[l] = 0.0f;
    for (int t = 0; t <= pos; t++) {
        score[t] = kite_expf(score[t] - mx);
        lanes[t & 31] = lanes[t & 31] + score[t];
    }
    float sum = kite_sum32_finish(lanes);
    for (int t = 0; t <= pos; t++)
        score[t] = score[t] / sum;
    /* o[d] = sum32 over t of p[t] * v_t[d]: lane t % 32 for every d, then the butterfly */
    memset(acc, 0, (size_t)32 * D * sizeof(float));
    for (int t = 0; t <= pos; t++) /* a[d] = a[d] + p[t] * v_t[d] */
        vec_add_scaled(acc + (size_t)(t & 31) * D, vc + (size_t)t * KVD, score[t], D);
    for (int off = 16; off > 0; off >>= 1) /* x * 1.0f is exact: these are plain additions */
        for (int l = 0; l < off; l++)
            vec_add_scaled(acc + (size_t)l * D, acc + (size_t)(l + off) * D, 1.0f, D);
    for (int d = 0; d < D; d++)
        o[d] = acc[d] * kite_sigmoidf(gate[d]);
}

typedef struct attn_job {
    const kt_model *md;
    kt_state *st;
    const kt_layer *L;
    const float *qg;  /* [m][2 H D] */
    int pos;
} attn_job;

/* Unit u = row i, query head h: every row's keys and values are in the cache already. */
static void attn_unit(void *arg, int u, int tid) {
    const attn_job *a = (const attn_job *)arg;
    const kt_hparams *hp = &a->md->hp;
    const int H = hp->n_head, D = hp->head_dim, i = u / H, h = u % H;
    const float *q = a->qg + (size_t)i * 2 * H * D + (size_t)2 * h * D;
    attend_head(a->md, a->st, a->L->state_index, q, q + D, h / (H / hp->n_head_kv), a->pos + i,
                a->st->mix + (size_t)i * H * D + (size_t)h * D,
                a->st->scores + (size_t)tid * hp->max_pos, a->st->lanes + (size_t)tid * 32 * D);
}

static int attention(const kt_model *md, kt_state *st, const kt_layer *L, int m, int pos) {
    const kt_hparams *hp = &md->hp;
    const int H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim, half = hp->n_rot / 2;
    const int KVD = Hkv * D, QG = 2 * H * D;
    float *qg = st->big; /* [m][2 H D]: per head, D query values then D gate values */
    const kt_weight *w[3] = {&L->attn_q, &L->attn_k, &L->attn_v};
    float *y[3] = {qg, st->k, st->v};
    if (gemm_gw_n(&st->gemm, 3, w, y, st->xn, m))
        return -1;
    for (int i = 0; i < m; i++) {
        const int p = pos + i;
        const float *cs = md->rope_cos + (size_t)p * half, *sn = md->rope_sin + (size_t)p * half;
        float *q = qg + (size_t)i * QG, *k = st->k + (size_t)i * KVD, *v = st->v + (size_t)i * KVD;
        for (int h = 0; h < H; h++) {
            rmsnorm(q + 2 * h * D, q + 2 * h * D, L->attn_q_norm, D, hp->eps);
            rope(q + 2 * h * D, cs, sn, half);
        }
        for (int g = 0; g < Hkv; g++) {
            rmsnorm(k + g * D, k + g * D, L->attn_k_norm, D, hp->eps);
            rope(k + g * D, cs, sn, half);
        }
        size_t at = ((size_t)L->state_index * hp->max_pos + p) * KVD;
        memcpy(st->k_cache + at, k, (size_t)KVD * sizeof(float));
        memcpy(st->v_cache + at, v, (size_t)KVD * sizeof(float));
    }
    attn_job a = {md, st, L, qg, pos};
    kt_pool_for(st->gemm.pool, m * H, attn_unit, &a);
    return gemm_gw(&st->gemm, &L->attn_output, st->mix, m, st->out);
}

/* ---- Gated DeltaNet --------------------------------------------------------------------------- */

typedef struct dn_job {
    const kt_model *md;
    kt_state *st;
    const kt_layer *L;
    int m;
    float *qkv;  /* [m][C]: the projections, replaced in place by the conv output */
} dn_job;

/* Causal depthwise conv of channels [c0, c1) of m rows (row stride C), each channel with its
 * K-1 previous inputs, then SiLU, in place; each input joins its channel's history. w is
 * [K][C]; per channel acc = 0, then acc + w_j * x_j for the taps in order, 64 channels at a time. */
static void conv_channels(const kt_model *md, float *hist, const float *w, float *p, int m, int c0,
                          int c1) {
    const int C = md->hp.ssm_channels, K = md->hp.ssm_conv;
    float acc[64];
    for (int i = 0; i < m; i++) {
        float *row = p + (size_t)i * C;
        for (int c = c0; c < c1; c += 64) {
            const int n = c1 - c < 64 ? c1 - c : 64;
            memset(acc, 0, sizeof acc);
            for (int j = 0; j < K - 1; j++)
                vec_mul_add(acc, w + (size_t)j * C + c, hist + (size_t)j * C + c, n);
            vec_mul_add(acc, w + (size_t)(K - 1) * C + c, row + c, n);
            for (int j = 0; j + 2 < K; j++)
                memcpy(hist + (size_t)j * C + c, hist + (size_t)(j + 1) * C + c, n * sizeof(float));
            if (K > 1)
                memcpy(hist + (size_t)(K - 2) * C + c, row + c, n * sizeof(float));
            vec_silu(row + c, acc, n);
        }
    }
}

/* Conv unit u: the channels of query head u (u < Hk), of key head u - Hk (u < 2 Hk), else of
 * value head u - 2 Hk; query and key heads are then L2-normalized, the query scaled. */
static void dn_conv_unit(void *arg, int u, int tid) {
    const dn_job *jb = (const dn_job *)arg;
    const kt_hparams *hp = &jb->md->hp;
    const int C = hp->ssm_channels, Hk = hp->ssm_hk, dk = hp->ssm_dk, K = hp->ssm_conv;
    const int c0 = u < 2 * Hk ? u * dk : 2 * Hk * dk + (u - 2 * Hk) * hp->ssm_dv;
    const int c1 = c0 + (u < 2 * Hk ? dk : hp->ssm_dv);
    float *hist = jb->st->conv_state + (size_t)jb->L->state_index * (K - 1) * C;
    (void)tid;
    conv_channels(jb->md, hist, jb->L->ssm_conv1d, jb->qkv, jb->m, c0, c1);
    if (u >= 2 * Hk)
        return;
    const float qscale = kite_rsqrtf((float)dk);
    for (int i = 0; i < jb->m; i++) {
        float *x = jb->qkv + (size_t)i * C + c0;
        l2norm(x, dk, hp->eps);
        if (u < Hk)
            for (int j = 0; j < dk; j++)
                x[j] = x[j] * qscale;
    }
}

/* Ask for n floats from p ahead of use (the recurrent state streams through once per token and
 * the hardware prefetch alone leaves most of it to miss). */
static void prefetch_floats(const float *p, int n) {
#if defined(__GNUC__) || defined(__clang__)
    for (int i = 0; i < n; i += 16)
        __builtin_prefetch(p + i, 1, 3);
#else
    (void)p;
    (void)n;
#endif
}

#define DN_PREFETCH_ROWS 4 /* state rows ahead */

/* Head unit h: value head h over the m rows in order (its state carries from row to row). */
static void dn_head_unit(void *arg, int h, int tid) {
    const dn_job *jb = (const dn_job *)arg;
    const kt_hparams *hp = &jb->md->hp;
    const kt_layer *L = jb->L;
    kt_state *st = jb->st;
    const int C = hp->ssm_channels, Hk = hp->ssm_hk, Hv = hp->ssm_hv, dk = hp->ssm_dk;
    const int dv = hp->ssm_dv, VD = Hv * dv;
    float *S = st->ssm_state + ((size_t)L->state_index * Hv + h) * dv * dk;
    (void)tid;
    for (int i = 0; i < jb->m; i++) {
        const float *c = jb->qkv + (size_t)i * C;
        const float *qh = c + (h % Hk) * dk, *kh = c + (Hk + h % Hk) * dk;
        const float *vh = c + 2 * Hk * dk + h * dv;
        const float beta = kite_sigmoidf(st->beta[(size_t)i * Hv + h]);
        const float g = L->ssm_a[h] * kite_softplusf(st->alpha[(size_t)i * Hv + h] + L->ssm_dt_bias[h]);
        const float decay = kite_expf(g);
        float *o = st->mix + (size_t)i * VD + (size_t)h * dv;
        for (int j = 0; j < dv; j++) {
            float *row = S + (size_t)j * dk;
            if (j + DN_PREFETCH_ROWS < dv)
                prefetch_floats(row + (size_t)DN_PREFETCH_ROWS * dk, dk);
            /* row = row * decay; kv = dot(row, k) */
            float kv = dot_scale_f32(row, decay, kh, dk);
            float delta = (vh[j] - kv) * beta;
            /* row = row + k * delta; o = dot(row, q) */
            o[j] = dot_axpy_f32(row, kh, delta, qh, dk);
        }
        rmsnorm(o, o, L->ssm_norm, dv, hp->eps);
        vec_mul_silu(o, o, st->z + (size_t)i * VD + (size_t)h * dv, dv);
    }
}

static int deltanet(const kt_model *md, kt_state *st, const kt_layer *L, int m) {
    const kt_hparams *hp = &md->hp;
    float *qkv = st->big; /* [m][C] */
    const kt_weight *w[4] = {&L->ssm_qkv, &L->ssm_gate, &L->ssm_beta, &L->ssm_alpha};
    float *y[4] = {qkv, st->z, st->beta, st->alpha};
    if (gemm_gw_n(&st->gemm, 4, w, y, st->xn, m))
        return -1;
    dn_job jb = {md, st, L, m, qkv};
    kt_pool_for(st->gemm.pool, 2 * hp->ssm_hk + hp->ssm_hv, dn_conv_unit, &jb);
    kt_pool_for(st->gemm.pool, hp->ssm_hv, dn_head_unit, &jb);
    return gemm_gw(&st->gemm, &L->ssm_out, st->mix, m, st->out);
}

/* ---- SwiGLU MLP ------------------------------------------------------------------------------- */

static int mlp(const kt_model *md, kt_state *st, const kt_layer *L, int m) {
    float *gate = st->big;
    (void)md;
    if (gemm_gw_glu(&st->gemm, &L->ffn_gate, &L->ffn_up, st->xn, m, gate, st->up))
        return -1;
    return gemm_gw(&st->gemm, &L->ffn_down, gate, m, st->out);
}

/* ---- the model ------------------------------------------------------------------------------------ */

int kt_forward_rows(const kt_model *md, kt_state *st, const int32_t *tokens, int m, int pos,
                    float *h_out, float *logits) {
    const kt_hparams *hp = &md->hp;
    const int E = hp->n_embd;
    float *x = st->x, *xn = st->xn;
    for (int i = 0; i < m; i++)
        embed(md, tokens[i], x + (size_t)i * E);
    for (int il = 0; il < hp->n_layer; il++) {
        const kt_layer *L = &md->layers[il];
        /* x = x + Mixer(RMSNorm(x) * attn_norm) */
        for (int i = 0; i < m; i++)
            rmsnorm(xn + (size_t)i * E, x + (size_t)i * E, L->attn_norm, E, hp->eps);
        if ((L->recurrent ? deltanet(md, st, L, m) : attention(md, st, L, m, pos)) != 0)
            return -1;
        add_rows(x, st->out, (size_t)m * E);
        /* x = x + MLP(RMSNorm(x) * post_attention_norm) */
        for (int i = 0; i < m; i++)
            rmsnorm(xn + (size_t)i * E, x + (size_t)i * E, L->post_attn_norm, E, hp->eps);
        if (mlp(md, st, L, m) != 0)
            return -1;
        add_rows(x, st->out, (size_t)m * E);
    }
    for (int i = 0; i < m; i++)
        rmsnorm(h_out + (size_t)i * E, x + (size_t)i * E, md->output_norm, E, hp->eps);
    return gemm_gw(&st->gemm, &md->output, h_out, m, logits);
}
