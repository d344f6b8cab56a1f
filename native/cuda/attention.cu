#include "attention.cuh"
#include "warp_math.cuh"

// Scores t0, t0 + stride, ... (KC_ATT_BATCH of them, 0 past n) from L2, loads issued together.
__device__ __forceinline__ void load_scores(const float *sc, int t0, int stride, int n, float (&e)[KC_ATT_BATCH]) {
#pragma unroll
    for (int u = 0; u < KC_ATT_BATCH; u++) {
        const int t = t0 + u * stride;
        e[u] = t < n ? __ldcg(&sc[t]) : 0.0f;
    }
}

// This thread's scores (t = threadIdx.x, + KC_THREADS, ...) rewritten in place, loads in batches:
// exp(score - by) (the numerators), or, with divide, score / by (the probabilities).
template <bool divide>
__device__ __forceinline__ void rewrite_scores(float *sc, int n, float by) {
    for (int t0 = threadIdx.x; t0 < n; t0 += KC_ATT_BATCH * KC_THREADS) {
        float e[KC_ATT_BATCH];
        load_scores(sc, t0, KC_THREADS, n, e);
#pragma unroll
        for (int u = 0; u < KC_ATT_BATCH; u++) {
            const int t = t0 + u * KC_THREADS;
            if (t < n) sc[t] = divide ? e[u] / by : kite_expf(e[u] - by);
        }
    }
}

// Scores of one (query head, row) at the positions t = 0 .. n-1, split across gridDim.z blocks
// (groups of four positions dealt round-robin to the warps of all the splits), so that a long
// context keeps many SMs busy. Each split leaves its largest score in split_max; the last split
// of a head to finish (a counter in global memory) turns the head's scores into probabilities.
// scores: [m][H][max_pos]; split_max: [m][H][splits]; splits_done: [m][H], zero between passes.
__global__ void __launch_bounds__(KC_THREADS)
k_attn_scores(const float *q, const float *k_cache, const int *__restrict__ in, int H, int Hkv, int D,
              float *scores, int max_pos, float *split_max, int *splits_done) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int h = blockIdx.x, mi = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int n = in[0] + mi + 1;
    if (n > max_pos) return;
    const int kvh = h / (H / Hkv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int head = mi * H + h;
    const float *qr = q + (size_t)mi * H * D + h * D;
    float *sc = scores + (size_t)head * max_pos;
    const float scale = kite_rsqrtf((float)D);
    const int first_group = split * KC_WARPS + warp, group_stride = splits * KC_WARPS;
    __shared__ float s_red[KC_WARPS];
    __shared__ float s_sum;
    __shared__ int s_last;
    float mx = -INFINITY;
    if ((D & 31) == 0 && D <= KC_ATT_D) {
        // Four positions per warp at a time: q's elements of this lane held in registers, the
        // four rows of k loaded together, then the four canonical sums in one reduce-scatter,
        // position t0 + u in lanes 8u .. 8u + 7.
        constexpr int NC = KC_ATT_D / 32;
        const int nc = D >> 5;
        float qv[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) qv[c] = c < nc ? qr[lane + 32 * c] : 0.0f;
        for (int t0 = 4 * first_group; t0 < n; t0 += 4 * group_stride) {
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
            if ((lane & 7) == 0 && t < n) {
                sc[t] = v * scale;
                mx = fmaxf(mx, v * scale);
            }
        }
    } else {
        for (int t = first_group; t < n; t += group_stride) {
            const float *kr = k_cache + (size_t)t * Hkv * D + kvh * D;
            const float p = warp_sum32(lane_dot(qr, kr, D, lane));
            if (lane == 0) {
                sc[t] = p * scale;
                mx = fmaxf(mx, p * scale);
            }
        }
    }
    // the split's largest score (max is exact in any order)
    mx = warp_max(mx);
    if (lane == 0) s_red[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < KC_WARPS; w++) mx = fmaxf(mx, s_red[w]);
        split_max[(size_t)head * splits + split] = mx;
    }
    // publish this split's scores and maximum before counting it done
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&splits_done[head], 1) == splits - 1;
    __syncthreads();
    if (!s_last) return;

    // The last split: probabilities p[t] = e[t] / sum, e[t] = exp(score[t] - max), sum = sum32(e).
    // Each pass issues its loads in batches (KC_ATT_BATCH per thread) before using them: the
    // scores sit in L2, and one round trip per position would make this block the tail of the pass.
    __threadfence();
    mx = -INFINITY;
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, __ldcg(&split_max[(size_t)head * splits + s]));
    rewrite_scores<false>(sc, n, mx);
    __syncthreads();
    if (warp == 0) {
        // lane l adds e[l], e[l + 32], ... in order (sum32's lanes)
        float s = 0.0f;
        for (int t0 = lane; t0 < n; t0 += 32 * KC_ATT_BATCH) {
            float e[KC_ATT_BATCH];
            load_scores(sc, t0, 32, n, e);
#pragma unroll
            for (int u = 0; u < KC_ATT_BATCH; u++)
                if (t0 + 32 * u < n) s = s + e[u];
        }
        s = warp_sum32(s);
        if (lane == 0) s_sum = s;
    }
    __syncthreads();
    rewrite_scores<true>(sc, n, s_sum);
    if (threadIdx.x == 0) splits_done[head] = 0;
}

// The gated weighted sum of v: o[d] = sum32(t -> p[t] * v_t[d]), times sigmoid(gate[d]).
// Grid (H, m, ceil(D / KC_ATT_COLS)). Thread (part, col) = (threadIdx.x / KC_ATT_COLS,
// threadIdx.x % KC_ATT_COLS) owns sum32's partial `part` of column d = blockIdx.z * KC_ATT_COLS + col:
// positions t = part, part + 32, ... added in order; then the canonical tree over the 32
// partials in shared memory. A warp reads four positions of KC_ATT_COLS adjacent columns.
__global__ void __launch_bounds__(KC_THREADS)
k_attn_values(const float *probs, const float *v_cache, const float *q_gate, int ld_q_gate, const int *__restrict__ in,
              int H, int Hkv, int D, int max_pos, float *out, int ldo) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int h = blockIdx.x, mi = blockIdx.y;
    const int n = in[0] + mi + 1;
    if (n > max_pos) return;
    const int kvh = h / (H / Hkv);
    const int part = threadIdx.x / KC_ATT_COLS, col = threadIdx.x % KC_ATT_COLS;
    const int d = blockIdx.z * KC_ATT_COLS + col;
    const float *p = probs + ((size_t)mi * H + h) * max_pos;
    __shared__ float partials[32][KC_ATT_COLS]; // [sum32 partial][column]
    float s = 0.0f;
    if (d < D) {
        const size_t row = (size_t)Hkv * D;
        const float *vp = v_cache + kvh * D + d;
        int t = part;
        // KC_ATT_BATCH positions' loads issued together, then their adds in order
        for (; t + 32 * (KC_ATT_BATCH - 1) < n; t += 32 * KC_ATT_BATCH) {
            float pv[KC_ATT_BATCH], vv[KC_ATT_BATCH];
#pragma unroll
            for (int u = 0; u < KC_ATT_BATCH; u++) {
                pv[u] = p[t + 32 * u];
                vv[u] = vp[(size_t)(t + 32 * u) * row];
            }
#pragma unroll
            for (int u = 0; u < KC_ATT_BATCH; u++) s = s + pv[u] * vv[u];
        }
        for (; t < n; t += 32) s = s + p[t] * vp[(size_t)t * row];
    }
    partials[part][col] = s;
    __syncthreads();
    for (int off = 16; off > 0; off >>= 1) {
        if (part < off) partials[part][col] = partials[part][col] + partials[part + off][col];
        __syncthreads();
    }
    if (part == 0 && d < D) {
        const float gate = q_gate[(size_t)mi * ld_q_gate + (size_t)2 * h * D + D + d];
        out[(size_t)mi * ldo + h * D + d] = partials[0][col] * kite_sigmoidf(gate);
    }
}
