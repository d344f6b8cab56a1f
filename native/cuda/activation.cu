#include "activation.cuh"
#include "warp_math.cuh"

// ------------------------------------------------------------------------------------------------
// Activation preparation: one block per row. mode 0: copy; 1: RMSNorm(a) * w; 2: silu(a) * b.
// Writes xf (float) and, when n % 32 == 0, the per-32-block int8 quantization xq / xd.

__global__ void __launch_bounds__(KC_THREADS)
k_act(int mode, const float *a, const float *b, int lda, const float *w, int hs, int n, float eps,
      float *xf, int8_t *xq, float *xd, int ldx, float *out2, int ld2) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int row = blockIdx.x;
    const float *ar = a + (size_t)row * lda;
    float *xr = xf + (size_t)row * ldx;
    __shared__ float s_scale;
    if (mode == 1) {
        if (threadIdx.x < 32) {
            float ss = warp_dot(ar, ar, n, threadIdx.x);
            if (threadIdx.x == 0) {
                float mean = ss / (float)n;
                s_scale = kite_rsqrtf(mean + eps);
            }
        }
        __syncthreads();
        float sc = s_scale;
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = (ar[i] * sc) * w[i];
    } else if (mode == 3) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const float *br = b + (size_t)row * lda;
        for (int h = warp; h < n / hs; h += blockDim.x >> 5) {
            const float *ah = ar + (size_t)h * hs;
            float ss = warp_dot(ah, ah, hs, lane);
            float sc = kite_rsqrtf(ss / (float)hs + eps);
            for (int j = lane; j < hs; j += 32)
                xr[h * hs + j] = ((ah[j] * sc) * w[j]) * kite_siluf(br[h * hs + j]);
        }
    } else if (mode == 2) {
        const float *br = b + (size_t)row * lda;
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = kite_siluf(ar[i]) * br[i];
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = ar[i];
    }
    __syncthreads();
    if (out2)
        for (int i = threadIdx.x; i < n; i += blockDim.x) out2[(size_t)row * ld2 + i] = xr[i];
    if ((n & 31) == 0 && xq) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int nb = n >> 5;
        for (int bb = warp; bb < nb; bb += blockDim.x >> 5) {
            quant_block32(xr[bb * 32 + lane], lane, xq + (size_t)row * ldx + bb * 32, xd + (size_t)row * (ldx >> 5) + bb);
        }
    }
}

// Activation quantization for the M-row path: grid (ceil(nb / KC_WARPS), m), one warp per
// 32-block of one row, so the cost does not grow with m and the following gemv (mode -1) has no
// per-block prologue. Same float operations as the gemv prologue and k_act (docs/NUMERICS.md):
// the row scale (mode 1) and the head scale (mode 3, hs % 32 == 0) come from the same warp_dot.
__global__ void __launch_bounds__(KC_THREADS)
k_actq(int mode, const float *a, const float *b, int lda, const float *__restrict__ w,
       int hs, int n, float eps, int8_t *xq, float *xd, int ldx, float *out2, int ld2) {
    KC_PDL_TRIGGER();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row = blockIdx.y;
    const int nb = n >> 5;
    const int bb = blockIdx.x * KC_WARPS + warp;
    const int j = bb * 32 + lane;
    const bool mine = bb < nb; // this warp has a 32-block
    // the norm weight is immutable: loaded before the wait; this warp's inputs right after it,
    // so that their round trip overlaps the row norm of warp 0
    const float wv = mine && mode == 1 ? w[j] : mine && mode == 3 ? w[j % hs] : 0.0f;
    KC_PDL_WAIT();
    const float *ar = a + (size_t)row * lda;
    const float av = mine ? ar[j] : 0.0f;
    const float bv = mine && mode >= 2 ? b[(size_t)row * lda + j] : 0.0f;
    __shared__ float s_scale;
    if (mode == 1) {
        if (warp == 0) {
            float ss = warp_sum32(lane_dot<32>(ar, ar, n, lane));
            if (lane == 0) s_scale = kite_rsqrtf(ss / (float)n + eps);
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
        float sc = kite_rsqrtf(ss / (float)hs + eps);
        v = ((av * sc) * wv) * kite_siluf(bv);
    } else if (mode == 2) {
        v = kite_siluf(av) * bv;
    } else {
        v = av;
    }
    if (out2) out2[(size_t)row * ld2 + j] = v;
    quant_block32(v, lane, xq + (size_t)row * ldx + bb * 32, xd + (size_t)row * (ldx >> 5) + bb);
}

// Embedding: x[m][i] = dequantized row tokens[m] (tokens from device memory).
__global__ void k_embed(DeviceMatrix w, const int *__restrict__ in, int E, float *x) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int row = blockIdx.x;
    const int tok = in[1 + row];
    for (int i = threadIdx.x; i < E; i += blockDim.x) {
        float v;
        size_t idx = (size_t)tok * E + i;
        if (w.type == KCUDA_T_Q8_0) {
            v = half_bits_to_f32(w.s[idx >> 5]) * (float)((const int8_t *)w.q)[idx];
        } else if (w.type == KCUDA_T_Q4_0) {
            uint8_t byte = ((const uint8_t *)w.q)[(idx >> 5) * 16 + (idx & 15)];
            int nib = (idx & 31) < 16 ? (byte & 15) : (byte >> 4);
            v = half_bits_to_f32(w.s[idx >> 5]) * (float)(nib - 8);
        } else if (w.type == KCUDA_T_F16) {
            v = half_bits_to_f32(((const uint16_t *)w.q)[idx]);
        } else if (w.type == KCUDA_T_BF16) {
            v = kite_bf16_to_f32(((const uint16_t *)w.q)[idx]);
        } else {
            v = ((const float *)w.q)[idx];
        }
        x[(size_t)row * E + i] = v;
    }
}

