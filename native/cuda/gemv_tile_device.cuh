// gemv_tile_device.cuh - the body of k_gemv_tile (gemv_tile.cu) over one CTA.
#pragma once
#include "activation_device.cuh"
#include "bulk_copy.cuh"
#include "gemv_tile.cuh"
#include "matvec_device.cuh"

// A CTA's shared memory, in bytes from its start: quants [rows_per_cta][row bytes], f16 scales
// [rows_per_cta][k / 32], the quantized input xq [k] and its scales xd [k / 32], the mbarrier.
// Every part starts 16-byte aligned when k % 256 == 0.
struct TileLayout {
    size_t scales, xq, xd, bar, total;
};
__host__ __device__ __forceinline__ TileLayout tile_layout(int rows_per_cta, int k, bool q4) {
    TileLayout L;
    const size_t row_bytes = q4 ? (size_t)k / 2 : (size_t)k, nb = (size_t)k / 32;
    L.scales = (size_t)rows_per_cta * row_bytes;
    L.xq = L.scales + (size_t)rows_per_cta * nb * 2;
    L.xd = L.xq + (size_t)k;
    L.bar = L.xd + nb * 4;
    L.total = L.bar + 16;
    return L;
}

// Lane partials of 4 rows of the tile (local rows t0 .. t0 + 3, the last repeated past rows_here)
// against the quantized input: lane l adds blocks l, l + 32, ... in order, each as k_gemv's
// (float)(int32 block dot) * (weight scale * input scale) (docs/NUMERICS.md).
__device__ __forceinline__ void tile_rows4(const unsigned char *quants, const uint16_t *scales, const int8_t *xq,
                                           const float *xd, int t0, int rows_here, int k, bool q8, int lane,
                                           float (&acc)[4]) {
    const int nb = k >> 5;
    const size_t row_bytes = q8 ? (size_t)k : (size_t)k / 2;
#pragma unroll
    for (int rr = 0; rr < 4; rr++) acc[rr] = 0.0f;
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
        for (int rr = 0; rr < 4; rr++) {
            const int t = t0 + rr < rows_here ? t0 + rr : t0;
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

// One CTA of k_gemv_tile: stage the weights, wait, build the input, wait for the weights, dot.
template <class Wait>
__device__ __forceinline__ void gemv_tile_block(const TileArgs &a, const BlockAt &at, const Wait &wait) {
    extern __shared__ __align__(16) unsigned char smraw[];
    const MatvecJobs &js = a.js;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int k = js.j[0].k, nb = k >> 5;
    const bool q8 = js.j[0].type == KCUDA_T_Q8_0;
    const size_t row_bytes = q8 ? (size_t)k : (size_t)k / 2;
    const TileLayout L = tile_layout(a.rows_per_cta, k, !q8);
    const int r_begin = at.x * a.rows_per_cta;
    const int rows_here = min(a.rows_per_cta, a.rows - r_begin);
    unsigned char *quants = smraw;
    uint16_t *scales = (uint16_t *)(smraw + L.scales);
    int8_t *xq = (int8_t *)(smraw + L.xq);
    float *xd = (float *)(smraw + L.xd);
    uint64_t *bar = (uint64_t *)(smraw + L.bar);
    // the weights of rows [r_begin, r_begin + rows_here), quants and scales of each job's part
    stage_begin(bar, (unsigned)((size_t)rows_here * (row_bytes + (size_t)nb * 2)));
    for (int t = 0; t < js.nj; t++) {
        const MatvecJob &J = js.j[t];
        const int lo = max(r_begin, J.row0), hi = min(r_begin + rows_here, J.row0 + J.n);
        if (hi <= lo) continue;
        stage_copy(quants + (size_t)(lo - r_begin) * row_bytes, (const unsigned char *)J.q + (size_t)(lo - J.row0) * row_bytes,
                   (unsigned)((size_t)(hi - lo) * row_bytes), bar);
        stage_copy(scales + (size_t)(lo - r_begin) * nb, J.s + (size_t)(lo - J.row0) * nb,
                   (unsigned)((size_t)(hi - lo) * nb * 2), bar);
    }
    wait();
    block_norm_quant(a.x, a.norm, k, a.eps, xq, xd, at.x == 0 ? a.out2 : nullptr);
    stage_wait(bar);
    // rows in groups of 4 a warp (the sums of a group in one scatter, as k_gemv<1, 4>)
    for (int t0 = warp * 4; t0 < rows_here; t0 += nw * 4) {
        float acc[4];
        tile_rows4(quants, scales, xq, xd, t0, rows_here, k, q8, lane, acc);
        const float v = warp_sum32_scatter<4>(acc, lane);
        const int rr = lane / 8, t = t0 + rr;
        if (lane % 8 == 0 && t < rows_here) {
            const int grow = r_begin + t;
            const MatvecJob &J = js.j[job_of(js, grow)];
            float *y = J.y + (grow - J.row0);
            *y = J.add ? *y + v : v;
        }
    }
}
