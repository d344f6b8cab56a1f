#include "activation_device.cuh"

__global__ void __launch_bounds__(KC_THREADS) k_act(ActArgs a) {
    KC_PDL_TRIGGER();
    act_block(a, block_at_launch(), PdlWait{});
}

__global__ void __launch_bounds__(KC_THREADS) k_actq(ActArgs a) {
    KC_PDL_TRIGGER();
    actq_block(a, block_at_launch(), PdlWait{});
}

__global__ void k_embed(EmbedArgs a) {
    KC_PDL_TRIGGER();
    embed_block(a, block_at_launch(), PdlWait{});
}
