#include "attention_device.cuh"

__global__ void k_qkprep(QkprepArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    qkprep_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}

__global__ void __launch_bounds__(KC_THREADS) k_attn_scores(ScoresArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    attn_scores_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}

__global__ void __launch_bounds__(KC_THREADS) k_attn_values(ValuesArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    attn_values_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}
