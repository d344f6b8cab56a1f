#include "activation_device.cuh"

__global__ void __launch_bounds__(KC_THREADS) k_act(ActArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    act_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}

__global__ void __launch_bounds__(KC_THREADS) k_actq(ActArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    actq_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}

__global__ void k_embed(EmbedArgs a KC_TL_PARAMS) {
    KC_TL_BEGIN();
    KC_PDL_TRIGGER();
    embed_block(a, block_at_launch(), KC_TL_WAIT);
    KC_TL_END();
}
