#include "attention_device.cuh"

__global__ void k_qkprep(QkprepArgs a) {
    KC_PDL_TRIGGER();
    qkprep_block(a, block_at_launch(), PdlWait{});
}
