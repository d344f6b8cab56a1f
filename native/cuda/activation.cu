#include "activation_device.cuh"

__global__ void __launch_bounds__(KC_THREADS) k_act(ActArgs a, OpChain c) {
    if (!c.late_trigger) KC_PDL_TRIGGER();
    act_block(a, block_at_launch(), ChainWait(c));
    chain_arrive(c);
}

__global__ void __launch_bounds__(KC_THREADS) k_actq(ActArgs a, OpChain c) {
    if (!c.late_trigger) KC_PDL_TRIGGER();
    actq_block(a, block_at_launch(), ChainWait(c));
    chain_arrive(c);
}

__global__ void k_embed(EmbedArgs a, OpChain c) {
    if (!c.late_trigger) KC_PDL_TRIGGER();
    embed_block(a, block_at_launch(), ChainWait(c));
    chain_arrive(c);
}
