// attention.cuh - gated full attention: the q / k head norms with RoPE and the cache writes,
// then scores, softmax and the gated weighted sum of v (kernels in attention.cu, their bodies in
// attention_device.cuh).
#pragma once
#include "kc_common.cuh"

// q_gate [m][ld_q_gate]: per head its query then its gate (D each); k_new, v_new [m][ld_kv_new];
// q_norm, k_norm [D]; cos_tab, sin_tab [positions][half_tab]; q_out [m][H * D] (normed, rotated);
// k_cache, v_cache [max_pos][Hkv * D]. Blocks (H + 2 * Hkv, m).
struct QkprepArgs {
    const float *q_gate;
    int ld_q_gate;
    const float *k_new, *v_new;
    int ld_kv_new;
    const float *q_norm, *k_norm, *cos_tab, *sin_tab; // immutable
    int half_tab, half;
    const int *in;
    int H, Hkv, D;
    float eps;
    float *q_out, *k_cache, *v_cache;
    int max_pos;
};
// k_attn_values: 32 warps, one of sum32's partials each (KC_VAL_PARTS of them a thread in general)
#define KC_VAL_THREADS 1024
#define KC_VAL_PARTS (KC_VAL_THREADS / 32)
// probs [m][H][max_pos]; out [m][ldo]: the gated outputs; oq / od (null, or D % 32 == 0): the
// same quantized per 32-block, [m][ldq] / [m][ldq / 32]. Blocks (H, m, ceil(D / 32)).
struct ValuesArgs {
    const float *probs, *v_cache, *q_gate;
    int ld_q_gate;
    const int *in;
    int H, Hkv, D, max_pos;
    float *out;
    int ldo;
    int8_t *oq;
    float *od;
    int ldq;
};
// q [m][H * D]; scores [m][H][max_pos]; split_max [m][H][splits]; splits_done [m][H] (zero
// between passes). Blocks (H, m, splits). A row whose context is at most KC_ATT_SHORT positions
// takes the short path: the block of split z computes the head's scores and softmax itself, in
// shared memory, then the weighted sum of v of columns z * 32 .. z * 32 + 31 (with `values`'
// outputs), and k_attn_values leaves that row alone.
#define KC_ATT_SHORT 128
struct ScoresArgs {
    const float *q, *k_cache;
    const int *in;
    int H, Hkv, D;
    float *scores;
    int max_pos;
    float *split_max;
    int *splits_done;
    ValuesArgs values; // the weighted sum's arguments, for the short path
};
__global__ void k_qkprep(QkprepArgs a KC_TL_PARAMS);
__global__ void k_attn_scores(ScoresArgs a KC_TL_PARAMS);
__global__ void k_attn_values(ValuesArgs a KC_TL_PARAMS);
