#include "attention.cuh"
#include "warp_math.cuh"

// ------------------------------------------------------------------------------------------------
// Full attention. Prep: per head block, RMSNorm with q_norm/k_norm, NeoX RoPE on n_rot dims,
// k and v stored in the cache at pos + mi. Blocks [0,H): query; [H,H+Hkv): key; then value.

__global__ void k_qkprep(const float *q_gate, int ld_q_gate, const float *k_new, const float *v_new, int ld_kv_new, const float *__restrict__ qn,
                         const float *__restrict__ kn, const float *__restrict__ cos_tab,
                         const float *__restrict__ sin_tab, int half_tab, int half,
                         const int *__restrict__ in, int H, int Hkv, int D, float eps, float *qout,
                         float *k_cache, float *v_cache, int max_pos) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    extern __shared__ float sm[];
    const int hb = blockIdx.x, mi = blockIdx.y;
    const int pos = in[0] + mi;
    if (pos >= max_pos) return;
    if (hb >= H + Hkv) {
        int vh = hb - H - Hkv;
        for (int i = threadIdx.x; i < D; i += blockDim.x)
            v_cache[(size_t)pos * Hkv * D + vh * D + i] = v_new[(size_t)mi * ld_kv_new + vh * D + i];
        return;
    }
    const float *src;
    const float *w;
    float *dst;
    if (hb < H) {
        src = q_gate + (size_t)mi * ld_q_gate + (size_t)2 * hb * D;
        w = qn;
        dst = qout + (size_t)mi * H * D + hb * D;
    } else {
        int kh = hb - H;
        src = k_new + (size_t)mi * ld_kv_new + kh * D;
        w = kn;
        dst = k_cache + (size_t)pos * Hkv * D + kh * D;
    }
    float *x = sm;
    __shared__ float s_sc;
    for (int i = threadIdx.x; i < D; i += blockDim.x) x[i] = src[i];
    __syncthreads();
    if (threadIdx.x < 32) {
        float ss = warp_dot(x, x, D, threadIdx.x);
        if (threadIdx.x == 0) s_sc = kite_rsqrtf(ss / (float)D + eps);
    }
    __syncthreads();
    float sc = s_sc;
    for (int i = threadIdx.x; i < D; i += blockDim.x) x[i] = (x[i] * sc) * w[i];
    __syncthreads();
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float r;
        if (i < half) {
            float c = cos_tab[(size_t)pos * half_tab + i], s = sin_tab[(size_t)pos * half_tab + i];
            r = x[i] * c - x[i + half] * s;
        } else if (i < 2 * half) {
            int i0 = i - half;
            float c = cos_tab[(size_t)pos * half_tab + i0], s = sin_tab[(size_t)pos * half_tab + i0];
            r = x[i0] * s + x[i] * c;
        } else {
            r = x[i];
        }
        dst[i] = r;
    }
}

