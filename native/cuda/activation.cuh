// activation.cuh - activation preparation: the rows a matrix product reads (RMSNorm, SiLU
// gating, the gated head norm), quantized per 32-block as the CPU does, and the embedding rows.
#pragma once
#include "device_matrix.cuh"

// mode 0: copy a; 1: RMSNorm(a) * w; 2: silu(a) * b; 3: per head of hs values, RMSNorm(a) * w * silu(b).
// One block per row; writes the float row xf and, when n % 32 == 0, its quantization xq / xd.
__global__ void k_act(int mode, const float *a, const float *b, int lda, const float *w, int hs, int n, float eps,
      float *xf, int8_t *xq, float *xd, int ldx, float *out2, int ld2);
// The same modes for quantized products: grid (ceil(n / 32 / KC_WARPS), m), one warp per
// 32-block of one row; writes xq / xd (and the float row to out2 when given).
__global__ void k_actq(int mode, const float *a, const float *b, int lda, const float *__restrict__ w,
       int hs, int n, float eps, int8_t *xq, float *xd, int ldx, float *out2, int ld2);
// x[m][i] = the dequantized embedding row of token in[1 + m].
__global__ void k_embed(DeviceMatrix w, const int *__restrict__ in, int E, float *x);
