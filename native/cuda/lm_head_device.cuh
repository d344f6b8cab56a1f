// lm_head_device.cuh - the body of k_lm_head (matvec.cu): the M=1 LM head as a stream of weights.
// k_gemv<1, 4> gives each warp 4 rows once and 1940 blocks a piece: a warp loads, waits for its
// bytes, computes and exits. Here a resident grid's warps loop over groups of R rows and keep
// DEPTH groups' weights in flight (registers) while one group is computed.
#pragma once
#include "matvec_device.cuh" // use_before_wait, block_idot, half_bits_to_f32, warp_sum32_scatter

// The weights of one group of R rows, lane l's block of each: Q8_0 32 bytes (a, c), Q4_0 16 (a).
template <int QT, int R>
struct LmStage {
    int4 a[R], c[R];
    float d[R];
};

// Rows group * R .. + R - 1 (a row past the end reads the last row; it is never stored); with
// have unset (no such group for this warp), zeros.
template <int QT, int R>
__device__ __forceinline__ void lm_load(LmStage<QT, R> &s, const MatvecJob &w, int group, bool have, int nb,
                                        int lane) {
#pragma unroll
    for (int rr = 0; rr < R; rr++) {
        s.a[rr] = s.c[rr] = make_int4(0, 0, 0, 0);
        s.d[rr] = 0.0f;
        const int r = group * R + rr < w.n ? group * R + rr : w.n - 1;
        if (have && lane < nb) {
            if (QT == 1) {
                const int4 *wp = (const int4 *)((const int8_t *)w.q + (size_t)r * nb * 32 + (size_t)lane * 32);
                s.a[rr] = __ldg(wp);
                s.c[rr] = __ldg(wp + 1);
            } else {
                s.a[rr] = __ldg((const int4 *)((const uint8_t *)w.q + (size_t)r * nb * 16 + (size_t)lane * 16));
            }
            s.d[rr] = half_bits_to_f32(__ldg(w.s + (size_t)r * nb + lane));
        }
    }
}

// A word of every load of the stage, for use_before_wait (matvec_device.cuh).
template <int QT, int R>
__device__ __forceinline__ int lm_touch(const LmStage<QT, R> &s) {
    int f = 0;
#pragma unroll
    for (int rr = 0; rr < R; rr++) f ^= s.a[rr].x ^ (QT == 1 ? s.c[rr].x : 0) ^ __float_as_int(s.d[rr]);
    return f;
}

// The R sums of one group, stored by lanes 0, 32 / R, ...: k_gemv's operations in its order
// (docs/NUMERICS.md): the block's integer dot, (float)dot * (d_w * d_x) added to a lane partial
// that starts at 0, then warp_sum32_scatter's butterfly. x0, x1, xs: lane l's activation block and
// scale; xsum: Q4_0's sum of its quants (the -8 offset).
template <int QT, int R>
__device__ __forceinline__ void lm_store(const LmStage<QT, R> &s, const MatvecJob &w, int group, int nb, int lane,
                                         int4 x0, int4 x1, float xs, int xsum) {
    float acc[R];
#pragma unroll
    for (int rr = 0; rr < R; rr++) {
        const int is = block_idot(QT == 1, s.a[rr], s.c[rr], x0, x1, xsum);
        const float p = (float)is * (s.d[rr] * xs);
        acc[rr] = 0.0f;
        const float sum = acc[rr] + p;
        acc[rr] = lane < nb ? sum : acc[rr];
    }
    const float v = warp_sum32_scatter<R>(acc, lane);
    const int i = lane / (32 / R), r = group * R + i;
    if (lane % (32 / R) == 0 && r < w.n) w.y[r] = v;
}

// One block of k_lm_head<QT, R, DEPTH>: warp gw of the grid takes groups gw, gw + W, ... (W warps
// in the grid). The first DEPTH groups' weights are loaded before the wait; after it, the
// activations once; then each group is computed and its stage refilled with the group DEPTH
// further on, so that DEPTH groups' loads are in flight while one is computed.
template <int QT, int R, int DEPTH, class Wait>
__device__ __forceinline__ void lm_head_block(const LmHeadArgs &a, const BlockAt &at, const Wait &wait) {
    static_assert(QT == 1 || QT == 2, "QT: 1 Q8_0, 2 Q4_0");
    static_assert(R >= 1 && R <= 32 && (R & (R - 1)) == 0, "R: a power of two <= 32");
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const MatvecJob &w = a.w;
    const int nb = w.k >> 5, groups = (w.n + R - 1) / R;
    const int stride = at.nx * nw, g0 = at.x * nw + (threadIdx.x >> 5);
    LmStage<QT, R> st[DEPTH];
    int f = 0;
#pragma unroll
    for (int s = 0; s < DEPTH; s++) {
        lm_load<QT, R>(st[s], w, g0 + s * stride, g0 + s * stride < groups, nb, lane);
        f ^= lm_touch<QT, R>(st[s]);
    }
    use_before_wait(f); // with the kind known, ptxas would move these loads below the wait
    wait();
    int4 x0 = make_int4(0, 0, 0, 0), x1 = x0;
    float xs = 0.0f;
    if (lane < nb) {
        const int4 *xp = (const int4 *)(a.xq + (size_t)lane * 32);
        x0 = xp[0];
        x1 = xp[1];
        xs = a.xd[lane];
    }
    const int xsum = QT == 2 ? block_qsum(x0, x1) : 0;
    for (int g = g0; g < groups; g += DEPTH * stride) {
#pragma unroll
        for (int s = 0; s < DEPTH; s++) {
            const int gs = g + s * stride;
            if (gs >= groups) break; // warp-uniform
            lm_store<QT, R>(st[s], w, gs, nb, lane, x0, x1, xs, xsum);
            if (gs + DEPTH * stride < groups) lm_load<QT, R>(st[s], w, gs + DEPTH * stride, true, nb, lane);
        }
    }
}
