// activation_device.cuh - the bodies of the activation kernels (activation.cu), each over one
// block: RMSNorm, SiLU gating and the gated head norm of the rows a matrix product reads,
// quantized per 32-block as the CPU does, and the embedding rows.
#pragma once
#include "activation.cuh"
#include "warp_math.cuh"

// One row of k_act (block x = the row): the float row xf and, when n % 32 == 0, its quantization.
template <class Wait>
__device__ __forceinline__ void act_block(const ActArgs &a, const BlockAt &at, const Wait &wait) {
    wait();
    const int row = at.x, n = a.n, mode = a.mode;
    const float *ar = a.a + (size_t)row * a.lda;
    float *xr = a.xf + (size_t)row * a.ldx;
    __shared__ float s_scale;
    if (mode == 1) {
        if (threadIdx.x < 32) {
            float ss = warp_dot(ar, ar, n, threadIdx.x);
            if (threadIdx.x == 0) {
                float mean = ss / (float)n;
                s_scale = kite_rsqrtf(mean + a.eps);
            }
        }
        __syncthreads();
        float sc = s_scale;
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = (ar[i] * sc) * a.w[i];
    } else if (mode == 3) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hs = a.hs;
        const float *br = a.b + (size_t)row * a.lda;
        for (int h = warp; h < n / hs; h += blockDim.x >> 5) {
            const float *ah = ar + (size_t)h * hs;
            float ss = warp_dot(ah, ah, hs, lane);
            float sc = kite_rsqrtf(ss / (float)hs + a.eps);
            for (int j = lane; j < hs; j += 32)
                xr[h * hs + j] = ((ah[j] * sc) * a.w[j]) * kite_siluf(br[h * hs + j]);
        }
    } else if (mode == 2) {
        const float *br = a.b + (size_t)row * a.lda;
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = kite_siluf(ar[i]) * br[i];
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = ar[i];
    }
    __syncthreads();
    if (a.out2)
        for (int i = threadIdx.x; i < n; i += blockDim.x) a.out2[(size_t)row * a.ld2 + i] = xr[i];
    if ((n & 31) == 0 && a.xq) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int nb = n >> 5;
        for (int bb = warp; bb < nb; bb += blockDim.x >> 5)
            quant_block32(xr[bb * 32 + lane], lane, a.xq + (size_t)row * a.ldx + bb * 32,
                          a.xd + (size_t)row * (a.ldx >> 5) + bb);
    }
}

// One block of k_actq: (x, y) = (KC_WARPS 32-blocks, row), one warp per 32-block. Same float
// operations as the gemv prologue and k_act (docs/NUMERICS.md): the row scale (mode 1) and the
// head scale (mode 3, hs % 32 == 0) come from the same warp_dot.
template <class Wait>
__device__ __forceinline__ void actq_block(const ActArgs &a, const BlockAt &at, const Wait &wait) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row = at.y, mode = a.mode, hs = a.hs;
    const int nb = a.n >> 5;
    const int bb = at.x * KC_WARPS + warp;
    const int j = bb * 32 + lane;
    const bool mine = bb < nb; // this warp has a 32-block
    // the norm weight is immutable: loaded before the wait; this warp's inputs right after it,
    // so that their round trip overlaps the row norm of warp 0
    const float wv = mine && mode == 1 ? __ldg(&a.w[j]) : mine && mode == 3 ? __ldg(&a.w[j % hs]) : 0.0f;
    wait();
    const float *ar = a.a + (size_t)row * a.lda;
    const float av = mine ? ar[j] : 0.0f;
    const float bv = mine && mode >= 2 ? a.b[(size_t)row * a.lda + j] : 0.0f;
    __shared__ float s_scale;
    if (mode == 1) {
        if (warp == 0) {
            float ss = warp_sum32(lane_dot<32>(ar, ar, a.n, lane));
            if (lane == 0) s_scale = kite_rsqrtf(ss / (float)a.n + a.eps);
        }
        __syncthreads();
    }
    if (!mine) return;
    float v;
    if (mode == 1) {
        v = (av * s_scale) * wv;
    } else if (mode == 3) {
        const float *ah = ar + (size_t)(j / hs) * hs;
        float ss = warp_dot(ah, ah, hs, lane);
        float sc = kite_rsqrtf(ss / (float)hs + a.eps);
        v = ((av * sc) * wv) * kite_siluf(bv);
    } else if (mode == 2) {
        v = kite_siluf(av) * bv;
    } else {
        v = av;
    }
    if (a.out2) a.out2[(size_t)row * a.ld2 + j] = v;
    quant_block32(v, lane, a.xq + (size_t)row * a.ldx + bb * 32, a.xd + (size_t)row * (a.ldx >> 5) + bb);
}

// One row of the embedding (block x = the row): x[row] = the dequantized row of token in[1 + row].
template <class Wait>
__device__ __forceinline__ void embed_block(const EmbedArgs &a, const BlockAt &at, const Wait &wait) {
    wait();
    const int row = at.x, E = a.E;
    const int tok = a.in[1 + row];
    for (int i = threadIdx.x; i < E; i += blockDim.x) {
        float v;
        size_t idx = (size_t)tok * E + i;
        if (a.type == KCUDA_T_Q8_0) {
            v = half_bits_to_f32(a.s[idx >> 5]) * (float)((const int8_t *)a.q)[idx];
        } else if (a.type == KCUDA_T_Q4_0) {
            uint8_t byte = ((const uint8_t *)a.q)[(idx >> 5) * 16 + (idx & 15)];
            int nib = (idx & 31) < 16 ? (byte & 15) : (byte >> 4);
            v = half_bits_to_f32(a.s[idx >> 5]) * (float)(nib - 8);
        } else if (a.type == KCUDA_T_F16) {
            v = half_bits_to_f32(((const uint16_t *)a.q)[idx]);
        } else if (a.type == KCUDA_T_BF16) {
            v = kite_bf16_to_f32(((const uint16_t *)a.q)[idx]);
        } else {
            v = ((const float *)a.q)[idx];
        }
        a.x[(size_t)row * E + i] = v;
    }
}
