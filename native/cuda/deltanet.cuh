// deltanet.cuh - the Gated DeltaNet layer: causal conv + SiLU, L2 norms, and the recurrence of
// the state S[dv][dk] per value head, one op per layer.
#pragma once
#include "kc_common.cuh"

#define KC_DK_MAX 256 // key head sizes up to this
#define KC_DNH_WARPS 16 // warps of a k_deltanet_head block
#define DNH_NC 4        // k_deltanet_head: dk / 32
#define DNH_RW 8        // k_deltanet_head: state rows a warp (dv / KC_DNH_WARPS)
#define DNH_TAPS 4      // k_deltanet_head: the conv's history taps held in registers (K - 1)
// One layer for the m rows of a pass. qkv [m][C]: the conv inputs (q, k, v channels); conv_w
// [C][K]; ring [ring_rows][C]: conv inputs by position; beta, alpha [m][ld_beta]: write strength
// and decay input per value head; ssm_a, dt_bias [Hv]; S [Hv][dv][dk]: the state; y [m][ldy]:
// the output before its gated norm. in: [0] = position of the first row.
struct DeltanetArgs {
    const float *qkv;
    int C;
    const float *conv_w; // immutable
    int K;
    float *ring;
    int ring_rows;
    const int *in;
    const float *beta, *alpha;
    int ld_beta;
    const float *ssm_a, *dt_bias; // immutable
    float *S;
    int Hk, Hv, dk, dv;
    float eps;
    float *y;
    int ldy, m;
    // k_deltanet_head only: the gated norm's weight [dv] (immutable), the output gate z [Hv * dv]
    // and the normed, gated outputs quantized per 32-block: oq [Hv * dv], od [Hv * dv / 32]
    const float *norm_w;
    const float *z;
    int8_t *oq;
    float *od;
};
// warps of a k_deltanet block, and its shared memory for m rows
int dn_warps(int dk);
size_t dn_smem(int m, int dk);
// grid (Hv, ceil(dv / dn_warps(dk))), dn_warps(dk) warps, dn_smem(m, dk) bytes of shared memory
__global__ void k_deltanet(DeltanetArgs a KC_TL_PARAMS);
// M=1 with the gated norm and its quantization as the tail: grid (Hv), KC_DNH_WARPS warps; for
// dk == 32 * DNH_NC, dv == KC_DNH_WARPS * DNH_RW, K <= DNH_TAPS + 1 (deltanet_head_fits)
__global__ void k_deltanet_head(DeltanetArgs a KC_TL_PARAMS);
bool deltanet_head_fits(int dk, int dv, int K);
