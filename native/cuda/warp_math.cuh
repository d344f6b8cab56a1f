// warp_math.cuh - device utilities in the canonical order of docs/NUMERICS.md: warp sums,
// lane partials of dot products, f16 scales, and the quantization of one 32-block.
#pragma once
#include "kc_common.cuh"


// The butterfly steps off0, off0 / 2, ..., 1: each lane adds its partner's value (lane l ^ off).
// Lanes l and l + off add the same pair, as x + y and y + x: the same float, so every lane ends
// with the value the canonical order gives lane 0.
__device__ __forceinline__ float warp_sum_from(float v, int off0) {
    for (int off = off0; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// canonical sum32 of the lane partials (lane l holds partial l), in every lane
__device__ __forceinline__ float warp_sum32(float v) { return warp_sum_from(v, 16); }

// One step of warp_sum32_scatter: n values per lane, partner lane ^ off. The steps are a
// template recursion so that every index into v is a constant (a loop over n was left rolled
// for 16 values, which put the sums in local memory).
template <int n, int off>
__device__ __forceinline__ void scatter_steps(float *v, int lane) {
    if constexpr (n > 1) {
        const bool hi = (lane & off) != 0;
#pragma unroll
        for (int j = 0; j < n / 2; j++) {
            const float keep = hi ? v[j + n / 2] : v[j], send = hi ? v[j] : v[j + n / 2];
            v[j] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
        scatter_steps<n / 2, off / 2>(v, lane);
    }
}

// N canonical sums at once (N a power of two <= 32; lane l holds the partials l of v[0..N-1]).
// Each butterfly step halves the values a lane keeps: it adds its partner's copy of the half
// it keeps (the same pairs as warp_sum32, whichever lane adds them) and sends the other half.
// Returns v[lane / (32 / N)]'s sum: N * 2 - 2 shuffles instead of N * 5.
template <int N>
__device__ __forceinline__ float warp_sum32_scatter(float *v, int lane) {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "N: a power of two <= 32");
    scatter_steps<N, 16>(v, lane);
    return warp_sum_from(v[0], 16 / N);
}

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Lane l's partial of the canonical dot a . b over n: i = l, l+32, ... added in order. The loads
// of W iterations are issued together, then their adds (W = 16; 32 for the 1024-wide row norms
// of k_actq: one round trip), then the rest 4 and 1 at a time.
template <int W>
__device__ __forceinline__ void lane_dot_run(const float *a, const float *b, int n, int &i, float &s) {
    for (; i + 32 * (W - 1) < n; i += 32 * W) {
        float pa[W], pb[W];
#pragma unroll
        for (int u = 0; u < W; u++) {
            pa[u] = a[i + 32 * u];
            pb[u] = b[i + 32 * u];
        }
#pragma unroll
        for (int u = 0; u < W; u++) s = s + pa[u] * pb[u];
    }
}

template <int W = 16>
__device__ __forceinline__ float lane_dot(const float *a, const float *b, int n, int lane) {
    float s = 0.0f;
    int i = lane;
    lane_dot_run<W>(a, b, n, i, s);
    lane_dot_run<4>(a, b, n, i, s);
    lane_dot_run<1>(a, b, n, i, s);
    return s;
}

// canonical sum32 of a[i] * b[i] over n (one warp; the result in every lane)
__device__ __forceinline__ float warp_dot(const float *a, const float *b, int n, int lane) {
    return warp_sum32(lane_dot(a, b, n, lane));
}

__device__ __forceinline__ float half_bits_to_f32(uint16_t h) {
    return __half2float(__ushort_as_half(h)); // exact
}

// Quantization of one 32-block of activations (lane l holds element l; the whole warp calls
// it): q = round-to-nearest-even(v * (127 / max|v|)) clamped to +-127, NaN -> 0, and d =
// max|v| / 127 rounded to f16, as llama.cpp's x86 code does. The same operations as the CPU's
// (docs/NUMERICS.md); q and d are stored at q[lane] and *d (lane 0).
__device__ __forceinline__ void quant_block32(float v, int lane, int8_t *q, float *d) {
    const float amax = warp_max(fabsf(v));
    const float dd = amax / 127.0f;
    const float id = kite_q8_act_inverse(amax);
    float qf = rintf(v * id);
    qf = qf > 127.0f ? 127.0f : (qf < -127.0f ? -127.0f : qf);
    if (qf != qf) qf = 0.0f;
    q[lane] = (int8_t)(int)qf;
    // kite_q8_act_scale by cvt.rn.f16.f32 (round to nearest even, subnormals kept, as
    // kite_f32_to_f16, NaN payloads aside): the software rounding spilled k_gemv<8, 2>
    if (lane == 0) *d = __half2float(__float2half_rn(dd));
}

