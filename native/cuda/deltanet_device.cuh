// deltanet_device.cuh - the body of k_deltanet (deltanet.cu) over one block.
#pragma once
#include "deltanet.cuh"
#include "warp_math.cuh"

// Gated DeltaNet, one op per layer: blocks (value head h, slice of nw rows of S), nw warps
// (k_deltanet: dn_warps, enough threads for one channel each; with fewer, some threads take a
// second channel). Each block computes the
// causal conv + SiLU of the channels it needs (q and k of key head h % Hk, v of its rows) for
// every row of the pass, L2-normalises q and k, then each warp
// carries one row j of the state S[dv][dk] through the m rows (o[j] raw into y; the gated
// RMSNorm is the prologue of the ssm_out gemv). Conv inputs live in a ring of R >= K-1+m
// rows indexed by position: this pass reads positions < pos and writes pos..pos+m-1.
// The conv channel of thread t of a block: q and k of key head kh, then v of rows j0 ..
__device__ __forceinline__ int dn_channel(int t, int kh, int h, int j0, int Hk, int dk, int dv) {
    if (t < dk) return kh * dk + t;
    if (t < 2 * dk) return Hk * dk + kh * dk + (t - dk);
    return 2 * Hk * dk + h * dv + j0 + (t - 2 * dk);
}

// Phase 0 of k_deltanet for the usual kernel size K = KC_CONV_K: each thread's channel for the m
// rows of the pass, 8 rows at a time: the K - 1 history taps and the chunk's inputs loaded
// together (one round trip per chunk where each row took one), then each row's sum in tap order
// from the register window. The inputs of this pass go to the ring here, one writer per channel
// (q and k: slice 0 of value head h < Hk; v: the block of that row of S), instead of in a loop
// after phase 0 whose loads waited for its stores, row after row. Positions read (< pos) and
// written (pos .. pos + m - 1) are distinct ring rows: R >= K - 1 + m.
#define KC_CONV_K 4
__device__ __forceinline__ void dn_conv_window(const float *qkv, int C, const float *__restrict__ cw, float *ring,
                                               int R, int h, int kh, int j0, int slice, int Hk, int dk, int dv, int nw,
                                               int pos, int m, int per, float *sm) {
    constexpr int KK = KC_CONV_K, CH = 8, NW = KK - 1 + CH;
    for (int t = threadIdx.x; t < 2 * dk + nw; t += blockDim.x) {
        if (t >= 2 * dk && j0 + (t - 2 * dk) >= dv) continue;
        const int c = dn_channel(t, kh, h, j0, Hk, dk, dv);
        const bool writer = t >= 2 * dk || (slice == 0 && h < Hk);
        float wv[KK];
#pragma unroll
        for (int jj = 0; jj < KK; jj++) wv[jj] = cw[(size_t)c * KK + jj];
        for (int m0 = 0; m0 < m; m0 += CH) {
            float xw[NW]; // xw[i]: position pos + m0 - (KK - 1) + i (0 before position 0)
#pragma unroll
            for (int i = 0; i < NW; i++) {
                const int pp = pos + m0 - (KK - 1) + i;
                xw[i] = 0.0f;
                if (pp >= 0 && pp < pos + m)
                    xw[i] = pp >= pos ? qkv[(size_t)(pp - pos) * C + c] : ring[(size_t)(pp % R) * C + c];
            }
#pragma unroll
            for (int r = 0; r < CH; r++) {
                const int mi = m0 + r;
                if (mi >= m) break;
                float acc = 0.0f;
#pragma unroll
                for (int jj = 0; jj < KK; jj++) acc = acc + wv[jj] * xw[r + jj];
                sm[(size_t)mi * per + t] = kite_siluf(acc);
                if (writer) ring[(size_t)((pos + mi) % R) * C + c] = xw[r + KK - 1];
            }
        }
    }
}

template <class Wait>
__device__ __forceinline__ void deltanet_block(const DeltanetArgs &a, const BlockAt &at, const Wait &wait) {
    const float *qkv = a.qkv, *cw = a.conv_w, *betab = a.beta, *alphab = a.alpha;
    const int C = a.C, K = a.K, R = a.ring_rows, ldba = a.ld_beta, Hk = a.Hk, dk = a.dk, dv = a.dv;
    const int ldy = a.ldy, m = a.m;
    const float eps = a.eps;
    float *ring = a.ring, *S_all = a.S, *y = a.y;
    extern __shared__ float sm[];
    const int h = at.x, kh = h % Hk;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int j0 = at.y * nw;
    // Row j of the state was last written by the previous pass (which completed before the
    // first kernel of this one started): load it before waiting for this pass's inputs.
    const int j = j0 + warp;
    const int nc = (dk + 31) >> 5;
    float *S = S_all + ((size_t)h * dv + (j < dv ? j : 0)) * dk;
    float st[KC_DK_MAX / 32];
#pragma unroll
    for (int c = 0; c < KC_DK_MAX / 32; c++) {
        int i = lane + 32 * c;
        st[c] = (j < dv && c < nc && i < dk) ? S[i] : 0.0f;
    }
    // the conv history (positions before this pass) and the conv weights are ready too: ask L2
    // for them (the position comes from the host copy that precedes the pass)
    const int pos = a.in[0];
    for (int t = threadIdx.x; t < 2 * dk + nw; t += blockDim.x) {
        if (t >= 2 * dk && j0 + (t - 2 * dk) >= dv) continue;
        const int c = dn_channel(t, kh, h, j0, Hk, dk, dv);
        KC_PREFETCH_L2(cw + (size_t)c * K);
        for (int jj = 0; jj < K - 1; jj++) {
            const int pp = pos - (K - 1) + jj;
            if (pp >= 0) KC_PREFETCH_L2(ring + (size_t)(pp % R) * C + c);
        }
    }
    wait();
    // Phase 1 has three tasks a row: q's norm (task mi), k's norm (m + mi) and the gates
    // (2m + mi), dealt to the warps in turn. The gate inputs of this warp's first gates task are
    // loaded now, so that phase 1 does not wait for them.
    int first_gates = warp;
    while (first_gates < 2 * m) first_gates += nw;
    const int pre_row = first_gates < 3 * m ? first_gates - 2 * m : -1;
    float bt_in = 0.0f, al_in = 0.0f;
    if (lane == 0 && pre_row >= 0) {
        bt_in = betab[(size_t)pre_row * ldba + h];
        al_in = alphab[(size_t)pre_row * ldba + h];
    }
    const float a_h = __ldg(&a.ssm_a[h]), dt_h = __ldg(&a.dt_bias[h]);
    const int per = 2 * dk + nw + 2;
    // phase 0: conv + SiLU
    if (K == KC_CONV_K) {
        dn_conv_window(qkv, C, cw, ring, R, h, kh, j0, at.y, Hk, dk, dv, nw, pos, m, per, sm);
    } else {
        for (int t = threadIdx.x; t < 2 * dk + nw; t += blockDim.x) {
            if (t >= 2 * dk && j0 + (t - 2 * dk) >= dv) continue;
            const int c = dn_channel(t, kh, h, j0, Hk, dk, dv);
            const float *wc = cw + (size_t)c * K;
            for (int mi = 0; mi < m; mi++) {
                const int p = pos + mi;
                // all taps loaded first (K <= 9: at most 8 history taps), then the sum in tap order
                float xv[8], wv[8];
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    xv[jj] = 0.0f;
                    wv[jj] = 0.0f;
                    if (jj < K - 1) {
                        const int pp = p - (K - 1) + jj;
                        wv[jj] = wc[jj];
                        if (pp >= 0) xv[jj] = pp >= pos ? qkv[(size_t)(pp - pos) * C + c] : ring[(size_t)(pp % R) * C + c];
                    }
                }
                const float wl = wc[K - 1], xl = qkv[(size_t)mi * C + c];
                float acc = 0.0f;
#pragma unroll
                for (int jj = 0; jj < 8; jj++)
                    if (jj < K - 1) acc = acc + wv[jj] * xv[jj];
                acc = acc + wl * xl;
                sm[(size_t)mi * per + t] = kite_siluf(acc);
            }
        }
        // ring writes (positions of this pass, read by later passes only)
        if (at.y == 0) {
            const int nqk = h < Hk ? 2 * dk : 0;
            for (int t = threadIdx.x; t < nqk + dv; t += blockDim.x) {
                int c = t < nqk ? (t < dk ? h * dk + t : Hk * dk + h * dk + (t - dk)) : 2 * Hk * dk + h * dv + (t - nqk);
                for (int mi = 0; mi < m; mi++)
                    ring[(size_t)((pos + mi) % R) * C + c] = qkv[(size_t)mi * C + c];
            }
        }
    }
    __syncthreads();
    // phase 1: L2 norms, beta, decay; at m = 1 three warps side by side, where one warp did all
    // three after one another
    for (int task = warp; task < 3 * m; task += nw) {
        const int mi = task % m, kind = task / m;
        float *q = sm + (size_t)mi * per, *kk = q + dk, *bd = q + 2 * dk + nw;
        if (kind == 0) {
            float sq = warp_dot(q, q, dk, lane);
            float iq = kite_rsqrtf(sq + eps), qs = kite_rsqrtf((float)dk);
            __syncwarp();
            for (int i = lane; i < dk; i += 32) q[i] = (q[i] * iq) * qs;
        } else if (kind == 1) {
            float sk = warp_dot(kk, kk, dk, lane);
            float ik = kite_rsqrtf(sk + eps);
            __syncwarp();
            for (int i = lane; i < dk; i += 32) kk[i] = kk[i] * ik;
        } else if (lane == 0) {
            if (mi != pre_row) {
                bt_in = betab[(size_t)mi * ldba + h];
                al_in = alphab[(size_t)mi * ldba + h];
            }
            float bt = kite_sigmoidf(bt_in);
            float g = a_h * kite_softplusf(al_in + dt_h);
            bd[0] = bt;
            bd[1] = kite_expf(g);
        }
    }
    __syncthreads();
    // phase 2: row j of S
    if (j >= dv) return;
    for (int mi = 0; mi < m; mi++) {
        const float *q = sm + (size_t)mi * per, *kk = q + dk, *bd = q + 2 * dk + nw;
        const float vj = q[2 * dk + warp];
        const float decay = bd[1], beta = bd[0];
        float p = 0.0f;
#pragma unroll
        for (int c = 0; c < KC_DK_MAX / 32; c++) {
            int i = lane + 32 * c;
            if (c < nc && i < dk) {
                st[c] = st[c] * decay;
                p = p + st[c] * kk[i];
            }
        }
        const float kv = warp_sum32(p);
        float delta = (vj - kv) * beta;
        float p2 = 0.0f;
#pragma unroll
        for (int c = 0; c < KC_DK_MAX / 32; c++) {
            int i = lane + 32 * c;
            if (c < nc && i < dk) {
                st[c] = st[c] + kk[i] * delta;
                p2 = p2 + st[c] * q[i];
            }
        }
        p2 = warp_sum32(p2);
        if (lane == 0) y[(size_t)mi * ldy + h * dv + j] = p2;
    }
#pragma unroll
    for (int c = 0; c < KC_DK_MAX / 32; c++) {
        int i = lane + 32 * c;
        if (c < nc && i < dk) S[i] = st[c];
    }
}


// k_deltanet_head (M=1): one block per value head h, KC_DNH_WARPS warps, warp w carries state rows
// j = w, w + KC_DNH_WARPS, ... (DNH_RW of them) of S[dv][dk] (dk = 32 * DNH_NC). Everything final
// before the step is loaded before the PDL wait, and nothing is computed from it there: the state
// rows, the conv weights and history. After the wait: the conv's sum in tap order (the history
// taps, then the current row's) and SiLU, the L2 norms and gates (one warp each), the state rows
// (the same float operations as deltanet_block, row by row), then the gated RMSNorm of the head's
// dv outputs and its quantization (k_actq mode 3's operations: every quantizing warp takes the
// head's sum32 of o^2 by warp_dot), written to oq / od for the output product. The rows' raw
// outputs o stay in shared memory (y is not written). The block's warps share an SM's 4 issue
// slots, so an instruction a warp saves is KC_DNH_WARPS / 4 issue cycles of the op: dk and dv are
// the constants deltanet_head_fits checks, the indices 32-bit, and a warp's DNH_RW row sums one
// scatter.
template <class Wait>
__device__ __forceinline__ void deltanet_head_block(const DeltanetArgs &a, const BlockAt &at, const Wait &wait) {
    constexpr int dk = 32 * DNH_NC, dv = KC_DNH_WARPS * DNH_RW, RL = 32 / DNH_RW; // RL: lanes a row sum
    const float *qkv = a.qkv, *cw = a.conv_w, *betab = a.beta, *alphab = a.alpha;
    const int C = a.C, K = a.K, R = a.ring_rows, Hk = a.Hk;
    const float eps = a.eps;
    float *ring = a.ring;
    const int h = at.x, kh = h < Hk ? h : h % Hk;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // [q dk][k dk][v dv][beta, decay]: the conv outputs, then the gates; o [dv]: the rows' outputs
    __shared__ float sm[2 * dk + dv + 2];
    __shared__ float so[dv];
    float *S = a.S + h * (dv * dk) + warp * dk + lane; // this thread's column of its first row
    float st[DNH_RW][DNH_NC];
#pragma unroll
    for (int r = 0; r < DNH_RW; r++)
#pragma unroll
        for (int c = 0; c < DNH_NC; c++) st[r][c] = S[KC_DNH_WARPS * dk * r + 32 * c];
    const int pos = a.in[0];
    const int t = threadIdx.x;
    const bool conv = t < 2 * dk + dv;
    const int c = conv ? dn_channel(t, kh, h, 0, Hk, dk, dv) : 0;
    // the conv's history taps j < K - 1 (K <= DNH_TAPS + 1), zero before position 0: their values
    // loaded here into registers of their own, and nothing computed from them before the wait, so
    // that the block reaches its wait at once and these loads (behind the state rows') arrive
    // during its release; their weights loaded here too (below), and the sum after the wait with
    // the current row, in tap order, as deltanet_block adds them
    float hx[DNH_TAPS]; // [tap]: the history value
    // tap jj's ring row, (pos - (K - 1) + jj) % R, by steps of one from the first tap's (one
    // division, not K - 1); negative before position 0. After K - 1 steps it is this position's
    // row, pos % R, which the current input is written to
    const int pp0 = pos - (K - 1);
    int slot = pp0 >= 0 ? pp0 % R : pp0, wslot = slot;
#pragma unroll
    for (int jj = 0; jj < DNH_TAPS; jj++) {
        hx[jj] = conv && jj < K - 1 && slot >= 0 ? ring[slot * C + c] : 0.0f;
        slot = slot + 1 == R ? 0 : slot + 1;
        if (jj + 1 == K - 1) wslot = slot;
    }
    const float a_h = __ldg(&a.ssm_a[h]), dt_h = __ldg(&a.dt_bias[h]);
    const int jq = (int)threadIdx.x < dv ? (int)threadIdx.x : 0; // the gated norm's element (warps < dv / 32)
    const float nw_j = (int)threadIdx.x < dv ? __ldg(&a.norm_w[jq]) : 0.0f;
    // this channel's conv weights loaded now too (immutable; after the wait they sat in the trip of
    // the in-proj's outputs, where asking L2 for them did not help and loading them here did:
    // docs/PERFORMANCE.md); the gated norm's weight and the gates' two constants, whose loads above
    // ptxas may still issue after the wait, asked of L2
    float hw[DNH_TAPS], wl = 0.0f; // [tap]: the history taps' weights; the current row's
#pragma unroll
    for (int jj = 0; jj < DNH_TAPS; jj++) hw[jj] = conv && jj < K - 1 ? __ldg(&cw[c * K + jj]) : 0.0f;
    if (conv) wl = __ldg(&cw[c * K + K - 1]);
    if ((int)threadIdx.x < dv) KC_PREFETCH_L2(a.norm_w + jq);
    if (threadIdx.x == 0) {
        KC_PREFETCH_L2(a.ssm_a + h);
        KC_PREFETCH_L2(a.dt_bias + h);
    }
    wait();
    const float zj = (int)threadIdx.x < dv ? a.z[h * dv + jq] : 0.0f;
    float bt_in = 0.0f, al_in = 0.0f;
    if (warp == 2 && lane == 0) {
        bt_in = betab[h];
        al_in = alphab[h];
    }
    if (conv) {
        const float xl = qkv[c];
        float acc = 0.0f;
#pragma unroll
        for (int jj = 0; jj < DNH_TAPS; jj++)
            if (jj < K - 1) acc = acc + hw[jj] * hx[jj];
        acc = acc + wl * xl;
        sm[t] = kite_siluf(acc);
        if (t >= 2 * dk || h < Hk) ring[wslot * C + c] = xl;
    }
    __syncthreads();
    float *q = sm, *kk = sm + dk, *bd = sm + 2 * dk + dv;
    if (warp == 0) {
        float sq = warp_dot(q, q, dk, lane);
        float iq = kite_rsqrtf(sq + eps), qs = kite_rsqrtf((float)dk);
        __syncwarp();
#pragma unroll
        for (int i = lane; i < dk; i += 32) q[i] = (q[i] * iq) * qs;
    } else if (warp == 1) {
        float sk = warp_dot(kk, kk, dk, lane);
        float ik = kite_rsqrtf(sk + eps);
        __syncwarp();
#pragma unroll
        for (int i = lane; i < dk; i += 32) kk[i] = kk[i] * ik;
    } else if (warp == 2 && lane == 0) {
        float bt = kite_sigmoidf(bt_in);
        float g = a_h * kite_softplusf(al_in + dt_h);
        bd[0] = bt;
        bd[1] = kite_expf(g);
    }
    __syncthreads();
    const float decay = bd[1], beta = bd[0];
    float p[DNH_RW], kv[DNH_RW];
#pragma unroll
    for (int r = 0; r < DNH_RW; r++) {
        p[r] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < DNH_NC; cc++) {
            st[r][cc] = st[r][cc] * decay;
            p[r] = p[r] + st[r][cc] * kk[lane + 32 * cc];
        }
    }
    // the rows' k . S sums at once (warp_sum32's pairs), row r's in lanes r * RL ..; each to every lane
    const float kv_mine = warp_sum32_scatter<DNH_RW>(p, lane);
#pragma unroll
    for (int r = 0; r < DNH_RW; r++) kv[r] = __shfl_sync(0xffffffffu, kv_mine, r * RL);
#pragma unroll
    for (int r = 0; r < DNH_RW; r++) {
        const int j = warp + KC_DNH_WARPS * r;
        const float delta = (sm[2 * dk + j] - kv[r]) * beta;
        p[r] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < DNH_NC; cc++) {
            st[r][cc] = st[r][cc] + kk[lane + 32 * cc] * delta;
            p[r] = p[r] + st[r][cc] * q[lane + 32 * cc];
        }
    }
    const float o = warp_sum32_scatter<DNH_RW>(p, lane); // row lane / RL's output
    if (lane % RL == 0) so[warp + KC_DNH_WARPS * (lane / RL)] = o;
#pragma unroll
    for (int r = 0; r < DNH_RW; r++)
#pragma unroll
        for (int cc = 0; cc < DNH_NC; cc++) S[KC_DNH_WARPS * dk * r + 32 * cc] = st[r][cc];
    __syncthreads();
    if ((int)threadIdx.x < dv) {
        const float ss = warp_dot(so, so, dv, lane);
        const float sc = kite_rsqrtf(ss / (float)dv + eps);
        const float v = ((so[jq] * sc) * nw_j) * kite_siluf(zj);
        const int j0 = h * dv + warp * 32;
        quant_block32(v, lane, a.oq + j0, a.od + (j0 >> 5));
    }
}
