// attention.cuh - gated full attention: the q / k head norms with RoPE and the cache writes
// (norm_rope.cu), then scores, softmax and the gated weighted sum of v (attention.cu).
#pragma once
#include "kc_common.cuh"

__global__ void k_qkprep(const float *qg, int ldqg, const float *kb, const float *vb, int ldkv, const float *__restrict__ qn,
                         const float *__restrict__ kn, const float *__restrict__ cos_tab,
                         const float *__restrict__ sin_tab, int half_tab, int half,
                         const int *__restrict__ in, int H, int Hkv, int D, float eps, float *qout,
                         float *kc, float *vc, int max_pos);
__global__ void k_attn(const float *q, const float *kc, const float *vc, const float *qg, int ldqg, const int *__restrict__ in, int H, int Hkv, int D,
       float *scr, int max_pos, float *out, int ldo);
