#include "deltanet_device.cuh"

// warps of a k_deltanet block: its 2 * dk + nw channels on one thread each (with 8 warps and
// dk = 128, eight threads computed a second channel after the first: one more round trip)
int dn_warps(int dk) {
    const int nw = (2 * dk + 30) / 31; // 32 * nw >= 2 * dk + nw
    return nw > KC_WARPS ? nw : KC_WARPS;
}

// its shared memory for m rows: per row q, k (dk each), v of its nw rows, beta and the decay
size_t dn_smem(int m, int dk) {
    return (size_t)m * (2 * dk + dn_warps(dk) + 2) * sizeof(float);
}

__global__ void __launch_bounds__(1024) // dn_warps(KC_DK_MAX) = 17 warps at most
k_deltanet(DeltanetArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, deltanet_block);
}

// 56 registers (57,344 a block), so that the out product's 6,656-register blocks fit beside it
// (bench/kernel_fit.py); the history taps held across the wait would take ptxas to 59
__global__ void KC_MAX_REGISTERS(56, KC_DNH_WARPS * 32) k_deltanet_head(DeltanetArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, deltanet_head_block);
}

bool deltanet_head_fits(int dk, int dv, int K) {
    return dk == 32 * DNH_NC && dv == KC_DNH_WARPS * DNH_RW && K >= 1 && K <= DNH_TAPS + 1;
}
