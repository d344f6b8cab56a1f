/* forward.c - the CPU forward pass of Qwen3.5 text, in the canonical order of docs/NUMERICS.md.
 *
 * kt_forward_rows() runs m rows (positions pos .. pos+m-1) through the model. Matrix products
 * take all m rows at once (the weights are read once per pass); everything that carries state
 * from one position to the next (conv, recurrence, KV cache, attention) goes row by row in
 * position order. Each output element is computed by the same operations whatever m is, so m
 * rows give the bytes of m single-row calls.
 */
#include <string.h>

#include "kite_math.h"
#include "model.h"
#include "quant.h"

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

/* One query head over positions 0..pos of its KV head: o[D], then the sigmoid output gate. */
static void attend_head(const kt_model *md, kt_state *st, int kv_layer, const float *q,
                        const float *gate, int kvh, int pos, float *o) {
    const kt_hparams *hp = &md->hp;
    const int D = hp->head_dim, KVD = hp->n_head_kv * D;
    const float *kc = st->k_cache + (size_t)kv_layer * hp->max_pos * KVD + (size_t)kvh * D;
    const float *vc = st->v_cache + (size_t)kv_layer * hp->max_pos * KVD + (size_t)kvh * D;
    const float scale = kite_rsqrtf((float)D);
    float *score = st->scores;
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
    float *acc = st->lanes; /* [32][D] */
    memset(acc, 0, (size_t)32 * D * sizeof(float));
    for (int t = 0; t <= pos; t++) /* a[d] = a[d] + p[t] * v_t[d] */
        vec_add_scaled(acc + (size_t)(t & 31) * D, vc + (size_t)t * KVD, score[t], D);
    for (int off = 16; off > 0; off >>= 1) /* x * 1.0f is exact: these are plain additions */
        for (int l = 0; l < off; l++)
            vec_add_scaled(acc + (size_t)l * D, acc + (size_t)(l + off) * D, 1.0f, D);
    for (int d = 0; d < D; d++)
        o[d] = acc[d] * kite_sigmoidf(gate[d]);
}

static int attention(const kt_model *md, kt_state *st, const kt_layer *L, int m, int pos) {
    const kt_hparams *hp = &md->hp;
    const int H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim, half = hp->n_rot / 2;
    const int KVD = Hkv * D, QG = 2 * H * D, HD = H * D, E = hp->n_embd;
    float *qg = st->big; /* [m][2 H D]: per head, D query values then D gate values */
    if (gemm_gw(&st->gemm, &L->attn_q, st->xn, m, qg) ||
        gemm_gw(&st->gemm, &L->attn_k, st->xn, m, st->k) ||
        gemm_gw(&st->gemm, &L->attn_v, st->xn, m, st->v))
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
        for (int h = 0; h < H; h++)
            attend_head(md, st, L->state_index, q + 2 * h * D, q + 2 * h * D + D, h / (H / Hkv), p,
                        st->mix + (size_t)i * HD + h * D);
    }
    (void)E;
    return gemm_gw(&st->gemm, &L->attn_output, st->mix, m, st->out);
}

/* ---- Gated DeltaNet --------------------------------------------------------------------------- */

/* Causal depthwise conv of one row p[C] with the K-1 previous rows, SiLU into out; then the
 * row joins the history. */
static void conv_step(const kt_model *md, float *hist, const float *w, const float *p, float *out) {
    const int C = md->hp.ssm_channels, K = md->hp.ssm_conv;
    for (int c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int j = 0; j < K - 1; j++)
            acc = acc + w[(size_t)c * K + j] * hist[(size_t)j * C + c];
        acc = acc + w[(size_t)c * K + K - 1] * p[c];
        out[c] = kite_siluf(acc);
    }
    if (K > 1) {
        memmove(hist, hist + C, (size_t)(K - 2) * C * sizeof(float));
        memcpy(hist + (size_t)(K - 2) * C, p, (size_t)C * sizeof(float));
    }
}

static int deltanet(const kt_model *md, kt_state *st, const kt_layer *L, int m) {
    const kt_hparams *hp = &md->hp;
    const int C = hp->ssm_channels, Hk = hp->ssm_hk, Hv = hp->ssm_hv, dk = hp->ssm_dk;
    const int dv = hp->ssm_dv, VD = Hv * dv, K = hp->ssm_conv;
    float *qkv = st->big; /* [m][C] */
    if (gemm_gw(&st->gemm, &L->ssm_qkv, st->xn, m, qkv) ||
        gemm_gw(&st->gemm, &L->ssm_gate, st->xn, m, st->z) ||
        gemm_gw(&st->gemm, &L->ssm_beta, st->xn, m, st->beta) ||
        gemm_gw(&st->gemm, &L->ssm_alpha, st->xn, m, st->alpha))
        return -1;
    float *hist = st->conv_state + (size_t)L->state_index * (K - 1) * C;
    float *S0 = st->ssm_state + (size_t)L->state_index * Hv * dv * dk;
    const float qscale = kite_rsqrtf((float)dk);
    for (int i = 0; i < m; i++) {
        float *c = st->conv;
        conv_step(md, hist, L->ssm_conv1d, qkv + (size_t)i * C, c);
        float *q = c, *k = c + Hk * dk, *v = c + 2 * Hk * dk;
        for (int h = 0; h < Hk; h++) {
            l2norm(q + h * dk, dk, hp->eps);
            for (int j = 0; j < dk; j++)
                q[h * dk + j] = q[h * dk + j] * qscale;
            l2norm(k + h * dk, dk, hp->eps);
        }
        float *y = st->mix + (size_t)i * VD;
        const float *z = st->z + (size_t)i * VD;
        for (int h = 0; h < Hv; h++) {
            const float *qh = q + (h % Hk) * dk, *kh = k + (h % Hk) * dk, *vh = v + h * dv;
            const float beta = kite_sigmoidf(st->beta[(size_t)i * Hv + h]);
            const float g = L->ssm_a[h] * kite_softplusf(st->alpha[(size_t)i * Hv + h] +
                                                         L->ssm_dt_bias[h]);
            const float decay = kite_expf(g);
            float *S = S0 + (size_t)h * dv * dk;
            float *o = y + h * dv;
            for (int j = 0; j < dv; j++) {
                float *row = S + (size_t)j * dk;
                /* row = row * decay; kv = dot(row, k) */
                float kv = dot_scale_f32(row, decay, kh, dk);
                float delta = (vh[j] - kv) * beta;
                /* row = row + k * delta; o = dot(row, q) */
                o[j] = dot_axpy_f32(row, kh, delta, qh, dk);
            }
            rmsnorm(o, o, L->ssm_norm, dv, hp->eps);
            for (int j = 0; j < dv; j++)
                o[j] = o[j] * kite_siluf(z[h * dv + j]);
        }
    }
    return gemm_gw(&st->gemm, &L->ssm_out, st->mix, m, st->out);
}

/* ---- SwiGLU MLP ------------------------------------------------------------------------------- */

static int mlp(const kt_model *md, kt_state *st, const kt_layer *L, int m) {
    const size_t n = (size_t)m * md->hp.n_ff;
    float *gate = st->big;
    if (gemm_gw(&st->gemm, &L->ffn_gate, st->xn, m, gate) ||
        gemm_gw(&st->gemm, &L->ffn_up, st->xn, m, st->up))
        return -1;
    for (size_t i = 0; i < n; i++)
        gate[i] = kite_siluf(gate[i]) * st->up[i];
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
