#include "attention.cuh"
#include "warp_math.cuh"

// One block per (query head, row). scores / probabilities in global scratch [m][H][max_pos].
__global__ void __launch_bounds__(KC_THREADS)
k_attn(const float *q, const float *k_cache, const float *v_cache, const float *q_gate, int ld_q_gate, const int *__restrict__ in, int H, int Hkv, int D,
       float *scores, int max_pos, float *out, int ldo) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int h = blockIdx.x, mi = blockIdx.y;
    const int n = in[0] + mi + 1;
    if (n > max_pos) return;
    const int kvh = h / (H / Hkv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float *qr = q + (size_t)mi * H * D + h * D;
    float *sc = scores + ((size_t)mi * H + h) * max_pos;
    const float scale = kite_rsqrtf((float)D);
    __shared__ float s_red[KC_WARPS];
    __shared__ float s_sum;
    if ((D & 31) == 0 && D <= KC_ATT_D) {
        // Four positions per warp at a time: q's elements of this lane held in registers, the
        // four rows of k loaded together (one round trip where one position took two), then
        // the four canonical sums in one reduce-scatter, position t0 + u in lanes 8u .. 8u + 7.
        constexpr int NC = KC_ATT_D / 32;
        const int nc = D >> 5;
        float qv[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) qv[c] = c < nc ? qr[lane + 32 * c] : 0.0f;
        for (int t0 = 4 * warp; t0 < n; t0 += 4 * KC_WARPS) {
            float kv[4][NC], p[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int t = t0 + u < n ? t0 + u : t0;
                const float *kr = k_cache + (size_t)t * Hkv * D + kvh * D + lane;
#pragma unroll
                for (int c = 0; c < NC; c++) kv[u][c] = c < nc ? kr[32 * c] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                p[u] = 0.0f;
#pragma unroll
                for (int c = 0; c < NC; c++)
                    if (c < nc) p[u] = p[u] + qv[c] * kv[u][c];
            }
            const float v = warp_sum32_scatter<4>(p, lane);
            const int t = t0 + lane / 8;
            if ((lane & 7) == 0 && t < n) sc[t] = v * scale;
        }
    } else {
        for (int t = warp; t < n; t += KC_WARPS) {
            const float *kr = k_cache + (size_t)t * Hkv * D + kvh * D;
            float p = lane_dot(qr, kr, D, lane);
            p = warp_sum32(p);
            if (lane == 0) sc[t] = p * scale;
        }
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < n; t += blockDim.x) mx = fmaxf(mx, sc[t]);
    mx = warp_max(mx);
    if (lane == 0) s_red[warp] = mx;
    __syncthreads();
    mx = s_red[0];
    for (int w = 1; w < KC_WARPS; w++) mx = fmaxf(mx, s_red[w]);
    for (int t = threadIdx.x; t < n; t += blockDim.x) sc[t] = kite_expf(sc[t] - mx);
    __syncthreads();
    if (warp == 0) {
        float s = 0.0f;
        for (int t = lane; t < n; t += 32) s = s + sc[t];
        s = warp_sum32(s);
        if (lane == 0) s_sum = s;
    }
    __syncthreads();
    const float sum = s_sum;
    for (int t = threadIdx.x; t < n; t += blockDim.x) sc[t] = sc[t] / sum;
    __syncthreads();
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float s[32];
#pragma unroll
        for (int l = 0; l < 32; l++) s[l] = 0.0f;
        const float *vp = v_cache + kvh * D + d;
        for (int t0 = 0; t0 < n; t0 += 32) {
#pragma unroll
            for (int l = 0; l < 32; l++) {
                int t = t0 + l;
                if (t < n) s[l] = s[l] + sc[t] * vp[(size_t)t * Hkv * D];
            }
        }
        // the tree over the 32 partials, one loop per level: written as a loop over off, the
        // compiler kept it rolled and s[] in local memory
#pragma unroll
        for (int l = 0; l < 16; l++) s[l] = s[l] + s[l + 16];
#pragma unroll
        for (int l = 0; l < 8; l++) s[l] = s[l] + s[l + 8];
#pragma unroll
        for (int l = 0; l < 4; l++) s[l] = s[l] + s[l + 4];
        s[0] = s[0] + s[2];
        s[1] = s[1] + s[3];
        s[0] = s[0] + s[1];
        float gate = q_gate[(size_t)mi * ld_q_gate + (size_t)2 * h * D + D + d];
        out[(size_t)mi * ldo + h * D + d] = s[0] * kite_sigmoidf(gate);
    }
}

