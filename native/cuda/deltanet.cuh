// deltanet.cuh - the Gated DeltaNet layer: causal conv + SiLU, L2 norms, and the recurrence of
// the state S[dv][dk] per value head, one launch per layer.
#pragma once
#include "kc_common.cuh"

#define KC_DK_MAX 256 // key head sizes up to this
// warps of a k_deltanet block, and its shared memory for m rows
int dn_warps(int dk);
size_t dn_smem(int m, int dk);
__global__ void k_deltanet(const float *qkv, int C, const float *__restrict__ cw, int K, float *ring, int R,
           const int *__restrict__ in, const float *betab, const float *alphab,
           int ldba, const float *__restrict__ ssm_a, const float *__restrict__ dt_bias, float *S_all, int Hk,
           int Hv, int dk, int dv, float eps, float *y, int ldy, int m);
