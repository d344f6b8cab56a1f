/* model.h - the Qwen3.5 text model ("qwen35" GGUF): weights, hyper-parameters, sequence state.
 *
 * Life cycle (session.h drives it and adds the device):
 *   kt_model_load      map the GGUF, read the hyper-parameters, find and check every tensor;
 *   kt_model_prepare   RoPE tables, thread pool, scratch for up to max_m rows;
 *   kt_state_init      the sequence state; kt_state_reset starts a new sequence.
 */
#ifndef KITE_MODEL_H
#define KITE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gemm.h"
#include "gguf.h"
#include "threads.h"

#define KT_CTX_DEFAULT 4096

typedef struct kt_hparams {
    int n_layer;      /* main layers (MTP blocks excluded) */
    int n_embd;       /* E */
    int n_vocab;      /* V */
    int n_ff;         /* F */
    int n_head;       /* H */
    int n_head_kv;    /* Hkv */
    int head_dim;     /* D */
    int n_rot;        /* rotated dims per head (even, <= D) */
    int ssm_conv;     /* K, conv taps */
    int ssm_dk;       /* linear key head dim */
    int ssm_hk;       /* linear key heads */
    int ssm_hv;       /* linear value heads */
    int ssm_dv;       /* linear value head dim */
    int ssm_channels; /* C = 2 Hk dk + Hv dv */
    int max_pos;      /* KV cache length */
    float eps;        /* every RMSNorm and the L2 norms */
    float rope_base;
} kt_hparams;

typedef struct kt_layer {
    int recurrent;        /* 1 = Gated DeltaNet, 0 = gated full attention */
    int state_index;      /* index among the layers of its kind */
    const float *attn_norm, *post_attn_norm;         /* [E] */
    kt_weight ffn_gate, ffn_up, ffn_down;
    /* full attention */
    kt_weight attn_q;     /* [E -> 2 H D], query and gate interleaved per head */
    kt_weight attn_k, attn_v;                        /* [E -> Hkv D] */
    kt_weight attn_output;                           /* [H D -> E] */
    const float *attn_q_norm, *attn_k_norm;          /* [D] */
    /* Gated DeltaNet */
    kt_weight ssm_qkv;    /* [E -> C] */
    kt_weight ssm_gate;   /* [E -> Hv dv] (z) */
    kt_weight ssm_beta, ssm_alpha;                   /* [E -> Hv] */
    kt_weight ssm_out;    /* [Hv dv -> E] */
    const float *ssm_a, *ssm_dt_bias;                /* [Hv] */
    const float *ssm_conv1d;  /* [K][C] (the file's [C][K] transposed at load), tap K-1 = current row */
    const float *ssm_norm;                           /* [dv] */
} kt_layer;

/* The tensors as stored, for the device upload and the meta data. */
typedef struct kt_tensor_ref {
    int layer;            /* -1 for global tensors */
    int role;             /* KCUDA_W_* */
    const gguf_tensor *t;
} kt_tensor_ref;

typedef struct kt_counters {
    int64_t gpu_steps;      /* M=1 rows done on the device */
    int64_t cpu_steps;      /* rows done by the CPU path */
    int64_t mrow_calls;     /* M-row passes done on the device */
    int64_t cpu_mrow_calls; /* M-row passes (m > 1) done on the CPU */
} kt_counters;

typedef struct kt_model {
    gguf_file gguf;
    char arch[64];
    kt_hparams hp;
    kt_layer *layers;
    int32_t *layer_recurrent;  /* [n_layer] */
    int n_full, n_rec;
    kt_weight token_embd, output; /* output = token_embd when tied */
    int tied;
    const float *output_norm;
    kt_tensor_ref *refs;
    int n_refs;
    float **owned;             /* float copies of vectors, freed at close */
    int n_owned;
    uint64_t weight_bytes;
    int type_count[31];        /* tensors per ggml type */
    /* prepare */
    float *rope_cos, *rope_sin; /* [max_pos][n_rot / 2] */
    kt_pool *pool;
    int max_m;
    int resident;              /* uploaded to the device (session.c) */
    kt_counters counters;      /* where the rows ran (session.c) */
} kt_model;

/* Sequence state: KV cache, conv and recurrent state, scratch for max_m rows. */
typedef struct kt_state {
    int pos;
    int device;                /* -1 undecided, 0 this sequence runs on the CPU, 1 on the device */
    float *k_cache, *v_cache;  /* [n_full][max_pos][Hkv D] */
    float *conv_state;         /* [n_rec][K-1][C]: the last K-1 conv inputs, oldest first */
    float *ssm_state;          /* [n_rec][Hv][dv][dk] */
    int32_t *history;          /* tokens processed so far [max_pos] */
    /* scratch, [max_m][...] */
    float *x, *xn, *out;       /* E */
    float *big;                /* max(2 H D, C, F) */
    float *k, *v;              /* Hkv D */
    float *z;                  /* Hv dv */
    float *beta, *alpha;       /* Hv */
    float *mix;                /* max(H D, Hv dv) */
    float *up;                 /* F */
    float *scores;             /* per pool thread: max_pos */
    float *lanes;              /* per pool thread: 32 x D, the attention output lanes */
    kt_gemm_ctx gemm;
} kt_state;

/* 0 on success; -1 with a message (the model is then closed). */
/* Formats a message into err (as snprintf) and returns -1: `return kt_errorf(err, n, "...", ...);`. */
int kt_errorf(char *err, size_t errlen, const char *fmt, ...);
int kt_model_load(kt_model *md, const char *path, int ctx_len, char *err, size_t errlen);
/* The same from a GGUF image in memory (selftest, fuzzing); data must outlive the model. */
int kt_model_load_memory(kt_model *md, const void *data, size_t size, int ctx_len, char *err,
                         size_t errlen);
int kt_model_prepare(kt_model *md, int n_threads, int max_m, char *err, size_t errlen);
void kt_model_free(kt_model *md);

int kt_state_init(kt_state *st, const kt_model *md, char *err, size_t errlen);
void kt_state_reset(kt_state *st, const kt_model *md);
void kt_state_free(kt_state *st);

#endif
