#include "activation_device.cuh"

__global__ void __launch_bounds__(KC_THREADS) k_act(ActArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, act_block);
}

__global__ void __launch_bounds__(KC_THREADS) k_actq(ActArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, actq_block);
}

__global__ void k_embed(EmbedArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, embed_block);
}
