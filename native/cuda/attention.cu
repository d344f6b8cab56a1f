#include "attention_device.cuh"

__global__ void k_qkprep(QkprepArgs a) {
    KC_PDL_TRIGGER();
    qkprep_block(a, block_at_launch(), PdlWait{});
}

__global__ void __launch_bounds__(KC_THREADS) k_attn_scores(ScoresArgs a) {
    KC_PDL_TRIGGER();
    attn_scores_block(a, block_at_launch(), PdlWait{});
}

__global__ void __launch_bounds__(KC_THREADS) k_attn_values(ValuesArgs a) {
    KC_PDL_TRIGGER();
    attn_values_block(a, block_at_launch(), PdlWait{});
}
