/* cuda_stub.c - the CUDA host layer of a build without KITE_CUDA: nothing is ever available,
 * every offload returns 0 (the CPU runs it). Same interface as cuda_host.c. */
#include <stdio.h>
#include <string.h>

#include "cuda_host.h"
#include "env_options.h"
#include "kite_cuda.h"

static kc_counters counters;

void kc_init(void) { (void)kt_env_get(); /* its warnings, once, at start */ }
void kc_shutdown(void) {}
int kc_available(void) { return 0; }

void kc_get_info(kc_info *out) {
    memset(out, 0, sizeof *out);
    out->compiled = 0;
    out->n_search = 0;
    out->bound = 0;
    out->engine_abi = KCUDA_ABI_VERSION;
    out->module_abi = -1;
    out->available = 0;
    out->init_status = KCUDA_E_NODEVICE;
    snprintf(out->reason, sizeof out->reason, "built without KITE_CUDA");
    snprintf(out->note, sizeof out->note, "built without KITE_CUDA: no module is searched");
    const kt_env *env = kt_env_get();
    out->gate_graph = env->cuda_graph;
    out->gate_graph_m = env->cuda_graph_m;
    out->force_cpu = env->cuda_force_cpu;
    out->flops_min = env->cuda_flops_min;
    out->resident = 0;
}

void kc_get_counters(kc_counters *out) { *out = counters; }

int kc_gemm_gw(int type, const void *w, int64_t w_bytes, int n_out, int k, const int8_t *xq,
               const float *xd, int m, float *y) {
    (void)type; (void)w; (void)w_bytes; (void)n_out; (void)k; (void)xq; (void)xd; (void)m;
    (void)y;
    counters.offload_cpu++;
    return 0;
}

int kc_model_begin(const int32_t *hp, int n_hp, const int32_t *layer_recurrent, float eps) {
    (void)hp; (void)n_hp; (void)layer_recurrent; (void)eps;
    return 0;
}

int kc_model_tensor(int layer, int role, int type, const void *data, int64_t ne0, int64_t ne1,
                    int64_t nbytes) {
    (void)layer; (void)role; (void)type; (void)data; (void)ne0; (void)ne1; (void)nbytes;
    return 0;
}

int kc_model_ready(const float *cos_tab, const float *sin_tab, int max_pos, int half_rot,
                   int max_m) {
    (void)cos_tab; (void)sin_tab; (void)max_pos; (void)half_rot; (void)max_m;
    return 0;
}

int kc_seq_reset(void) { return 0; }

int kc_step(int token, int pos, float *h_out, float *logits) {
    (void)token; (void)pos; (void)h_out; (void)logits;
    return 0;
}

int kc_step_m(const int32_t *tokens, int m, int pos, float *h_out, float *logits) {
    (void)tokens; (void)m; (void)pos; (void)h_out; (void)logits;
    return 0;
}

int kc_prompt(const int32_t *tokens, int n, int m, int pos, float *h_out, float *logits, int ring) {
    (void)tokens; (void)n; (void)m; (void)pos; (void)h_out; (void)logits; (void)ring;
    return 0;
}
