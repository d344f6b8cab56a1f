// gemv_tile_device.cuh - the body of k_gemv_tile (gemv_tile.cu) over one CTA.
#pragma once
#include "activation_device.cuh"
#include "bulk_copy.cuh"
#include "gemv_tile.cuh"
#include "matvec_device.cuh"

// A CTA's shared memory, in bytes from its start: KC_TILE_STAGES stages of [KC_TILE_ROWS][row
// bytes] quants then [KC_TILE_ROWS][k / 32] f16 scales; the quantized input xq [k] and its scales
// xd [k / 32]; the stages' full and empty mbarriers. Every part 16-byte aligned (k % 256 == 0).
struct TileLayout {
    size_t row_bytes, stage_scales, stage, xq, xd, bars, total;
};
__host__ __device__ __forceinline__ TileLayout tile_layout(int k, bool q4) {
    TileLayout L;
    L.row_bytes = q4 ? (size_t)k / 2 : (size_t)k;
    L.stage_scales = KC_TILE_ROWS * L.row_bytes;
    L.stage = L.stage_scales + KC_TILE_ROWS * ((size_t)k / 32) * 2;
    L.xq = KC_TILE_STAGES * L.stage;
    L.xd = L.xq + (size_t)k;
    L.bars = L.xd + (size_t)k / 32 * 4;
    L.total = L.bars + 2 * KC_TILE_STAGES * 8;
    return L;
}

// Lane partials of R rows of a stage (stage rows t0 .. t0 + R - 1; rows at or past `rows` repeat
// row t0) against the quantized input: lane l adds blocks l, l + 32, ... in order, each as k_gemv's
// (float)(int32 block dot) * (weight scale * input scale) (docs/NUMERICS.md).
template <int R>
__device__ __forceinline__ void tile_rows(const unsigned char *quants, const uint16_t *scales, size_t row_bytes,
                                          const int8_t *xq, const float *xd, int t0, int rows, int k, bool q8, int lane,
                                          float (&acc)[R]) {
    const int nb = k >> 5;
#pragma unroll
    for (int rr = 0; rr < R; rr++) acc[rr] = 0.0f;
    for (int b = lane; b < nb; b += 32) {
        const int4 x0 = *(const int4 *)(xq + (size_t)b * 32), x1 = *(const int4 *)(xq + (size_t)b * 32 + 16);
        const float xs = xd[b];
        int xsum = 0;
        if (!q8) {
            xsum = __dp4a(0x01010101, x0.x, xsum);
            xsum = __dp4a(0x01010101, x0.y, xsum);
            xsum = __dp4a(0x01010101, x0.z, xsum);
            xsum = __dp4a(0x01010101, x0.w, xsum);
            xsum = __dp4a(0x01010101, x1.x, xsum);
            xsum = __dp4a(0x01010101, x1.y, xsum);
            xsum = __dp4a(0x01010101, x1.z, xsum);
            xsum = __dp4a(0x01010101, x1.w, xsum);
        }
#pragma unroll
        for (int rr = 0; rr < R; rr++) {
            const int t = t0 + rr < rows ? t0 + rr : t0;
            const float wd = half_bits_to_f32(scales[(size_t)t * nb + b]);
            int is = 0;
            if (q8) {
                const int4 *wp = (const int4 *)(quants + (size_t)t * row_bytes + (size_t)b * 32);
                const int4 a = wp[0], c = wp[1];
                is = __dp4a(a.x, x0.x, is);
                is = __dp4a(a.y, x0.y, is);
                is = __dp4a(a.z, x0.z, is);
                is = __dp4a(a.w, x0.w, is);
                is = __dp4a(c.x, x1.x, is);
                is = __dp4a(c.y, x1.y, is);
                is = __dp4a(c.z, x1.z, is);
                is = __dp4a(c.w, x1.w, is);
            } else {
                const int4 w = *(const int4 *)(quants + (size_t)t * row_bytes + (size_t)b * 16);
                is = __dp4a(w.x & 0x0F0F0F0F, x0.x, is);
                is = __dp4a(w.y & 0x0F0F0F0F, x0.y, is);
                is = __dp4a(w.z & 0x0F0F0F0F, x0.z, is);
                is = __dp4a(w.w & 0x0F0F0F0F, x0.w, is);
                is = __dp4a((w.x >> 4) & 0x0F0F0F0F, x1.x, is);
                is = __dp4a((w.y >> 4) & 0x0F0F0F0F, x1.y, is);
                is = __dp4a((w.z >> 4) & 0x0F0F0F0F, x1.z, is);
                is = __dp4a((w.w >> 4) & 0x0F0F0F0F, x1.w, is);
                is = is - 8 * xsum;
            }
            const float p = (float)is * (wd * xs);
            acc[rr] = acc[rr] + p;
        }
    }
}

#if KC_BULK_COPY
// The producer's copies of stage s (CTA rows [s * KC_TILE_ROWS, ...) of rows_here) into its
// slot: quants and scales of each job's part, all counted on the slot's full barrier.
__device__ __forceinline__ void tile_issue(const TileArgs &a, const TileLayout &L, unsigned char *slot, uint64_t *full,
                                           int r_begin, int rows_here, int s) {
    const MatvecJobs &js = a.js;
    const int nb = js.j[0].k >> 5;
    const int lo_cta = s * KC_TILE_ROWS, hi_cta = min(lo_cta + KC_TILE_ROWS, rows_here);
    mbar_arrive_expect(full, (unsigned)((size_t)(hi_cta - lo_cta) * (L.row_bytes + (size_t)nb * 2)));
    for (int t = 0; t < js.nj; t++) {
        const MatvecJob &J = js.j[t];
        const int lo = max(r_begin + lo_cta, J.row0), hi = min(r_begin + hi_cta, J.row0 + J.n);
        if (hi <= lo) continue;
        const int d = lo - (r_begin + lo_cta); // the part's first row in the slot
        bulk_copy(slot + (size_t)d * L.row_bytes, (const unsigned char *)J.q + (size_t)(lo - J.row0) * L.row_bytes,
                  (unsigned)((size_t)(hi - lo) * L.row_bytes), full);
        bulk_copy(slot + L.stage_scales + (size_t)d * nb * 2, J.s + (size_t)(lo - J.row0) * nb,
                  (unsigned)((size_t)(hi - lo) * nb * 2), full);
    }
}
#endif

// One CTA of k_gemv_tile.
template <class Wait>
__device__ __forceinline__ void gemv_tile_block(const TileArgs &a, const BlockAt &at, const Wait &wait) {
#if KC_BULK_COPY
    extern __shared__ __align__(16) unsigned char smraw[];
    const MatvecJobs &js = a.js;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = js.j[0].k;
    const bool q8 = js.j[0].type == KCUDA_T_Q8_0;
    const TileLayout L = tile_layout(k, !q8);
    const int r_begin = at.x * a.rows_per_cta;
    const int rows_here = min(a.rows_per_cta, a.rows - r_begin);
    const int stages = (rows_here + KC_TILE_ROWS - 1) / KC_TILE_ROWS;
    int8_t *xq = (int8_t *)(smraw + L.xq);
    float *xd = (float *)(smraw + L.xd);
    uint64_t *full = (uint64_t *)(smraw + L.bars), *empty = full + KC_TILE_STAGES;
    const bool producer = warp == KC_TILE_CONSUMERS;
    if (threadIdx.x == 0) {
        for (int i = 0; i < KC_TILE_STAGES; i++) {
            mbar_init(&full[i], 1);
            mbar_init(&empty[i], KC_TILE_CONSUMERS);
        }
        mbar_init_done();
    }
    __syncthreads();
    // weights are immutable: the first stages before the wait
    if (producer && lane == 0)
        for (int s = 0; s < stages && s < KC_TILE_STAGES; s++)
            tile_issue(a, L, smraw + (size_t)s * L.stage, &full[s], r_begin, rows_here, s);
    wait();
    block_norm_quant(a.x, a.norm, k, a.eps, xq, xd, at.x == 0 ? a.out2 : nullptr);
    if (producer) {
        // the next stages, each into its slot once the consumers have freed it
        if (lane == 0)
            for (int s = KC_TILE_STAGES; s < stages; s++) {
                const int i = s % KC_TILE_STAGES;
                mbar_wait(&empty[i], (unsigned)((s / KC_TILE_STAGES - 1) & 1));
                tile_issue(a, L, smraw + (size_t)i * L.stage, &full[i], r_begin, rows_here, s);
            }
        return;
    }
    constexpr int R = KC_TILE_ROWS / KC_TILE_CONSUMERS; // rows a consumer warp a stage
    for (int s = 0; s < stages; s++) {
        const int i = s % KC_TILE_STAGES;
        const unsigned char *slot = smraw + (size_t)i * L.stage;
        const int rows = min(KC_TILE_ROWS, rows_here - s * KC_TILE_ROWS), t0 = warp * R;
        mbar_wait(&full[i], (unsigned)((s / KC_TILE_STAGES) & 1));
        if (t0 < rows) {
            float acc[R];
            tile_rows<R>(slot, (const uint16_t *)(slot + L.stage_scales), L.row_bytes, xq, xd, t0, rows, k, q8, lane, acc);
            const float v = warp_sum32_scatter<R>(acc, lane);
            const int t = t0 + lane / (32 / R);
            if (lane % (32 / R) == 0 && t < rows) {
                const int grow = r_begin + s * KC_TILE_ROWS + t;
                const MatvecJob &J = js.j[job_of(js, grow)];
                float *y = J.y + (grow - J.row0);
                *y = J.add ? *y + v : v;
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[i]);
    }
#else
    (void)a;
    (void)at;
    (void)wait; // never planned without bulk copies (gemv_tile_plan)
#endif
}
