/* cuda_host.h - the engine's side of the optional CUDA module.
 *
 * Two implementations, chosen by the CMake option KITE_CUDA:
 *   cuda_host.c  (ON)  finds libkite_cuda.so / kite_cuda.dll at run time, binds every kcuda_
 *                      entry or none, and translates the module's 0 = success into the
 *                      offload contract below;
 *   cuda_stub.c  (OFF) harmless stubs: nothing is ever available.
 * Either way the engine compiles no CUDA header and links no CUDA library.
 *
 * Offload contract: every kc_ offload returns 1 = done on the GPU (outputs filled) or
 * 0 = the caller runs the CPU path and recomputes everything itself.
 * kc_init never fails the caller: a missing module is a normal state.
 */
#ifndef KITE_CUDA_HOST_H
#define KITE_CUDA_HOST_H

#include <stdint.h>

#define KC_PATH_MAX 1024

typedef struct kc_search_step {
    char how[16];              /* "KITE_CUDA_LIB", "exe_dir", "system" */
    char path[KC_PATH_MAX];    /* what was tried ("" when the step did not apply) */
    char result[128];          /* "not set", "not found", "loaded", "load failed: ..." */
} kc_search_step;

typedef struct kc_info {
    int compiled;              /* 1 = real loader (KITE_CUDA=ON), 0 = stub build */
    int n_search;
    kc_search_step search[3];
    char loaded_path[KC_PATH_MAX]; /* "" when nothing was loaded */
    int bound;                 /* every entry point bound and ABI accepted */
    int engine_abi;            /* KCUDA_ABI_VERSION compiled into the engine */
    int module_abi;            /* -1 when unknown */
    int available;             /* 1 = device usable for offloads */
    int init_status;           /* module's kcuda_init status (cudaError_t or KCUDA_E_*), 0 ok */
    char reason[256];          /* why not available, "" when available */
    char note[1024];           /* loader / init note, human readable */
    char device_name[128];
    int cc_major, cc_minor;
    int64_t mem_total;
    int driver_version, runtime_version;
    int gate_graph;            /* KITE_CUDA_GRAPH   (default 1) */
    int gate_graph_m;          /* KITE_CUDA_GRAPH_M (default 0) */
    int force_cpu;             /* KITE_CUDA_FORCE_CPU */
    int64_t flops_min;         /* KITE_CUDA_FLOPS_MIN */
    int resident;              /* a model is uploaded and prepared */
} kc_info;

typedef struct kc_counters {
    int64_t gpu_steps;         /* M=1 steps done on the device */
    int64_t mrow_calls;        /* M-row steps done on the device */
    int64_t offload_gpu;       /* per-op offloads done on the device */
    int64_t offload_cpu;       /* per-op offloads refused (CPU ran) */
    int64_t graph_captures;
    int64_t graph_replays;     /* M=1 graph launches */
    int64_t mrow_graph_replays;
    int64_t stream_steps;      /* M=1 steps without a graph */
} kc_counters;

void kc_init(void);            /* once per process; reads the environment; never fails */
void kc_shutdown(void);        /* frees the model, shuts the module down, clears the table, closes */
int kc_available(void);
void kc_get_info(kc_info *out);
void kc_get_counters(kc_counters *out);

/* Per-op offload: y[m][n_out] = W . x with W Q8_0/Q4_0 (type = ggml type), x quantized per
 * 32-block (xq int8 [m][k], xd float [m][k/32]). Below KITE_CUDA_FLOPS_MIN (2*m*n_out*k), with
 * FORCE_CPU, no device, or any error: 0. */
int kc_gemm_gw(int type, const void *w, int64_t w_bytes, int n_out, int k,
               const int8_t *xq, const float *xd, int m, float *y);

/* Resident model. kc_model_begin .. kc_model_ready upload it once at prepare; any failure
 * drops residency (the engine then runs on the CPU, with per-op offloads where possible). */
int kc_model_begin(const int32_t *hp, int n_hp, const int32_t *layer_recurrent, float eps);
int kc_model_tensor(int layer, int role, int type, const void *data, int64_t ne0, int64_t ne1,
                    int64_t nbytes);
int kc_model_ready(const float *cos_tab, const float *sin_tab, int max_pos, int half_rot,
                   int max_m);
int kc_seq_reset(void);        /* outside the request window; captures graphs */
int kc_step(int token, int pos, float *h_out, float *logits);
int kc_step_m(const int32_t *tokens, int m, int pos, float *h_out, float *logits);
/* n tokens in passes of m rows queued back to back; row r's outputs at row r % ring */
int kc_prompt(const int32_t *tokens, int n, int m, int pos, float *h_out, float *logits, int ring);

#endif /* KITE_CUDA_HOST_H */
