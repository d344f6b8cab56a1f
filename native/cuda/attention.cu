#include "attention_device.cuh"

__global__ void k_qkprep(QkprepArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, qkprep_block);
}

__global__ void __launch_bounds__(KC_THREADS) k_attn_scores(ScoresArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, attn_scores_block);
}

__global__ void __launch_bounds__(KC_VAL_THREADS) k_attn_values(ValuesArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, attn_values_block);
}
