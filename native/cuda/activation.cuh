// activation.cuh - activation preparation: the rows a matrix product reads (RMSNorm, SiLU
// gating, the gated head norm), quantized per 32-block as the CPU does, and the embedding rows.
#pragma once
#include "device_matrix.cuh"

// mode 0: copy a; 1: RMSNorm(a) * w; 2: silu(a) * b; 3: per head of hs values, RMSNorm(a) * w * silu(b).
// Rows of n values read from a (and b), row stride lda; written as floats to xf (k_act only) and
// quantized per 32-block to xq / xd (row stride ldx); out2 (row stride ld2): the float rows too.
struct ActArgs {
    int mode;
    const float *a, *b;
    int lda;
    const float *w; // immutable (a norm weight)
    int hs, n;
    float eps;
    float *xf;
    int8_t *xq;
    float *xd;
    int ldx;
    float *out2;
    int ld2;
};
// x[m][i] = the dequantized embedding row of token in[1 + m] (the embedding matrix's fields).
struct EmbedArgs {
    int type;
    const void *q;
    const uint16_t *s;
    const int *in;
    int E;
    float *x;
};
// One block per row; writes xf and, when n % 32 == 0, xq / xd.
__global__ void k_act(ActArgs a KC_TL_PARAMS);
// Quantized products: grid (ceil(n / 32 / KC_WARPS), m), one warp per 32-block of one row.
__global__ void k_actq(ActArgs a KC_TL_PARAMS);
// One block per row.
__global__ void k_embed(EmbedArgs a KC_TL_PARAMS);
