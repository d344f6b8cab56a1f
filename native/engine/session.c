/* session.c - where each pass runs: on the device when the model is resident there, else the
 * CPU forward pass (forward.c). See session.h. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "kite_cuda.h"

/* ---- the model on the device ------------------------------------------------------------------ */

/* Upload the model once (kc_model_begin / kc_model_tensor / kc_model_ready); any refusal leaves
 * it on the CPU (md->resident = 0). */
static void device_upload(kt_model *md) {
    const kt_hparams *hp = &md->hp;
    int32_t h[KCUDA_HP_COUNT];
    h[KCUDA_HP_N_LAYER] = hp->n_layer;
    h[KCUDA_HP_N_EMBD] = hp->n_embd;
    h[KCUDA_HP_N_VOCAB] = hp->n_vocab;
    h[KCUDA_HP_N_FF] = hp->n_ff;
    h[KCUDA_HP_N_HEAD] = hp->n_head;
    h[KCUDA_HP_N_HEAD_KV] = hp->n_head_kv;
    h[KCUDA_HP_HEAD_DIM] = hp->head_dim;
    h[KCUDA_HP_N_ROT] = hp->n_rot;
    h[KCUDA_HP_SSM_CONV] = hp->ssm_conv;
    h[KCUDA_HP_SSM_DK] = hp->ssm_dk;
    h[KCUDA_HP_SSM_HK] = hp->ssm_hk;
    h[KCUDA_HP_SSM_HV] = hp->ssm_hv;
    h[KCUDA_HP_SSM_DV] = hp->ssm_dv;
    h[KCUDA_HP_MAX_POS] = hp->max_pos;
    if (!kc_model_begin(h, KCUDA_HP_COUNT, md->layer_recurrent, hp->eps))
        return;
    for (int i = 0; i < md->n_refs; i++) {
        const gguf_tensor *t = md->refs[i].t;
        if (!kc_model_tensor(md->refs[i].layer, md->refs[i].role, t->type, t->data, t->ne[0],
                             t->ne[1], (int64_t)t->nbytes))
            return;
    }
    md->resident = kc_model_ready(md->rope_cos, md->rope_sin, hp->max_pos, hp->n_rot / 2,
                                  md->max_m) ? 1 : 0;
}

int kt_session_prepare(kt_model *md, int n_threads, int max_m, char *err, size_t errlen) {
    if (kt_model_prepare(md, n_threads, max_m, err, errlen))
        return -1;
    if (kc_available())
        device_upload(md);
    return 0;
}

void kt_session_reset(kt_state *st, kt_model *md) {
    kt_state_reset(st, md);
    if (md->resident && !kc_seq_reset())
        st->device = 0; /* the device could not start a sequence: this one runs on the CPU */
}

/* ---- one pass: the device first, else the CPU -------------------------------------------------- */

/* The device refused mid-sequence: rebuild the CPU state from position 0. */
static int cpu_catch_up(const kt_model *md, kt_state *st, int upto) {
    const size_t E = md->hp.n_embd, V = md->hp.n_vocab;
    float *h = malloc((size_t)md->max_m * E * sizeof(float));
    float *l = malloc((size_t)md->max_m * V * sizeof(float));
    int rc = (h && l) ? 0 : -1;
    kt_state_reset(st, md);
    for (int p = 0; rc == 0 && p < upto; p += md->max_m) {
        int m = upto - p < md->max_m ? upto - p : md->max_m;
        rc = kt_forward_rows(md, st, st->history + p, m, p, h, l);
    }
    st->pos = upto;
    free(h);
    free(l);
    return rc;
}

/* n tokens at the next positions in passes of m rows: the checks both entries make */
static int rows_check(const kt_model *md, const kt_state *st, const int32_t *tokens, int n, int m,
                      char *err, size_t errlen) {
    if (m < 1 || m > md->max_m)
        return kt_errorf(err, errlen, "%d rows in one pass (1 to %d prepared)", m, md->max_m);
    if (n < 1 || st->pos + n > md->hp.max_pos)
        return kt_errorf(err, errlen, "position %d is past the context length %d", st->pos + n - 1,
                    md->hp.max_pos);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= md->hp.n_vocab)
            return kt_errorf(err, errlen, "token id %d is outside the vocabulary (%d)", tokens[i],
                        md->hp.n_vocab);
    return 0;
}

/* The device did n rows in passes of m: a pass of one row counts as a step, of more as an
 * M-row call; the sequence now lives on the device. */
static void rows_done_on_device(kt_model *md, kt_state *st, const int32_t *tokens, int n, int m) {
    st->device = 1;
    for (int r = 0; r < n; r += m) {
        if (n - r == 1 || m == 1)
            md->counters.gpu_steps++;
        else
            md->counters.mrow_calls++;
    }
    memcpy(st->history + st->pos, tokens, (size_t)n * sizeof(int32_t));
    st->pos += n;
}

int kt_process_rows(kt_model *md, kt_state *st, const int32_t *tokens, int m, float *h_out,
                    float *logits, char *err, size_t errlen) {
    const int pos = st->pos;
    if (rows_check(md, st, tokens, m, m, err, errlen))
        return -1;
    if (md->resident && st->device != 0) {
        int done = m == 1 ? kc_step(tokens[0], pos, h_out, logits)
                          : kc_step_m(tokens, m, pos, h_out, logits);
        if (done) {
            rows_done_on_device(md, st, tokens, m, m);
            return 0;
        }
        if (st->device == 1) {
            fprintf(stderr, "kite: warning: the device refused %d row(s) at position %d in the "
                            "middle of a sequence; recomputing the sequence on the CPU\n", m, pos);
            if (cpu_catch_up(md, st, pos))
                return kt_errorf(err, errlen, "out of memory while recomputing on the CPU");
        }
        st->device = 0;
    }
    if (kt_forward_rows(md, st, tokens, m, pos, h_out, logits))
        return kt_errorf(err, errlen, "out of memory in the forward pass");
    md->counters.cpu_steps += m;
    if (m > 1)
        md->counters.cpu_mrow_calls++;
    memcpy(st->history + pos, tokens, (size_t)m * sizeof(int32_t));
    st->pos += m;
    return 0;
}

int kt_process_prompt(kt_model *md, kt_state *st, const int32_t *tokens, int n, int m,
                      float *h_out, float *logits, int ring, char *err, size_t errlen) {
    const size_t E = md->hp.n_embd, V = md->hp.n_vocab;
    if (rows_check(md, st, tokens, n, m, err, errlen))
        return -1;
    if (ring < n && (ring < m || ring % m != 0))
        return kt_errorf(err, errlen, "%d output rows for passes of %d rows", ring, m);
    if (md->resident && st->device != 0 &&
        kc_prompt(tokens, n, m, st->pos, h_out, logits, ring)) {
        rows_done_on_device(md, st, tokens, n, m);
        return 0;
    }
    /* pass by pass: the device for each pass if it takes it, else the CPU */
    for (int r = 0; r < n; r += m) {
        const size_t o = (size_t)(r % ring);
        if (kt_process_rows(md, st, tokens + r, n - r < m ? n - r : m, h_out + o * E,
                            logits + o * V, err, errlen))
            return -1;
    }
    return 0;
}
