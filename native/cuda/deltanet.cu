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

// 16 warps of 8 state rows at 72 registers (36,864 a block): each warp's fixed part (addresses,
// conv, norms) is issued half as often as in 32 warps of 4 (docs/PERFORMANCE.md: Q8_0 1.021), and
// four of the out product's 6,656-register blocks fit beside it (bench/kernel_fit.py)
__global__ void KC_MAX_REGISTERS(72, KC_DNH_WARPS * 32) k_deltanet_head(DeltanetArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, deltanet_head_block);
}

bool deltanet_head_fits(int dk, int dv, int K) {
    return dk == 32 * DNH_NC && dv == KC_DNH_WARPS * DNH_RW && K >= 1 && K <= DNH_TAPS + 1;
}
