// attention.cuh - gated full attention: the q / k head norms with RoPE and the cache writes
// (norm_rope.cu), then scores, softmax and the gated weighted sum of v (attention.cu).
#pragma once
#include "kc_common.cuh"

__global__ void k_qkprep(const float *q_gate, int ld_q_gate, const float *k_new, const float *v_new, int ld_kv_new, const float *__restrict__ qn,
                         const float *__restrict__ kn, const float *__restrict__ cos_tab,
                         const float *__restrict__ sin_tab, int half_tab, int half,
                         const int *__restrict__ in, int H, int Hkv, int D, float eps, float *qout,
                         float *k_cache, float *v_cache, int max_pos);
__global__ void k_attn_scores(const float *q, const float *k_cache, const int *__restrict__ in, int H, int Hkv, int D,
                              float *scores, int max_pos, float *split_max, int *splits_done);
__global__ void k_attn_values(const float *probs, const float *v_cache, const float *q_gate, int ld_q_gate,
                              const int *__restrict__ in, int H, int Hkv, int D, int max_pos, float *out, int ldo);
