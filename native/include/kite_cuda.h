/* kite_cuda.h - the run-time ABI between the kite engine and its optional CUDA module.
 *
 * Pure C: opaque handles, fixed-width scalars and pointers only, so that an engine built by
 * one toolchain (gcc, clang, MinGW) binds a module built by another (nvcc + gcc or MSVC).
 * Every export carries the prefix kcuda_. The engine never includes CUDA headers; this file
 * is the whole contract. Change it only together with KCUDA_ABI_VERSION.
 *
 * Status convention INSIDE the module: 0 = success, non-zero = a cudaError_t value (e.g. 35,
 * no driver) or one of KCUDA_E_* (negative). The engine's host layer (cuda_host.c) translates
 * that into the offload contract: 1 = done on the GPU, 0 = caller runs the CPU path.
 */
#ifndef KITE_CUDA_H
#define KITE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define KCUDA_ABI_VERSION 2

#if defined(_WIN32)
#  if defined(KCUDA_BUILD)
#    define KCUDA_API __declspec(dllexport)
#  else
#    define KCUDA_API
#  endif
#else
#  define KCUDA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A model resident on the device. */
typedef struct kcuda_model kcuda_model;

/* Module-level status codes besides cudaError_t values. */
enum {
    KCUDA_OK = 0,
    KCUDA_E_UNSUPPORTED = -1, /* shape / type / option the module does not handle */
    KCUDA_E_ARG = -2,         /* bad argument */
    KCUDA_E_STATE = -3,       /* call out of order (e.g. step before prepare) */
    KCUDA_E_NODEVICE = -4     /* init did not succeed */
};

/* Tensor types: ggml's numbering. */
enum {
    KCUDA_T_F32 = 0,
    KCUDA_T_F16 = 1,
    KCUDA_T_Q4_0 = 2,
    KCUDA_T_Q8_0 = 8,
    KCUDA_T_BF16 = 30
};

/* Options set by the host before kcuda_model_prepare (values read from the environment by the
 * host; the module never reads the environment). One gate per feature. */
enum {
    KCUDA_OPT_GRAPH = 1,   /* CUDA graph for the M=1 step (default 1) */
    KCUDA_OPT_GRAPH_M = 2  /* per-M graphs for the M-row step (default 0) */
};

/* Hyper-parameters, passed as an int32 array indexed by these. */
enum {
    KCUDA_HP_N_LAYER = 0,
    KCUDA_HP_N_EMBD,      /* E */
    KCUDA_HP_N_VOCAB,     /* V */
    KCUDA_HP_N_FF,        /* F */
    KCUDA_HP_N_HEAD,      /* H */
    KCUDA_HP_N_HEAD_KV,   /* Hkv */
    KCUDA_HP_HEAD_DIM,    /* D */
    KCUDA_HP_N_ROT,       /* rotated dims per head */
    KCUDA_HP_SSM_CONV,    /* K, conv taps */
    KCUDA_HP_SSM_DK,      /* linear key head dim */
    KCUDA_HP_SSM_HK,      /* linear key heads */
    KCUDA_HP_SSM_HV,      /* linear value heads */
    KCUDA_HP_SSM_DV,      /* linear value head dim */
    KCUDA_HP_MAX_POS,     /* KV cache length */
    KCUDA_HP_COUNT
};

/* Tensor roles. Global roles use layer -1. */
enum {
    KCUDA_W_TOKEN_EMBD = 0,
    KCUDA_W_OUTPUT_NORM,
    KCUDA_W_OUTPUT,          /* absent when tied: the module uses TOKEN_EMBD */
    KCUDA_W_ATTN_NORM,
    KCUDA_W_POST_ATTN_NORM,
    KCUDA_W_FFN_GATE,
    KCUDA_W_FFN_UP,
    KCUDA_W_FFN_DOWN,
    KCUDA_W_ATTN_Q,          /* [E, 2*H*D], query and gate interleaved per head */
    KCUDA_W_ATTN_K,
    KCUDA_W_ATTN_V,
    KCUDA_W_ATTN_OUTPUT,
    KCUDA_W_ATTN_Q_NORM,
    KCUDA_W_ATTN_K_NORM,
    KCUDA_W_SSM_QKV,
    KCUDA_W_SSM_GATE,
    KCUDA_W_SSM_BETA,
    KCUDA_W_SSM_ALPHA,
    KCUDA_W_SSM_A,
    KCUDA_W_SSM_DT_BIAS,
    KCUDA_W_SSM_CONV1D,
    KCUDA_W_SSM_NORM,
    KCUDA_W_SSM_OUT,
    KCUDA_W_COUNT
};

/* Counters kept by the module per model (kcuda_model_counters fills int64[KCUDA_C_COUNT]). */
enum {
    KCUDA_C_STEPS = 0,        /* M=1 steps done on the device */
    KCUDA_C_GRAPH_CAPTURES,
    KCUDA_C_GRAPH_REPLAYS,    /* M=1 graph launches */
    KCUDA_C_STREAM_STEPS,     /* M=1 steps launched kernel by kernel */
    KCUDA_C_MROW_CALLS,       /* M-row steps done on the device */
    KCUDA_C_MROW_GRAPH_REPLAYS,
    KCUDA_C_GEMM_CALLS,       /* per-op gemm_gw offloads done */
    KCUDA_C_COUNT
};

/* The entry points, one table. The engine binds every one of them or none (all or nothing);
 * the module exports exactly these. X(return type, name, parameter list). */
#define KCUDA_ENTRY_POINTS(X)                                                                  \
    X(int32_t, kcuda_abi_version, (void))                                                      \
    X(int32_t, kcuda_init, (char *note, int32_t note_len))                                     \
    X(void, kcuda_shutdown, (void))                                                            \
    X(int32_t, kcuda_device_info, (char *name, int32_t name_len, int32_t *cc_major,            \
                                   int32_t *cc_minor, int64_t *mem_total,                      \
                                   int32_t *driver_version, int32_t *runtime_version))         \
    X(int32_t, kcuda_set_option, (int32_t key, int64_t value))                                 \
    X(int32_t, kcuda_gemm_gw, (int32_t wtype, const void *w, int64_t w_bytes, int32_t n_out,   \
                               int32_t k, const int8_t *xq, const float *xd, int32_t m,        \
                               float *y))                                                      \
    X(kcuda_model *, kcuda_model_create, (const int32_t *hp, int32_t n_hp,                     \
                                          const int32_t *layer_recurrent, float eps))          \
    X(int32_t, kcuda_model_set_tensor, (kcuda_model *mdl, int32_t layer, int32_t role,         \
                                        int32_t type, const void *data, int64_t ne0,           \
                                        int64_t ne1, int64_t nbytes))                          \
    X(int32_t, kcuda_model_set_rope, (kcuda_model *mdl, const float *cos_tab,                  \
                                      const float *sin_tab, int32_t max_pos, int32_t half_rot)) \
    X(int32_t, kcuda_model_prepare, (kcuda_model *mdl, int32_t max_m))                         \
    X(int32_t, kcuda_seq_reset, (kcuda_model *mdl))                                            \
    X(int32_t, kcuda_step, (kcuda_model *mdl, int32_t token, int32_t pos, float *h_out,        \
                            float *logits))                                                    \
    X(int32_t, kcuda_step_m, (kcuda_model *mdl, const int32_t *tokens, int32_t m, int32_t pos, \
                              float *h_out, float *logits))                                    \
    X(int32_t, kcuda_prompt, (kcuda_model *mdl, const int32_t *tokens, int32_t n, int32_t m,   \
                              int32_t pos, float *h_out, float *logits, int32_t ring))         \
    X(int32_t, kcuda_model_counters, (kcuda_model *mdl, int64_t *out, int32_t n))              \
    X(void, kcuda_model_free, (kcuda_model *mdl))

/* Semantics (each returns 0 on success unless said otherwise):
 *  kcuda_abi_version   KCUDA_ABI_VERSION the module was built with; the engine refuses any other.
 *  kcuda_init          pick device 0, create the stream; note gets a one-line reason either way
 *                      ("cudart error 35: CUDA driver version is insufficient..." on a machine
 *                      without a driver). Safe to call once; never aborts.
 *  kcuda_shutdown      free everything; after it the library may be closed.
 *  kcuda_gemm_gw       y[m][n_out] = W[n_out][k] . x[m][k], W in Q8_0/Q4_0 blocks (host memory,
 *                      w_bytes long; the module may cache it by pointer), x as int8 blocks of 32
 *                      (xq[m][k]) with one float scale per block (xd[m][k/32]). Canonical order.
 *  kcuda_model_create  NULL on failure. layer_recurrent[il] = 1 for Gated DeltaNet layers.
 *  kcuda_model_set_tensor   upload one tensor (ggml ne0/ne1; 1-D tensors have ne1 = 1).
 *  kcuda_model_set_rope     host-computed tables [max_pos][half_rot] (cos, sin), so that CPU
 *                      and GPU use the same bits.
 *  kcuda_model_prepare allocate KV cache, recurrent state and scratch for up to max_m rows;
 *                      fails with KCUDA_E_STATE if a required tensor is missing.
 *  kcuda_seq_reset     zero KV cache and recurrent state, position 0; captures the M=1 graph
 *                      (and per-M graphs) here when their gates are on: never in a step.
 *  kcuda_step          one token at position pos: h_out[E] (final-norm hidden) and logits[V].
 *  kcuda_step_m        m tokens at positions pos..pos+m-1: h_out[m][E], logits[m][V]; same
 *                      bytes as m calls of kcuda_step.
 *  kcuda_prompt        n tokens at positions pos..pos+n-1 in passes of m rows (the last one
 *                      shorter when m does not divide n), queued back to back: the device
 *                      runs a pass while the host copies out the one before. Row r's h_out[E]
 *                      and logits[V] go to row r % ring of h_out / logits (ring >= n, or a
 *                      multiple of m). Same bytes, graphs and counters as one call per pass
 *                      (kcuda_step for a pass of one row, kcuda_step_m for more).
 */

#ifdef __cplusplus
}
#endif

#endif /* KITE_CUDA_H */
