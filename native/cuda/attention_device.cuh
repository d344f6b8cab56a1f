// attention_device.cuh - the bodies of the attention kernels (attention.cu), each over one block.
#pragma once
#include "attention.cuh"
#include "warp_math.cuh"

// Full attention. Prep: per head block, RMSNorm with q_norm/k_norm, NeoX RoPE on n_rot dims,
// k and v stored in the cache at pos + mi. Blocks [0,H): query; [H,H+Hkv): key; then value.

template <class Wait>
__device__ __forceinline__ void qkprep_block(const QkprepArgs &a, const BlockAt &at, const Wait &wait) {
    wait();
    const int H = a.H, Hkv = a.Hkv, D = a.D, ld_q_gate = a.ld_q_gate, ld_kv_new = a.ld_kv_new;
    const int half = a.half, half_tab = a.half_tab, max_pos = a.max_pos;
    const float *cos_tab = a.cos_tab, *sin_tab = a.sin_tab;
    float *k_cache = a.k_cache, *v_cache = a.v_cache;
    extern __shared__ float sm[];
    const int hb = at.x, mi = at.y;
    const int pos = a.in[0] + mi;
    if (pos >= max_pos) return;
    if (hb >= H + Hkv) {
        int vh = hb - H - Hkv;
        for (int i = threadIdx.x; i < D; i += blockDim.x)
            v_cache[(size_t)pos * Hkv * D + vh * D + i] = a.v_new[(size_t)mi * ld_kv_new + vh * D + i];
        return;
    }
    const float *src;
    const float *w;
    float *dst;
    if (hb < H) {
        src = a.q_gate + (size_t)mi * ld_q_gate + (size_t)2 * hb * D;
        w = a.q_norm;
        dst = a.q_out + (size_t)mi * H * D + hb * D;
    } else {
        int kh = hb - H;
        src = a.k_new + (size_t)mi * ld_kv_new + kh * D;
        w = a.k_norm;
        dst = k_cache + (size_t)pos * Hkv * D + kh * D;
    }
    float *x = sm;
    __shared__ float s_sc;
    for (int i = threadIdx.x; i < D; i += blockDim.x) x[i] = src[i];
    __syncthreads();
    if (threadIdx.x < 32) {
        float ss = warp_dot(x, x, D, threadIdx.x);
        if (threadIdx.x == 0) s_sc = kite_rsqrtf(ss / (float)D + a.eps);
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


// Scores t0, t0 + stride, ... (KC_ATT_BATCH of them, 0 past n), loads issued together: from L2
// (global, written by other blocks) or from this block's shared memory.
template <bool global>
__device__ __forceinline__ void load_scores(const float *sc, int t0, int stride, int n, float (&e)[KC_ATT_BATCH]) {
#pragma unroll
    for (int u = 0; u < KC_ATT_BATCH; u++) {
        const int t = t0 + u * stride;
        e[u] = t < n ? (global ? __ldcg(&sc[t]) : sc[t]) : 0.0f;
    }
}

// This thread's scores (t = threadIdx.x, + blockDim.x, ...) rewritten in place, loads in batches:
// exp(score - by) (the numerators), or, with divide, score / by (the probabilities).
template <bool divide, bool global>
__device__ __forceinline__ void rewrite_scores(float *sc, int n, float by) {
    const int threads = blockDim.x;
    for (int t0 = threadIdx.x; t0 < n; t0 += KC_ATT_BATCH * threads) {
        float e[KC_ATT_BATCH];
        load_scores<global>(sc, t0, threads, n, e);
#pragma unroll
        for (int u = 0; u < KC_ATT_BATCH; u++) {
            const int t = t0 + u * threads;
            if (t < n) sc[t] = divide ? e[u] / by : kite_expf(e[u] - by);
        }
    }
}

// The scores of positions t = 0 .. n-1 of one (query head, row: q row qr) that this warp takes:
// groups of four positions first_group, first_group + group_stride, ... of KV head kvh, GROUPS
// groups' loads in flight at a time. Each score is dot(q, k_t) * scale, written to sc[t]; returns
// the largest of them (-inf if none) in every lane.
template <int GROUPS>
__device__ __forceinline__ float score_positions(const float *qr, const float *k_cache, int Hkv, int D, int kvh,
                                                 int n, int first_group, int group_stride, float *sc) {
    const int lane = threadIdx.x & 31;
    const float scale = kite_rsqrtf((float)D);
    float mx = -INFINITY;
    if ((D & 31) == 0 && D <= KC_ATT_D) {
        // Four positions per warp a group: q's elements of this lane held in registers, the four
        // rows of k of each group loaded together, then each group's four canonical sums in one
        // reduce-scatter, position t0 + u in lanes 8u .. 8u + 7.
        constexpr int NC = KC_ATT_D / 32;
        const int nc = D >> 5;
        float qv[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) qv[c] = c < nc ? qr[lane + 32 * c] : 0.0f;
        for (int t0 = 4 * first_group; t0 < n; t0 += 4 * group_stride * GROUPS) {
            float kv[GROUPS][4][NC];
#pragma unroll
            for (int gi = 0; gi < GROUPS; gi++)
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int tg = t0 + 4 * group_stride * gi;
                    const int t = tg + u < n ? tg + u : (tg < n ? tg : t0); // a row that exists
                    const float *kr = k_cache + (size_t)t * Hkv * D + kvh * D + lane;
#pragma unroll
                    for (int c = 0; c < NC; c++) kv[gi][u][c] = c < nc ? kr[32 * c] : 0.0f;
                }
#pragma unroll
            for (int gi = 0; gi < GROUPS; gi++) {
                float p[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    p[u] = 0.0f;
#pragma unroll
                    for (int c = 0; c < NC; c++)
                        if (c < nc) p[u] = p[u] + qv[c] * kv[gi][u][c];
                }
                const float v = warp_sum32_scatter<4>(p, lane);
                const int t = t0 + 4 * group_stride * gi + lane / 8;
                if ((lane & 7) == 0 && t < n) {
                    sc[t] = v * scale;
                    mx = fmaxf(mx, v * scale);
                }
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
    return warp_max(mx); // max is exact in any order
}

// Scores of one (query head, row) turned into probabilities in place, by the whole block, given
// their maximum mx: p[t] = e[t] / sum, e[t] = exp(score[t] - mx), sum = sum32(e). Each pass issues
// its loads in batches (KC_ATT_BATCH per thread) before using them.
template <bool global>
__device__ __forceinline__ void softmax_in_place(float *sc, int n, float mx) {
    __shared__ float s_sum;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    rewrite_scores<false, global>(sc, n, mx);
    __syncthreads();
    if (warp == 0) {
        // lane l adds e[l], e[l + 32], ... in order (sum32's lanes)
        float s = 0.0f;
        for (int t0 = lane; t0 < n; t0 += 32 * KC_ATT_BATCH) {
            float e[KC_ATT_BATCH];
            load_scores<global>(sc, t0, 32, n, e);
#pragma unroll
            for (int u = 0; u < KC_ATT_BATCH; u++)
                if (t0 + 32 * u < n) s = s + e[u];
        }
        s = warp_sum32(s);
        if (lane == 0) s_sum = s;
    }
    __syncthreads();
    rewrite_scores<true, global>(sc, n, s_sum);
}

// The end of the gated weighted sum of v for columns d = z * 32 + col (col = lane), given each
// thread's partials s[j] = sum32's partial g + PARTS * j of its column (g = its warp): the
// canonical tree over the 32 partials in shared memory, then warp 0 writes o[d] = sum * sigmoid
// (gate) and, with oq set (D % 32 == 0), quantizes the 32-block into oq / od (k_actq mode 0's
// operations).
template <int PARTS>
__device__ __forceinline__ void values_out(const ValuesArgs &a, const float (&s)[32 / PARTS], float gate, int h,
                                           int mi, int z) {
    constexpr int PG = 32 / PARTS;
    const int g = threadIdx.x >> 5, col = threadIdx.x & 31, D = a.D, d = z * 32 + col;
    __shared__ float partials[32][32]; // [sum32 partial][column]
#pragma unroll
    for (int j = 0; j < PG; j++) partials[g + PARTS * j][col] = s[j];
    __syncthreads();
    for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
        for (int j = 0; j < PG; j++) {
            const int part = g + PARTS * j;
            if (part < off) partials[part][col] = partials[part][col] + partials[part + off][col];
        }
        __syncthreads();
    }
    if (g == 0) {
        float o = 0.0f;
        if (d < D) {
            o = partials[0][col] * kite_sigmoidf(gate);
            a.out[(size_t)mi * a.ldo + h * D + d] = o;
        }
        if (a.oq) {
            const size_t j0 = (size_t)h * D + (size_t)z * 32;
            quant_block32(o, col, a.oq + (size_t)mi * a.ldq + j0, a.od + (size_t)mi * (a.ldq >> 5) + (j0 >> 5));
        }
    }
}

// Whether a row of n positions takes the short path: k_attn_scores' blocks z < ceil(D / 32)
// then compute it all, one output 32-block each, and k_attn_values leaves it alone.
__device__ __forceinline__ bool attn_short_row(int n, int D) {
    return n <= KC_ATT_SHORT && (D + 31) / 32 <= KC_ATT_SPLITS;
}

// k_attn_scores' short path, the block of column block z (8 warps): the head's n scores and their
// softmax in shared memory (warp g the positions 4g .. 4g + 3, + 32, ..., two groups' keys in
// flight; the same float operations as the split path), then its columns' sum32 partials, warp g's
// the partials g, g + 8, g + 16, g + 24, each over positions part, part + 32, ... Every load is
// issued right after the wait (this lane's v of its partials' positions, its gate, q, the keys);
// nothing passes between blocks.
__device__ __forceinline__ void attn_short(const ScoresArgs &a, int h, int mi, int z, int n) {
    constexpr int PG = 32 / KC_WARPS, NV = KC_ATT_SHORT / 32; // partials a thread, positions a partial
    static_assert(KC_ATT_SHORT % 32 == 0 && PG * KC_WARPS == 32, "whole partials, every partial a warp's");
    const ValuesArgs &va = a.values;
    const int g = threadIdx.x >> 5, col = threadIdx.x & 31, D = a.D, d = z * 32 + col;
    const int kvh = h / (a.H / a.Hkv);
    float vv[PG][NV];
    const float *vp = va.v_cache + kvh * D + d;
#pragma unroll
    for (int j = 0; j < PG; j++)
#pragma unroll
        for (int b = 0; b < NV; b++) {
            const int t = g + KC_WARPS * j + 32 * b;
            vv[j][b] = t < n && d < D ? vp[(size_t)t * a.Hkv * D] : 0.0f;
        }
    const float gate = d < D ? va.q_gate[(size_t)mi * va.ld_q_gate + (size_t)2 * h * D + D + d] : 0.0f;
    __shared__ float s_p[KC_ATT_SHORT]; // the scores, then the probabilities
    __shared__ float s_red[KC_WARPS];
    float mx = score_positions<2>(a.q + (size_t)mi * a.H * D + h * D, a.k_cache, a.Hkv, D, kvh, n, g, KC_WARPS, s_p);
    if (col == 0) s_red[g] = mx;
    __syncthreads();
    mx = s_red[0];
    for (int w = 1; w < KC_WARPS; w++) mx = fmaxf(mx, s_red[w]);
    softmax_in_place<false>(s_p, n, mx);
    __syncthreads();
    float sum[PG];
#pragma unroll
    for (int j = 0; j < PG; j++) {
        sum[j] = 0.0f;
#pragma unroll
        for (int b = 0; b < NV; b++) {
            const int t = g + KC_WARPS * j + 32 * b;
            if (t < n) sum[j] = sum[j] + s_p[t] * vv[j][b];
        }
    }
    values_out<KC_WARPS>(va, sum, gate, h, mi, z);
}

// Scores of one (query head, row) at the positions t = 0 .. n-1, split across the z blocks
// (groups of four positions dealt round-robin to the warps of all the splits), so that a long
// context keeps many SMs busy. Each split leaves its largest score in split_max; the last split
// of a head to finish (a counter in global memory) turns the head's scores into probabilities.
// scores: [m][H][max_pos]; split_max: [m][H][splits]; splits_done: [m][H], zero between passes.
// A short row (attn_short_row) takes attn_short instead.
template <class Wait>
__device__ __forceinline__ void attn_scores_block(const ScoresArgs &a, const BlockAt &at, const Wait &wait) {
    const int pos = a.in[0], lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kvh = at.x / (a.H / a.Hkv);
    const float *kp = a.k_cache + kvh * a.D;
    // Positions before this pass (written by earlier passes, final now) into L2 before the wait:
    // short path, every row of k and this block's 32 columns (one line) of v; split path, the
    // rows of k each warp reads below, lanes 8u .. 8u + 7 on row t0 + u.
    if (attn_short_row(pos + at.y + 1, a.D)) {
        const int lines = (a.D + 31) / 32;
        if (at.z < lines) {
            for (int i = threadIdx.x; i < pos * lines; i += blockDim.x)
                KC_PREFETCH_L2(kp + (size_t)(i / lines) * a.Hkv * a.D + (i % lines) * 32);
            for (int t = threadIdx.x; t < pos; t += blockDim.x)
                KC_PREFETCH_L2(a.values.v_cache + (size_t)t * a.Hkv * a.D + kvh * a.D + at.z * 32);
        }
    } else {
        const int line = lane & 7;
        const int first_group = at.z * KC_WARPS + warp, group_stride = at.nz * KC_WARPS;
        for (int t = 4 * first_group + (lane >> 3); t < pos && line * 32 < a.D; t += 4 * group_stride)
            KC_PREFETCH_L2(kp + (size_t)t * a.Hkv * a.D + line * 32);
    }
    wait();
    const int H = a.H, D = a.D, max_pos = a.max_pos;
    float *split_max = a.split_max;
    int *splits_done = a.splits_done;
    const int h = at.x, mi = at.y, split = at.z, splits = at.nz;
    const int n = a.in[0] + mi + 1;
    if (n > max_pos) return;
    if (attn_short_row(n, D)) {
        if (split < (D + 31) / 32) attn_short(a, h, mi, split, n);
        return;
    }
    const int head = mi * H + h;
    float *sc = a.scores + (size_t)head * max_pos;
    __shared__ float s_red[KC_WARPS];
    __shared__ int s_last;
    float mx = score_positions<1>(a.q + (size_t)mi * H * D + h * D, a.k_cache, a.Hkv, D, kvh, n,
                                  split * KC_WARPS + warp, splits * KC_WARPS, sc);
    // the split's largest score
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

    // The last split: the head's probabilities from every split's scores, which sit in L2 (one
    // round trip per position would make this block the tail of the pass).
    __threadfence();
    mx = -INFINITY;
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, __ldcg(&split_max[(size_t)head * splits + s]));
    softmax_in_place<true>(sc, n, mx);
    if (threadIdx.x == 0) splits_done[head] = 0;
}

// The gated weighted sum of v: o[d] = sum32(t -> p[t] * v_t[d]), times sigmoid(gate[d]).
// Blocks (h, m, z < ceil(D / 32)) of KC_VAL_THREADS, 32 columns a block. Thread (g, col) =
// (warp, lane) owns sum32's partials part = g, g + KC_VAL_PARTS, ... of column d = z * 32 + col:
// positions t = part, part + 32, ... added in order, each partial on its own (values_out ends
// it). A warp reads one position of 32 adjacent columns. A short row (attn_short_row) has its
// outputs from k_attn_scores: its blocks only wait, so that the op after this one still waits
// for k_attn_scores.
template <class Wait>
__device__ __forceinline__ void attn_values_block(const ValuesArgs &a, const BlockAt &at, const Wait &wait) {
    const int g = threadIdx.x >> 5, col = threadIdx.x & 31;
    const int pos = a.in[0];
    const int kvh = at.x / (a.H / a.Hkv);
    if (col == 0 && !attn_short_row(pos + at.y + 1, a.D)) {
        // the values of positions before this pass into L2 before the wait: the block's 32
        // columns (one line) of the rows t = g, g + KC_VAL_PARTS, ... that warp g adds below
        const float *vp = a.v_cache + kvh * a.D + at.z * 32;
        for (int t = g; t < pos; t += KC_VAL_PARTS)
            KC_PREFETCH_L2(vp + (size_t)t * a.Hkv * a.D);
    }
    wait();
    const int D = a.D, h = at.x, mi = at.y, z = at.z;
    const int n = a.in[0] + mi + 1;
    if (n > a.max_pos || attn_short_row(n, D)) return;
    const int d = z * 32 + col;
    const float *p = a.probs + ((size_t)mi * a.H + h) * a.max_pos;
    const float gate = d < D ? a.q_gate[(size_t)mi * a.ld_q_gate + (size_t)2 * h * D + D + d] : 0.0f;
    constexpr int PG = 32 / KC_VAL_PARTS; // partials a thread owns
    float s[PG];
#pragma unroll
    for (int j = 0; j < PG; j++) s[j] = 0.0f;
    if (d < D) {
        const size_t row = (size_t)a.Hkv * D;
        const float *vp = a.v_cache + kvh * D + d;
        // positions base + g + KC_VAL_PARTS * j of KC_ATT_BATCH / PG bases at a time: loads issued
        // together, then each partial's adds in increasing t
        constexpr int NB = KC_ATT_BATCH / PG > 0 ? KC_ATT_BATCH / PG : 1;
        for (int base = 0; base < n; base += 32 * NB) {
            float pv[NB][PG], vv[NB][PG];
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int j = 0; j < PG; j++) {
                    const int t = base + 32 * b + g + KC_VAL_PARTS * j;
                    pv[b][j] = t < n ? p[t] : 0.0f;
                    vv[b][j] = t < n ? vp[(size_t)t * row] : 0.0f;
                }
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int j = 0; j < PG; j++)
                    if (base + 32 * b + g + KC_VAL_PARTS * j < n) s[j] = s[j] + pv[b][j] * vv[b][j];
        }
    }
    values_out<KC_VAL_PARTS>(a, s, gate, h, mi, z);
}
