// matvec_device.cuh - the body of k_gemv (matvec.cu) over one block.
#pragma once
#include "matvec.cuh"
#include "warp_math.cuh"

// ptxas moves a load whose value is first used after the PDL wait to below the wait (a shorter
// live range), where its round trip no longer overlaps the previous kernel: every weight load of
// the M-row gemvs. An instruction ahead of the wait that reads a
// word of each load keeps them all ahead of it: a compare of their XOR and a fence under it
// (harmless the rare time it runs).
__device__ __forceinline__ void use_before_wait(int f) {
#if KC_HAS_PDL
    asm volatile("{\n\t.reg .pred p;\n\tsetp.eq.s32 p, %0, 0x7fc00001;\n\t@p membar.cta;\n\t}" ::"r"(f) : "memory");
#else
    (void)f; // no PDL wait to keep loads ahead of
#endif
}

// The sum of the 32 activation quants of one block (x0: values 0-15, x1: 16-31); Q4_0's block dot
// subtracts 8 times it (its quants are stored + 8).
__device__ __forceinline__ int block_qsum(int4 x0, int4 x1) {
    int xsum = 0;
    xsum = __dp4a(0x01010101, x0.x, xsum);
    xsum = __dp4a(0x01010101, x0.y, xsum);
    xsum = __dp4a(0x01010101, x0.z, xsum);
    xsum = __dp4a(0x01010101, x0.w, xsum);
    xsum = __dp4a(0x01010101, x1.x, xsum);
    xsum = __dp4a(0x01010101, x1.y, xsum);
    xsum = __dp4a(0x01010101, x1.z, xsum);
    xsum = __dp4a(0x01010101, x1.w, xsum);
    return xsum;
}

// The integer dot of one 32-value weight block with the activations' block x0, x1: Q8_0's two
// 16-byte halves lo, hi; or Q4_0's 16 packed bytes lo (low nibbles: values 0-15, high: 16-31; hi
// unused), less 8 * xsum (block_qsum).
__device__ __forceinline__ int block_idot(bool q8, int4 lo, int4 hi, int4 x0, int4 x1, int xsum) {
    int is = 0;
    if (q8) {
        is = __dp4a(lo.x, x0.x, is);
        is = __dp4a(lo.y, x0.y, is);
        is = __dp4a(lo.z, x0.z, is);
        is = __dp4a(lo.w, x0.w, is);
        is = __dp4a(hi.x, x1.x, is);
        is = __dp4a(hi.y, x1.y, is);
        is = __dp4a(hi.z, x1.z, is);
        is = __dp4a(hi.w, x1.w, is);
    } else {
        is = __dp4a(lo.x & 0x0F0F0F0F, x0.x, is);
        is = __dp4a(lo.y & 0x0F0F0F0F, x0.y, is);
        is = __dp4a(lo.z & 0x0F0F0F0F, x0.z, is);
        is = __dp4a(lo.w & 0x0F0F0F0F, x0.w, is);
        is = __dp4a((lo.x >> 4) & 0x0F0F0F0F, x1.x, is);
        is = __dp4a((lo.y >> 4) & 0x0F0F0F0F, x1.y, is);
        is = __dp4a((lo.z >> 4) & 0x0F0F0F0F, x1.z, is);
        is = __dp4a((lo.w >> 4) & 0x0F0F0F0F, x1.w, is);
        is = is - 8 * xsum;
    }
    return is;
}

// Lane partials of quantized weights. QT is the weight kind: 1 Q8_0, 2 Q4_0 (the M-row passes:
// one kernel body per kind, so a pair issues only its own block dot, half the instructions at
// M = 4), or 0: chosen per row at run time (the M=1 step: both block dots issued, one predicated
// off). M=1 keeps QT 0 because with the kind known, ptxas moves its weight loads after the PDL
// wait; predicated, they stay ahead of it, overlapping the previous kernel. QT 1 / 2 keep them
// ahead through use_before_wait. With QT 1 / 2 the loads are clamped in bounds, blocks u that
// no lane has are skipped (a warp-uniform branch), a lane whose block lies past the end of the row
// keeps its sum (a select), and the pairs of rows mm >= m are computed but never stored. Either
// way every pair that counts adds the same values in the same order as the plain loop over
// blocks b = lane, lane + 32, ... (lane l's canonical sum32 partial).
template <int MT, int RPW, int QT, class Wait>
__device__ __forceinline__ void warp_rows_q(const MatvecJob &J, int r0, int k, int m, const int8_t *XQ, const float *XD,
                                            int ldq, int ldd, int lane, const Wait &wait, bool &waited,
                                            float (&acc)[RPW][MT]) {
    const int nb = k >> 5;
    const bool q8 = QT == 0 ? J.type == KCUDA_T_Q8_0 : QT == 1;
    constexpr int U = RPW >= 4 ? 1 : 4 / RPW; // blocks per lane loaded ahead
    for (int b0 = lane; b0 < nb; b0 += 32 * U) {
        int4 w0[RPW][U], w1[RPW][U];
        float wd[RPW][U];
        const int nu = (nb - (b0 - lane) + 31) / 32; // b0 - lane is the same in every lane
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool have = QT == 0 ? b0 + 32 * u < nb : u == 0 || u < nu;
            const int b = QT == 0 || b0 + 32 * u < nb ? b0 + 32 * u : b0;
#pragma unroll
            for (int rr = 0; rr < RPW; rr++) {
                const int r = r0 + rr < J.n ? r0 + rr : r0;
                if (QT != 0) { // never read (its pairs are skipped below), but set: fewer registers
                    w0[rr][u] = w1[rr][u] = make_int4(0, 0, 0, 0);
                    wd[rr][u] = 0.0f;
                }
                if (!have) continue;
                if (q8) {
                    const int4 *wp = (const int4 *)((const int8_t *)J.q + (size_t)r * k + (size_t)b * 32);
                    w0[rr][u] = __ldg(wp);
                    w1[rr][u] = __ldg(wp + 1);
                } else {
                    w0[rr][u] = __ldg((const int4 *)((const uint8_t *)J.q + (size_t)r * (k >> 1) + (size_t)b * 16));
                }
                wd[rr][u] = half_bits_to_f32(__ldg(J.s + (size_t)r * nb + b));
            }
        }
        if (!waited) {
            if constexpr (QT != 0) {
                int f = 0;
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int rr = 0; rr < RPW; rr++)
                        f ^= w0[rr][u].x ^ (q8 ? w1[rr][u].x : 0) ^ __float_as_int(wd[rr][u]);
                use_before_wait(f);
            }
            wait();
            waited = true;
        }
        // Activations of G (block, row) pairs are loaded together, then used: one round trip
        // to L2 per G pairs instead of one per pair (a load under `if (mm < m)` or after a
        // `break` is not hoisted by the compiler). Pairs run block-major, so every acc[rr][mm]
        // still adds its blocks in increasing order. G is 4, but all U * MT pairs of a one-row-
        // per-warp M-row gemv at MT 2 and 4, so that their activations come in one round trip
        // as an M=1 gemv's do.
        constexpr int GMAX = RPW == 1 && MT >= 2 && MT <= 4 ? 16 : 4;
        constexpr int NP = U * MT, G = NP < GMAX ? NP : GMAX;
#pragma unroll
        for (int p0 = 0; p0 < NP; p0 += G) {
            int4 xa[G], xb[G];
            float xs[G];
#pragma unroll
            for (int g = 0; g < G; g++) {
                const int u = (p0 + g) / MT, mm = (p0 + g) % MT;
                const int b = b0 + 32 * u < nb ? b0 + 32 * u : b0;
                const int mr = mm < m ? mm : 0;
                const int4 *xp = (const int4 *)(XQ + (size_t)mr * ldq + (size_t)b * 32);
                xa[g] = xp[0];
                xb[g] = xp[1];
                xs[g] = XD[(size_t)mr * ldd + b];
            }
#pragma unroll
            for (int g = 0; g < G; g++) {
                const int u = (p0 + g) / MT, mm = (p0 + g) % MT;
                if (QT == 0 ? b0 + 32 * u >= nb || mm >= m : u > 0 && u >= nu) continue;
                const bool ok = QT == 0 || u == 0 || b0 + 32 * u < nb;
                const int4 x0 = xa[g], x1 = xb[g];
                const int xsum = q8 ? 0 : block_qsum(x0, x1);
#pragma unroll
                for (int rr = 0; rr < RPW; rr++) {
                    const int is = block_idot(q8, w0[rr][u], w1[rr][u], x0, x1, xsum);
                    const float p = (float)is * (wd[rr][u] * xs[g]);
                    const float sum = acc[rr][mm] + p;
                    acc[rr][mm] = ok ? sum : acc[rr][mm];
                }
            }
        }
    }
}

// Lane partials acc[rr][mm] of rows r0 .. r0+RPW-1 of J (rows past J.n repeat row r0) times
// m rows of activations: quantized (XQ / XD, row strides ldq / ldd) or float (xf, stride ldx).
// Lane l adds its blocks (elements) l, l+32, ... in order: the canonical sum32 partials. The
// first weights are loaded before the PDL wait (`waited`), activations only after it.
template <int MT, int RPW, class Wait>
__device__ __forceinline__ void warp_rows(const MatvecJob &J, int r0, int k, int m, const int8_t *XQ, const float *XD,
                                          int ldq, int ldd, const float *xf, int ldx, int lane, const Wait &wait,
                                          bool &waited, float (&acc)[RPW][MT]) {
#pragma unroll
    for (int rr = 0; rr < RPW; rr++)
#pragma unroll
        for (int mm = 0; mm < MT; mm++) acc[rr][mm] = 0.0f;
    if (J.type == KCUDA_T_Q8_0 || J.type == KCUDA_T_Q4_0) {
        if constexpr (MT == 1)
            warp_rows_q<MT, RPW, 0>(J, r0, k, m, XQ, XD, ldq, ldd, lane, wait, waited, acc);
        else if (J.type == KCUDA_T_Q8_0)
            warp_rows_q<MT, RPW, 1>(J, r0, k, m, XQ, XD, ldq, ldd, lane, wait, waited, acc);
        else
            warp_rows_q<MT, RPW, 2>(J, r0, k, m, XQ, XD, ldq, ldd, lane, wait, waited, acc);
    } else {
        if (!waited) {
            wait();
            waited = true;
        }
        const int type = J.type;
        for (int i = lane; i < k; i += 32) {
            float wv[RPW];
#pragma unroll
            for (int rr = 0; rr < RPW; rr++) {
                int r = r0 + rr < J.n ? r0 + rr : r0;
                size_t idx = (size_t)r * k + i;
                if (type == KCUDA_T_F32)
                    wv[rr] = __ldg((const float *)J.q + idx);
                else if (type == KCUDA_T_F16)
                    wv[rr] = half_bits_to_f32(__ldg((const uint16_t *)J.q + idx));
                else
                    wv[rr] = kite_bf16_to_f32(__ldg((const uint16_t *)J.q + idx));
            }
#pragma unroll
            for (int mm = 0; mm < MT; mm++) {
                if (mm < m) {
                    float xv = xf[(size_t)mm * ldx + i];
#pragma unroll
                    for (int rr = 0; rr < RPW; rr++) acc[rr][mm] = acc[rr][mm] + wv[rr] * xv;
                }
            }
        }
    }
}

// The job that global row `grow` of a launch belongs to (jobs are laid out by row0).
__device__ __forceinline__ int job_of(const MatvecJobs &js, int grow) {
    int ji = 0;
#pragma unroll
    for (int t = 1; t < 4; t++)
        if (t < js.nj && grow >= js.j[t].row0) ji = t;
    return ji;
}

// Ask L2 for the first rows of weights of this block's warps before waiting for the previous
// op and before the prologue, so that the memory latency overlaps them (a hint only: weights
// are immutable and no value depends on it).
template <int RPW>
__device__ __forceinline__ void gemv_prefetch_l2(const GemvArgs &a, const BlockAt &at) {
    const MatvecJobs &js = a.js;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int k = js.j[0].k, nb = k >> 5;
    const int gw0 = at.x * nw + warp;
    if (gw0 >= js.nwarps) return;
    const int grow = gw0 * RPW;
    const MatvecJob &J = js.j[job_of(js, grow)];
    const int r0 = grow - J.row0;
    if (r0 < J.n && (J.type == KCUDA_T_Q8_0 || J.type == KCUDA_T_Q4_0)) {
        const size_t rb = J.type == KCUDA_T_Q8_0 ? (size_t)k : (size_t)(k >> 1);
        for (int rr = 0; rr < RPW && r0 + rr < J.n; rr++) {
            const char *qb = (const char *)J.q + (size_t)(r0 + rr) * rb;
            for (size_t off = (size_t)lane * 128; off < rb; off += 32 * 128)
                KC_PREFETCH_L2(qb + off);
            if (lane == 0) KC_PREFETCH_L2(J.s + (size_t)(r0 + rr) * nb);
        }
    }
}

// The SM's clock, low 32 bits (a difference of two is right across a wrap); 0 without PDL, where
// nothing waits on it (l2_ahead).
__device__ __forceinline__ unsigned sm_clock32() {
#if KC_HAS_PDL
    unsigned t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t));
    return t;
#else
    return 0;
#endif
}

// This warp's share of what ah asks L2 for, once ah.delay cycles have passed since t0 (the
// warp's start): the 128-byte lines 32 gw + lane, stepping by all the launch's warps, of each
// range (gw: the warp's index in the launch). Called ahead of the wait, after the warp's own loads.
__device__ __forceinline__ void l2_ahead(const L2Ahead &ah, const BlockAt &at, unsigned t0) {
    if (ah.lines[0] == 0) return;
#if KC_HAS_PDL
    while ((int)(sm_clock32() - t0) < ah.delay) __nanosleep(64);
#else
    (void)t0; // no PDL: nothing runs beside this launch
#endif
    const unsigned lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const unsigned step = (unsigned)at.nx * nw * 32, first = ((unsigned)at.x * nw + (threadIdx.x >> 5)) * 32 + lane;
#pragma unroll
    for (int i = 0; i < KC_AHEAD; i++)
        for (unsigned line = first; line < ah.lines[i]; line += step) KC_PREFETCH_L2(ah.p[i] + (size_t)line * 128);
}

// The activations of one block in shared memory, built by the prologue P from the m rows it
// reads (sq: int8 [m][k], sd: block scales [m][k / 32], ssc: row or head scales): the same float
// operations as k_actq (docs/NUMERICS.md). Every thread of the block calls it (two barriers).
template <int MT>
__device__ __forceinline__ void gemv_prologue(const Prologue &P, int m, int k, const BlockAt &at, unsigned char *smraw) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int nb = k >> 5;
    int8_t *sq = (int8_t *)smraw;
    float *sd = (float *)(smraw + (size_t)MT * k);
    float *ssc = sd + (size_t)MT * nb;
    const int nh = P.mode == 3 ? k / P.hs : 1;
    if (P.mode == 1) {
        for (int mi = warp; mi < m; mi += nw) {
            const float *ar = P.a + (size_t)mi * P.lda;
            float ss = warp_dot(ar, ar, k, lane);
            if (lane == 0) ssc[mi] = kite_rsqrtf(ss / (float)k + P.eps);
        }
    } else if (P.mode == 3) {
        for (int t = warp; t < m * nh; t += nw) {
            int mi = t / nh, h = t % nh;
            const float *ar = P.a + (size_t)mi * P.lda + (size_t)h * P.hs;
            float ss = warp_dot(ar, ar, P.hs, lane);
            if (lane == 0) ssc[mi * nh + h] = kite_rsqrtf(ss / (float)P.hs + P.eps);
        }
    }
    __syncthreads();
    // one warp per 32-block (lane = element), 8 blocks per warp in flight: loads first
    const int tot = m * nb;
    for (int t0 = warp; t0 < tot; t0 += nw * 8) {
        float ra[8], rb[8], rw[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int t = t0 + nw * u;
            ra[u] = rb[u] = rw[u] = 0.0f;
            if (t < tot) {
                const int mi = t / nb, j = (t % nb) * 32 + lane;
                ra[u] = P.a[(size_t)mi * P.lda + j];
                if (P.mode >= 2) rb[u] = P.b[(size_t)mi * P.lda + j];
                if (P.mode == 1) rw[u] = P.w[j];
                else if (P.mode == 3) rw[u] = P.w[j % P.hs];
            }
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int t = t0 + nw * u;
            if (t >= tot) break;
            const int mi = t / nb, bb = t % nb, j = bb * 32 + lane;
            float v;
            if (P.mode == 1) v = (ra[u] * ssc[mi]) * rw[u];
            else if (P.mode == 2) v = kite_siluf(ra[u]) * rb[u];
            else if (P.mode == 3) v = ((ra[u] * ssc[mi * nh + j / P.hs]) * rw[u]) * kite_siluf(rb[u]);
            else v = ra[u];
            if (P.out2 && at.x == 0) P.out2[(size_t)mi * P.ld2 + j] = v;
            quant_block32(v, lane, sq + (size_t)mi * k + bb * 32, sd + (size_t)mi * nb + bb);
        }
    }
    __syncthreads();
}

// The rows of one block: warps gw = x * warps + warp, x + nx ... (RPW output rows each) of the
// launch's jobs, for the m rows of MT, activations from XQ / XD (or xf).
template <int MT, int RPW, class Wait>
__device__ __forceinline__ void gemv_rows(const GemvArgs &a, const BlockAt &at, const int8_t *XQ, const float *XD,
                                          int ldq, int ldd, const Wait &wait, bool &waited) {
    const MatvecJobs &js = a.js;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int k = js.j[0].k, m = a.m;
    for (int gw = at.x * nw + warp; gw < js.nwarps; gw += at.nx * nw) {
        const int grow = gw * RPW;
        const MatvecJob &J = js.j[job_of(js, grow)];
        const int r0 = grow - J.row0;
        if (r0 >= J.n) continue;
        // the RPW * MT sums end in lanes lane / (32 / N) (one lane per value stores)
        constexpr int N = RPW * MT;
        const int i = lane / (32 / N), rr = i / MT, mm = i % MT;
        float acc[RPW][MT];
        if constexpr (MT == 1 && RPW == 1) {
            // The M=1 residual products (out, down: one row a warp): y[r], written by the ops
            // before, is read as soon as the wait is released, so that its round trip overlaps
            // the dots and the butterfly instead of following them. The same operands and the
            // same add (docs/NUMERICS.md); in the other instances it would cost registers.
            float *y = J.y + r0; // [1][n]
            const bool waited_before = waited;
            float y_old = 0.0f;
            const unsigned t0 = sm_clock32(); // l2_ahead's delay counts from the warp's first row
            auto wait_then_read_y = [&]() {
                l2_ahead(a.ahead, at, t0);
                wait();
                y_old = *y; // every lane: one address, one request
            };
            warp_rows<MT, RPW>(J, r0, k, m, XQ, XD, ldq, ldd, a.xf, a.ldx, lane, wait_then_read_y, waited, acc);
            if (waited_before) y_old = *y; // a later row of this warp: the wait is behind it
            const float v = warp_sum32_scatter<N>(&acc[0][0], lane);
            if (lane == 0) *y = J.add ? y_old + v : v;
        } else {
            warp_rows<MT, RPW>(J, r0, k, m, XQ, XD, ldq, ldd, a.xf, a.ldx, lane, wait, waited, acc);
            const float v = warp_sum32_scatter<N>(&acc[0][0], lane);
            if (lane % (32 / N) == 0 && mm < m && r0 + rr < J.n) {
                float *y = J.y + (size_t)mm * J.ldy + r0 + rr;
                *y = J.add ? *y + v : v;
            }
        }
    }
}

// One block of a gemv. Weights are immutable: a warp loads its first blocks of weights before it
// waits for the previous kernel (PDL), so that only the activation loads follow the wait.
// Everything that the previous kernels write is read (and y written) after the wait. PRO: the
// block builds its activations in shared memory first (P.mode >= 0), after the wait; a kernel
// of its own, so that the instances without it carry none of its code and registers.
template <int MT, int RPW, bool PRO, class Wait>
__device__ __forceinline__ void gemv_block(const GemvArgs &a, const BlockAt &at, const Wait &wait) {
    extern __shared__ __align__(16) unsigned char smraw[];
    const int k = a.js.j[0].k;
    gemv_prefetch_l2<RPW>(a, at);
    bool waited = false;
    if constexpr (PRO) {
        wait();
        waited = true;
        gemv_prologue<MT>(a.P, a.m, k, at, smraw);
        gemv_rows<MT, RPW>(a, at, (const int8_t *)smraw, (const float *)(smraw + (size_t)MT * k), k, k >> 5, wait,
                           waited);
    } else {
        gemv_rows<MT, RPW>(a, at, a.xq, a.xd, a.ldx, a.ldx >> 5, wait, waited);
    }
}

// One block of k_gemv_glu (matvec.cuh): with R = KC_GLU_RPW rows a warp, warp w < 32 / R takes
// gate rows 32c + R w .. + R - 1, the warps after it the same rows of up; each warp's R sums as
// gemv_rows stores them (the same lane partials and butterfly), then warp 0 makes the 32-block c
// of silu(gate) * up and quantizes it.
template <class Wait>
__device__ __forceinline__ void gemv_glu_block(const GluArgs &a, const BlockAt &at, const Wait &wait) {
    constexpr int R = KC_GLU_RPW, HALF = 32 / R; // rows a warp; warps a half (gate or up)
    __shared__ float s_gu[2][32]; // [gate, up][row of the 32-block]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int half = warp / HALF, r0 = at.x * 32 + (warp % HALF) * R;
    MatvecJob J = a.gate; // field by field: a kernel argument chosen at run time would go to local memory
    if (half) {
        J.q = a.up.q;
        J.s = a.up.s;
        J.type = a.up.type;
    }
    bool waited = false;
    float acc[R][1];
    warp_rows<1, R>(J, r0, J.k, 1, a.xq, a.xd, 0, 0, nullptr, 0, lane, wait, waited, acc);
    if (!waited) wait();
    const float v = warp_sum32_scatter<R>(&acc[0][0], lane);
    if (lane % (32 / R) == 0) s_gu[half][(warp % HALF) * R + lane / (32 / R)] = v;
    __syncthreads();
    if (warp == 0) {
        const float h = kite_siluf(s_gu[0][lane]) * s_gu[1][lane];
        quant_block32(h, lane, a.oq + (size_t)at.x * 32, a.od + at.x);
    }
}
