/* model.c - loading and checking a qwen35 GGUF, preparing it for the CPU (RoPE tables,
 * threads), and the sequence state. Where each pass runs is session.c's choice. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kite_cuda.h"
#include "kite_math.h"

#define KT_DIM_MAX (1 << 24)   /* sanity bound on every hyper-parameter and derived width */
#define KT_LAYER_MAX 4096

int kt_errorf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- hyper-parameters ---------------------------------------------------------------------- */

static int get_u32(const gguf_file *g, const char *arch, const char *suffix, int required,
                   int dflt, int *out, char *err, size_t errlen) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    if (gguf_get_u32(g, key, &v) != 0) {
        if (gguf_find_kv(g, key))
            return kt_errorf(err, errlen, "metadata '%s' is not a non-negative integer", key);
        if (required)
            return kt_errorf(err, errlen, "missing metadata '%s'", key);
        *out = dflt;
        return 0;
    }
    if (v > KT_DIM_MAX)
        return kt_errorf(err, errlen, "metadata '%s' = %u is out of range", key, v);
    *out = (int)v;
    return 0;
}

static int read_hparams(kt_model *md, int ctx_len, char *err, size_t errlen) {
    const gguf_file *g = &md->gguf;
    kt_hparams *hp = &md->hp;
    const char *a = md->arch;
    int block_count, nextn, ctx_train, interval;
    if (get_u32(g, a, "block_count", 1, 0, &block_count, err, errlen) ||
        get_u32(g, a, "nextn_predict_layers", 0, 0, &nextn, err, errlen) ||
        get_u32(g, a, "context_length", 0, KT_CTX_DEFAULT, &ctx_train, err, errlen) ||
        get_u32(g, a, "embedding_length", 1, 0, &hp->n_embd, err, errlen) ||
        get_u32(g, a, "feed_forward_length", 0, 0, &hp->n_ff, err, errlen) ||
        get_u32(g, a, "attention.head_count", 1, 0, &hp->n_head, err, errlen) ||
        get_u32(g, a, "attention.head_count_kv", 0, hp->n_head, &hp->n_head_kv, err, errlen) ||
        get_u32(g, a, "ssm.conv_kernel", 1, 0, &hp->ssm_conv, err, errlen) ||
        get_u32(g, a, "ssm.state_size", 1, 0, &hp->ssm_dk, err, errlen) ||
        get_u32(g, a, "ssm.group_count", 1, 0, &hp->ssm_hk, err, errlen) ||
        get_u32(g, a, "ssm.time_step_rank", 1, 0, &hp->ssm_hv, err, errlen) ||
        get_u32(g, a, "full_attention_interval", 0, 4, &interval, err, errlen))
        return -1;
    int inner;
    if (get_u32(g, a, "ssm.inner_size", 1, 0, &inner, err, errlen))
        return -1;
    if (hp->n_head == 0 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
        return kt_errorf(err, errlen, "bad head counts: %d query heads, %d KV heads", hp->n_head,
                    hp->n_head_kv);
    int dflt_d = hp->n_embd / hp->n_head;
    int vlen;
    if (get_u32(g, a, "attention.key_length", 0, dflt_d, &hp->head_dim, err, errlen) ||
        get_u32(g, a, "attention.value_length", 0, hp->head_dim, &vlen, err, errlen) ||
        get_u32(g, a, "rope.dimension_count", 0, hp->head_dim, &hp->n_rot, err, errlen))
        return -1;
    if (vlen != hp->head_dim)
        return kt_errorf(err, errlen, "attention.value_length %d differs from key_length %d", vlen,
                    hp->head_dim);
    if (hp->head_dim == 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return kt_errorf(err, errlen, "bad rotary dims %d for head dim %d", hp->n_rot, hp->head_dim);
    if (nextn >= block_count)
        return kt_errorf(err, errlen, "block_count %d leaves no main layer", block_count);
    hp->n_layer = block_count - nextn;
    if (hp->n_embd == 0 || hp->ssm_conv < 1 || hp->ssm_dk == 0 || hp->ssm_hk == 0 ||
        hp->ssm_hv == 0 || hp->ssm_hv % hp->ssm_hk != 0 || inner % hp->ssm_hv != 0)
        return kt_errorf(err, errlen, "bad linear-attention shape: K %d, dk %d, Hk %d, Hv %d, inner %d",
                    hp->ssm_conv, hp->ssm_dk, hp->ssm_hk, hp->ssm_hv, inner);
    hp->ssm_dv = inner / hp->ssm_hv;
    if (hp->n_layer > KT_LAYER_MAX)
        return kt_errorf(err, errlen, "%d layers (at most %d supported)", hp->n_layer, KT_LAYER_MAX);
    /* every derived width must stay a sane int */
    int64_t widths[] = {2 * (int64_t)hp->n_head * hp->head_dim,
                        (int64_t)hp->n_head_kv * hp->head_dim,
                        2 * (int64_t)hp->ssm_hk * hp->ssm_dk + (int64_t)hp->ssm_hv * hp->ssm_dv,
                        (int64_t)hp->ssm_conv * (2 * (int64_t)hp->ssm_hk * hp->ssm_dk +
                                                 (int64_t)hp->ssm_hv * hp->ssm_dv),
                        (int64_t)hp->ssm_hv * hp->ssm_dv * hp->ssm_dk};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i] > KT_DIM_MAX)
            return kt_errorf(err, errlen, "the model's head shapes are too large");
    hp->ssm_channels = 2 * hp->ssm_hk * hp->ssm_dk + hp->ssm_hv * hp->ssm_dv;
    {
        char key[160];
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
        if (gguf_get_f32(g, key, &hp->eps) != 0)
            return kt_errorf(err, errlen, "missing metadata '%s'", key);
    }
    {
        char key[160];
        snprintf(key, sizeof key, "%s.rope.freq_base", a);
        if (gguf_get_f32(g, key, &hp->rope_base) != 0)
            hp->rope_base = 10000.0f;
        if (!(hp->rope_base > 0.0f))
            return kt_errorf(err, errlen, "bad rope.freq_base");
    }
    hp->max_pos = ctx_len > 0 ? ctx_len : (ctx_train > 0 && ctx_train < KT_CTX_DEFAULT ? ctx_train
                                                                                      : KT_CTX_DEFAULT);
    /* layer types: recurrent_layers when present, else the interval */
    md->layer_recurrent = calloc((size_t)hp->n_layer, sizeof(int32_t));
    if (!md->layer_recurrent)
        return kt_errorf(err, errlen, "out of memory");
    char key[160];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    const gguf_kv *rl = gguf_find_kv(g, key);
    for (int i = 0; i < hp->n_layer; i++) {
        if (rl) {
            int64_t v;
            if (gguf_get_arr_int(g, rl, (uint64_t)i, &v) != 0)
                return kt_errorf(err, errlen, "'%s' has no integer entry for layer %d", key, i);
            md->layer_recurrent[i] = v != 0;
        } else {
            if (interval == 0)
                return kt_errorf(err, errlen, "full_attention_interval is 0");
            md->layer_recurrent[i] = (i + 1) % interval != 0;
        }
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------- */

static const gguf_tensor *find(kt_model *md, int layer, const char *name, int required,
                               char *err, size_t errlen, int *failed) {
    char full[GGUF_NAME_MAX + 1];
    if (layer >= 0)
        snprintf(full, sizeof full, "blk.%d.%s", layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    const gguf_tensor *t = gguf_find_tensor(&md->gguf, full);
    if (!t && required && !*failed) {
        kt_errorf(err, errlen, "missing tensor '%s'", full);
        *failed = 1;
    }
    return t;
}

static void add_ref(kt_model *md, int layer, int role, const gguf_tensor *t) {
    md->refs[md->n_refs].layer = layer;
    md->refs[md->n_refs].role = role;
    md->refs[md->n_refs].t = t;
    md->n_refs++;
}

static uint32_t load_bits(const uint8_t *v, int width) { /* little-endian, 2 or 4 bytes */
    uint32_t bits = (uint32_t)(v[0] | (v[1] << 8));
    return width == 4 ? bits | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24 : bits;
}

/* The first of n values (stride bytes apart, width 2 or 4 bytes) whose exponent bits (mask) are
 * all set, i.e. NaN or infinite; -1 when there is none. In chunks without an early exit, so the
 * common all-finite case runs as one flat loop. */
static int64_t first_all_ones(const uint8_t *p, int64_t n, int stride, int width, uint32_t mask) {
    enum { CHUNK = 4096 };
    for (int64_t c = 0; c < n; c += CHUNK) {
        const int64_t end = n - c < CHUNK ? n : c + CHUNK;
        uint32_t any = 0;
        for (int64_t i = c; i < end; i++)
            any |= (load_bits(p + i * stride, width) & mask) == mask;
        if (!any)
            continue;
        for (int64_t i = c; i < end; i++)
            if ((load_bits(p + i * stride, width) & mask) == mask)
                return i;
    }
    return -1;
}

/* A weight matrix whose values (f32, f16, bf16) or block scales (Q8_0, Q4_0) include a NaN or an
 * infinity is refused, with the tensor and the place named. */
static int check_finite(const gguf_tensor *t, char *err, size_t errlen) {
    const uint8_t *p = (const uint8_t *)t->data;
    int64_t at = -1;
    int scale = 0;
    switch (t->type) {
    case GGUF_T_F32: at = first_all_ones(p, (int64_t)t->nbytes / 4, 4, 4, 0x7f800000u); break;
    case GGUF_T_F16: at = first_all_ones(p, (int64_t)t->nbytes / 2, 2, 2, 0x7c00u); break;
    case GGUF_T_BF16: at = first_all_ones(p, (int64_t)t->nbytes / 2, 2, 2, 0x7f80u); break;
    case GGUF_T_Q8_0:
        at = first_all_ones(p, (int64_t)t->nbytes / Q8_0_BYTES, Q8_0_BYTES, 2, 0x7c00u);
        scale = 1;
        break;
    case GGUF_T_Q4_0:
        at = first_all_ones(p, (int64_t)t->nbytes / Q4_0_BYTES, Q4_0_BYTES, 2, 0x7c00u);
        scale = 1;
        break;
    }
    if (at < 0)
        return 0;
    return kt_errorf(err, errlen, "tensor '%s' holds a non-finite %s (NaN or infinity) at %s %lld",
                t->name, scale ? "block scale" : "value", scale ? "block" : "element",
                (long long)at);
}

/* A matrix [k -> n_out] (ggml ne = [k, n_out]). */
static int matrix(kt_model *md, int layer, int role, const char *name, int k, int n_out,
                  kt_weight *w, char *err, size_t errlen) {
    int failed = 0;
    const gguf_tensor *t = find(md, layer, name, 1, err, errlen, &failed);
    if (!t)
        return -1;
    if (t->ne[0] != k || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return kt_errorf(err, errlen, "tensor '%s': shape [%lld, %lld, %lld, %lld], expected [%d, %d]",
                    t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], k, n_out);
    if (check_finite(t, err, errlen))
        return -1;
    w->type = t->type;
    w->k = k;
    w->n_out = n_out;
    w->row_bytes = (size_t)gguf_row_bytes(t->type, k);
    w->data = t->data;
    w->nbytes = (size_t)t->nbytes;
    add_ref(md, layer, role, t);
    return 0;
}

/* A vector (or a small matrix read whole) of n floats, converted to float32. */
static int vector(kt_model *md, int layer, int role, const char *name, int64_t ne0, int64_t ne1,
                  const float **out, char *err, size_t errlen) {
    int failed = 0;
    const gguf_tensor *t = find(md, layer, name, 1, err, errlen, &failed);
    if (!t)
        return -1;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return kt_errorf(err, errlen, "tensor '%s': shape [%lld, %lld], expected [%lld, %lld]", t->name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
    float *v = malloc((size_t)(ne0 * ne1) * sizeof(float));
    if (!v)
        return kt_errorf(err, errlen, "out of memory");
    md->owned[md->n_owned++] = v;
    for (int64_t r = 0; r < ne1; r++)
        dequant_row(t->type, (const uint8_t *)t->data + r * gguf_row_bytes(t->type, ne0), (int)ne0,
                    v + r * ne0);
    for (int64_t i = 0; i < ne0 * ne1; i++)
        if (!isfinite(v[i]))
            return kt_errorf(err, errlen, "tensor '%s' holds a non-finite value (NaN or infinity) at "
                        "element %lld", t->name, (long long)i);
    *out = v;
    add_ref(md, layer, role, t);
    return 0;
}

/* [rows][cols] -> [cols][rows] in place (a float copy the model owns). */
static int transpose_owned(float *v, int rows, int cols, char *err, size_t errlen) {
    float *t = malloc((size_t)rows * cols * sizeof(float));
    if (!t)
        return kt_errorf(err, errlen, "out of memory");
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            t[(size_t)c * rows + r] = v[(size_t)r * cols + c];
    memcpy(v, t, (size_t)rows * cols * sizeof(float));
    free(t);
    return 0;
}

static int load_tensors(kt_model *md, char *err, size_t errlen) {
    const kt_hparams *hp = &md->hp;
    const int E = hp->n_embd, H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim;
    const int C = hp->ssm_channels, Hv = hp->ssm_hv, dv = hp->ssm_dv, K = hp->ssm_conv;
    int failed = 0;
    size_t max_refs = 3 + (size_t)hp->n_layer * 20;
    md->refs = calloc(max_refs, sizeof *md->refs);
    md->owned = calloc(max_refs, sizeof *md->owned);
    md->layers = calloc((size_t)hp->n_layer, sizeof *md->layers);
    if (!md->refs || !md->owned || !md->layers)
        return kt_errorf(err, errlen, "out of memory");

    const gguf_tensor *te = find(md, -1, "token_embd.weight", 1, err, errlen, &failed);
    if (!te)
        return -1;
    if (te->ne[1] > KT_DIM_MAX)
        return kt_errorf(err, errlen, "token_embd.weight: vocabulary of %lld is too large",
                    (long long)te->ne[1]);
    hp = &md->hp;
    md->hp.n_vocab = (int)te->ne[1];
    const int V = md->hp.n_vocab;
    if (matrix(md, -1, KCUDA_W_TOKEN_EMBD, "token_embd.weight", E, V, &md->token_embd, err, errlen))
        return -1;
    if (vector(md, -1, KCUDA_W_OUTPUT_NORM, "output_norm.weight", E, 1, &md->output_norm, err,
               errlen))
        return -1;
    if (gguf_find_tensor(&md->gguf, "output.weight")) {
        if (matrix(md, -1, KCUDA_W_OUTPUT, "output.weight", E, V, &md->output, err, errlen))
            return -1;
    } else {
        md->output = md->token_embd;
        md->tied = 1;
    }
    if (md->hp.n_ff == 0) { /* feed_forward_length is optional: take it from the tensor */
        const gguf_tensor *g0 = find(md, 0, "ffn_gate.weight", 1, err, errlen, &failed);
        if (!g0)
            return -1;
        if (g0->ne[1] > KT_DIM_MAX)
            return kt_errorf(err, errlen, "ffn_gate.weight too large");
        md->hp.n_ff = (int)g0->ne[1];
    }
    const int F = md->hp.n_ff;
    for (int il = 0; il < md->hp.n_layer; il++) {
        kt_layer *L = &md->layers[il];
        L->recurrent = md->layer_recurrent[il];
        L->state_index = L->recurrent ? md->n_rec++ : md->n_full++;
        if (vector(md, il, KCUDA_W_ATTN_NORM, "attn_norm.weight", E, 1, &L->attn_norm, err, errlen) ||
            vector(md, il, KCUDA_W_POST_ATTN_NORM, "post_attention_norm.weight", E, 1,
                   &L->post_attn_norm, err, errlen) ||
            matrix(md, il, KCUDA_W_FFN_GATE, "ffn_gate.weight", E, F, &L->ffn_gate, err, errlen) ||
            matrix(md, il, KCUDA_W_FFN_UP, "ffn_up.weight", E, F, &L->ffn_up, err, errlen) ||
            matrix(md, il, KCUDA_W_FFN_DOWN, "ffn_down.weight", F, E, &L->ffn_down, err, errlen))
            return -1;
        if (L->recurrent) {
            if (matrix(md, il, KCUDA_W_SSM_QKV, "attn_qkv.weight", E, C, &L->ssm_qkv, err, errlen) ||
                matrix(md, il, KCUDA_W_SSM_GATE, "attn_gate.weight", E, Hv * dv, &L->ssm_gate, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_SSM_BETA, "ssm_beta.weight", E, Hv, &L->ssm_beta, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_SSM_ALPHA, "ssm_alpha.weight", E, Hv, &L->ssm_alpha, err,
                       errlen) ||
                vector(md, il, KCUDA_W_SSM_A, "ssm_a", Hv, 1, &L->ssm_a, err, errlen) ||
                vector(md, il, KCUDA_W_SSM_DT_BIAS, "ssm_dt.bias", Hv, 1, &L->ssm_dt_bias, err,
                       errlen) ||
                vector(md, il, KCUDA_W_SSM_CONV1D, "ssm_conv1d.weight", K, C, &L->ssm_conv1d, err,
                       errlen) ||
                vector(md, il, KCUDA_W_SSM_NORM, "ssm_norm.weight", dv, 1, &L->ssm_norm, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_SSM_OUT, "ssm_out.weight", Hv * dv, E, &L->ssm_out, err,
                       errlen) ||
                transpose_owned((float *)L->ssm_conv1d, C, K, err, errlen))
                return -1;
        } else {
            if (matrix(md, il, KCUDA_W_ATTN_Q, "attn_q.weight", E, 2 * H * D, &L->attn_q, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_ATTN_K, "attn_k.weight", E, Hkv * D, &L->attn_k, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_ATTN_V, "attn_v.weight", E, Hkv * D, &L->attn_v, err,
                       errlen) ||
                matrix(md, il, KCUDA_W_ATTN_OUTPUT, "attn_output.weight", H * D, E,
                       &L->attn_output, err, errlen) ||
                vector(md, il, KCUDA_W_ATTN_Q_NORM, "attn_q_norm.weight", D, 1, &L->attn_q_norm,
                       err, errlen) ||
                vector(md, il, KCUDA_W_ATTN_K_NORM, "attn_k_norm.weight", D, 1, &L->attn_k_norm,
                       err, errlen))
                return -1;
        }
    }
    for (uint64_t i = 0; i < md->gguf.n_tensors; i++) {
        const gguf_tensor *t = &md->gguf.tensors[i];
        md->weight_bytes += t->nbytes;
        if (t->type >= 0 && t->type < 31)
            md->type_count[t->type]++;
    }
    return 0;
}

/* Common part of the two loaders, once md->gguf is open. */
static int load_opened(kt_model *md, const char *path, int ctx_len, char *err, size_t errlen) {
    if (gguf_get_str(&md->gguf, "general.architecture", md->arch, sizeof md->arch) != 0) {
        kt_errorf(err, errlen, "'%s': missing or bad metadata 'general.architecture'", path);
        kt_model_free(md);
        return -1;
    }
    if (strcmp(md->arch, "qwen35") != 0) {
        kt_errorf(err, errlen, "'%s': architecture '%s' is not supported (only qwen35)", path, md->arch);
        kt_model_free(md);
        return -1;
    }
    char inner[512];
    if (read_hparams(md, ctx_len, inner, sizeof inner) || load_tensors(md, inner, sizeof inner)) {
        kt_errorf(err, errlen, "'%s': %s", path, inner);
        kt_model_free(md);
        return -1;
    }
    return 0;
}

int kt_model_load(kt_model *md, const char *path, int ctx_len, char *err, size_t errlen) {
    memset(md, 0, sizeof *md);
    if (gguf_open_file(&md->gguf, path, err, errlen))
        return -1;
    return load_opened(md, path, ctx_len, err, errlen);
}

int kt_model_load_memory(kt_model *md, const void *data, size_t size, int ctx_len, char *err,
                         size_t errlen) {
    memset(md, 0, sizeof *md);
    if (gguf_open_memory(&md->gguf, data, size, err, errlen))
        return -1;
    return load_opened(md, "(memory)", ctx_len, err, errlen);
}

/* ---- prepare: RoPE tables, threads ------------------------------------------------------- */

int kt_model_prepare(kt_model *md, int n_threads, int max_m, char *err, size_t errlen) {
    const kt_hparams *hp = &md->hp;
    const int half = hp->n_rot / 2;
    md->max_m = max_m < 1 ? 1 : max_m;
    free(md->rope_cos);
    free(md->rope_sin);
    md->rope_cos = malloc((size_t)hp->max_pos * (half ? half : 1) * sizeof(float));
    md->rope_sin = malloc((size_t)hp->max_pos * (half ? half : 1) * sizeof(float));
    if (!md->rope_cos || !md->rope_sin)
        return kt_errorf(err, errlen, "out of memory for RoPE tables");
    for (int i = 0; i < half; i++) {
        double inv_freq = kite_pow((double)hp->rope_base, (double)(-2 * i) / (double)hp->n_rot);
        for (int p = 0; p < hp->max_pos; p++) {
            double angle = (double)p * inv_freq;
            md->rope_cos[(size_t)p * half + i] = (float)kite_cos(angle);
            md->rope_sin[(size_t)p * half + i] = (float)kite_sin(angle);
        }
    }
    if (!md->pool) {
        md->pool = kt_pool_create(n_threads);
        if (!md->pool)
            return kt_errorf(err, errlen, "cannot create the thread pool");
    }
    md->resident = 0;
    return 0;
}

void kt_model_free(kt_model *md) {
    for (int i = 0; i < md->n_owned; i++)
        free(md->owned[i]);
    free(md->owned);
    free(md->refs);
    free(md->layers);
    free(md->layer_recurrent);
    free(md->rope_cos);
    free(md->rope_sin);
    kt_pool_free(md->pool);
    gguf_close(&md->gguf);
    memset(md, 0, sizeof *md);
}

/* ---- sequence state -------------------------------------------------------------------------- */

static float *fbuf(size_t n, int *ok) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p)
        *ok = 0;
    return p;
}

int kt_state_init(kt_state *st, const kt_model *md, char *err, size_t errlen) {
    const kt_hparams *hp = &md->hp;
    const size_t M = (size_t)md->max_m;
    const size_t E = hp->n_embd, F = hp->n_ff, C = hp->ssm_channels;
    const size_t HD = (size_t)hp->n_head * hp->head_dim, KVD = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t VD = (size_t)hp->ssm_hv * hp->ssm_dv;
    size_t big = 2 * HD;
    if (C > big) big = C;
    if (F > big) big = F;
    size_t mix = HD > VD ? HD : VD;
    const size_t nt = (size_t)kt_pool_size(md->pool); /* attention heads run on every thread */
    int ok = 1;
    memset(st, 0, sizeof *st);
    /* the largest buffers, in double to see an overflow of size_t before it happens */
    double kv_floats = (double)md->n_full * hp->max_pos * (double)KVD;
    double ssm_floats = (double)md->n_rec * hp->ssm_hv * (double)hp->ssm_dv * hp->ssm_dk;
    double big_floats = (double)M * (double)(big > mix ? big : mix);
    if (kv_floats > 1e12 || ssm_floats > 1e12 || big_floats > 1e12)
        return kt_errorf(err, errlen, "the sequence state would be too large");
    st->k_cache = fbuf((size_t)md->n_full * hp->max_pos * KVD, &ok);
    st->v_cache = fbuf((size_t)md->n_full * hp->max_pos * KVD, &ok);
    st->conv_state = fbuf((size_t)md->n_rec * (hp->ssm_conv - 1) * C, &ok);
    st->ssm_state = fbuf((size_t)md->n_rec * hp->ssm_hv * hp->ssm_dv * hp->ssm_dk, &ok);
    st->history = calloc((size_t)hp->max_pos, sizeof(int32_t));
    if (!st->history)
        ok = 0;
    st->x = fbuf(M * E, &ok);
    st->xn = fbuf(M * E, &ok);
    st->out = fbuf(M * E, &ok);
    st->big = fbuf(M * big, &ok);
    st->k = fbuf(M * KVD, &ok);
    st->v = fbuf(M * KVD, &ok);
    st->z = fbuf(M * VD, &ok);
    st->beta = fbuf(M * hp->ssm_hv, &ok);
    st->alpha = fbuf(M * hp->ssm_hv, &ok);
    st->mix = fbuf(M * mix, &ok);
    st->up = fbuf(M * F, &ok);
    st->scores = fbuf(nt * hp->max_pos, &ok);
    st->lanes = fbuf(nt * 32 * hp->head_dim, &ok);
    st->gemm.pool = md->pool;
    if (!ok) {
        kt_state_free(st);
        return kt_errorf(err, errlen, "out of memory for the sequence state");
    }
    st->device = -1;
    return 0;
}

/* Zero the recurrent state; the KV cache is only read below the current position. */
void kt_state_reset(kt_state *st, const kt_model *md) {
    const kt_hparams *hp = &md->hp;
    memset(st->conv_state, 0,
           (size_t)md->n_rec * (hp->ssm_conv - 1) * hp->ssm_channels * sizeof(float));
    memset(st->ssm_state, 0,
           (size_t)md->n_rec * hp->ssm_hv * hp->ssm_dv * hp->ssm_dk * sizeof(float));
    st->pos = 0;
    st->device = -1;
}

void kt_state_free(kt_state *st) {
    free(st->k_cache); free(st->v_cache); free(st->conv_state); free(st->ssm_state);
    free(st->history); free(st->x); free(st->xn); free(st->out); free(st->big);
    free(st->k); free(st->v); free(st->z); free(st->beta); free(st->alpha); free(st->mix);
    free(st->up); free(st->scores); free(st->lanes);
    gemm_ctx_free(&st->gemm);
    memset(st, 0, sizeof *st);
}
