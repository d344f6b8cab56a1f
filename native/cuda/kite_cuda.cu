// kite_cuda.cu - the kite CUDA module: device init, per-op gemm, the resident model (M=1 and
// M-row steps), CUDA graphs. Every kernel follows docs/NUMERICS.md: a warp is the 32 lanes of
// sum32 (lane l owns partial l, then __shfl_xor_sync by 16, 8, 4, 2, 1), blocks split output
// rows, quantized block dots are exact int32, element-wise math comes from kite_math.h.
// Built with -fmad=false (no FMA contraction), IEEE division and square root.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kite_cuda.h"
#include "kite_math.h"

#define KC_WARPS 8
// rows from which a gemv gets its activations from k_actq instead of its own prologue (1: always)
#ifndef KC_ACTQ_MIN_M
#define KC_ACTQ_MIN_M 1
#endif
// programmatic dependent launch (sm_90+) between the kernels of one forward pass: each kernel
// lets the next one be scheduled at its start, and waits for the previous one to complete (and
// its memory to be visible) before it touches any activation or state. Pointers to activations
// and state are never `const __restrict__` in a kernel: the compiler may treat such loads as
// invariant (ld.global.nc) and issue them before the wait.
#ifndef KC_PDL
#define KC_PDL 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KC_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define KC_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define KC_PDL_TRIGGER() do { } while (0)
#define KC_PDL_WAIT() do { } while (0)
#endif
#define KC_NCHUNK 16              // chunks of the logits copy back to the host
#define KC_CHUNK_MIN (64 * 1024)  // floats per chunk at least
// pieces of the LM head: the logits of piece p are copied back while piece p + 1 is computed
#ifndef KC_LM_PIECES
#define KC_LM_PIECES 4
#endif
// host threads (besides the caller's) that copy logits chunks of an M-row pass out of the
// pinned staging
#ifndef KC_COPY_THREADS
#define KC_COPY_THREADS 3
#endif
#define KC_THREADS (KC_WARPS * 32)
#define KC_ATT_D 256 // head sizes up to this (multiples of 32) take k_attn's register path

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess)                                                                 \
            return (int32_t)e_;                                                                \
    } while (0)

#define CKS(x)                                                                                 \
    do {                                                                                       \
        int32_t s_ = (x);                                                                      \
        if (s_ != 0)                                                                           \
            return s_;                                                                         \
    } while (0)

// ------------------------------------------------------------------------------------------------
// Module state

static int g_ready = 0;          // kcuda_init succeeded
static int g_device = 0;
static cudaStream_t g_stream = 0;
static int g_opt_graph = 1;      // KCUDA_OPT_GRAPH
static int g_opt_graph_m = 0;    // KCUDA_OPT_GRAPH_M
static int g_cc_major = 0;
static int g_pdl = 0;            // launches of the current forward pass carry the PDL attribute

// Launch on g_stream, with the programmatic-serialization attribute while g_pdl is set.
template <typename... KArgs, typename... Args>
static cudaError_t klaunch(void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = g_stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = g_pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, args...);
}

// ------------------------------------------------------------------------------------------------
// Device utilities

// The butterfly steps off0, off0 / 2, ..., 1: each lane adds its partner's value (lane l ^ off).
// Lanes l and l + off add the same pair, as x + y and y + x: the same float, so every lane ends
// with the value the canonical order gives lane 0.
__device__ __forceinline__ float warp_sum_from(float v, int off0) {
    for (int off = off0; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// canonical sum32 of the lane partials (lane l holds partial l), in every lane
__device__ __forceinline__ float warp_sum32(float v) { return warp_sum_from(v, 16); }

// One step of warp_sum32_scatter: n values per lane, partner lane ^ off. The steps are a
// template recursion so that every index into v is a constant (a loop over n was left rolled
// for 16 values, which put the sums in local memory).
template <int n, int off>
__device__ __forceinline__ void scatter_steps(float *v, int lane) {
    if constexpr (n > 1) {
        const bool hi = (lane & off) != 0;
#pragma unroll
        for (int j = 0; j < n / 2; j++) {
            const float keep = hi ? v[j + n / 2] : v[j], send = hi ? v[j] : v[j + n / 2];
            v[j] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
        scatter_steps<n / 2, off / 2>(v, lane);
    }
}

// N canonical sums at once (N a power of two <= 32; lane l holds the partials l of v[0..N-1]).
// Each butterfly step halves the values a lane keeps: it adds its partner's copy of the half
// it keeps (the same pairs as warp_sum32, whichever lane adds them) and sends the other half.
// Returns v[lane / (32 / N)]'s sum: N * 2 - 2 shuffles instead of N * 5.
template <int N>
__device__ __forceinline__ float warp_sum32_scatter(float *v, int lane) {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "N: a power of two <= 32");
    scatter_steps<N, 16>(v, lane);
    return warp_sum_from(v[0], 16 / N);
}

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Lane l's partial of the canonical dot a . b over n: i = l, l+32, ... added in order. The loads
// of W iterations are issued together, then their adds (W = 16; 32 for the 1024-wide row norms
// of k_actq: one round trip), then the rest 4 and 1 at a time.
template <int W>
__device__ __forceinline__ void lane_dot_run(const float *a, const float *b, int n, int &i, float &s) {
    for (; i + 32 * (W - 1) < n; i += 32 * W) {
        float pa[W], pb[W];
#pragma unroll
        for (int u = 0; u < W; u++) {
            pa[u] = a[i + 32 * u];
            pb[u] = b[i + 32 * u];
        }
#pragma unroll
        for (int u = 0; u < W; u++) s = s + pa[u] * pb[u];
    }
}

template <int W = 16>
__device__ __forceinline__ float lane_dot(const float *a, const float *b, int n, int lane) {
    float s = 0.0f;
    int i = lane;
    lane_dot_run<W>(a, b, n, i, s);
    lane_dot_run<4>(a, b, n, i, s);
    lane_dot_run<1>(a, b, n, i, s);
    return s;
}

// canonical sum32 of a[i] * b[i] over n (one warp; the result in every lane)
__device__ __forceinline__ float warp_dot(const float *a, const float *b, int n, int lane) {
    return warp_sum32(lane_dot(a, b, n, lane));
}

__device__ __forceinline__ float half_bits_to_f32(uint16_t h) {
    return __half2float(__ushort_as_half(h)); // exact
}

// Quantization of one 32-block of activations (lane l holds element l; the whole warp calls
// it): d = max|v| / 127, q = round-to-nearest-even(v / d) clamped to +-127, NaN -> 0. The same
// operations as the CPU's (docs/NUMERICS.md); q and d are stored at q[lane] and *d (lane 0).
__device__ __forceinline__ void quant_block32(float v, int lane, int8_t *q, float *d) {
    const float amax = warp_max(fabsf(v));
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    float qf = rintf(v * id);
    qf = qf > 127.0f ? 127.0f : (qf < -127.0f ? -127.0f : qf);
    if (qf != qf) qf = 0.0f;
    q[lane] = (int8_t)(int)qf;
    if (lane == 0) *d = dd;
}

// ------------------------------------------------------------------------------------------------
// Weights on the device

struct DW {
    int type = -1;      // KCUDA_T_*; -1 = absent
    int64_t ne0 = 0, ne1 = 0;
    void *q = nullptr;  // Q8_0: int8 [ne1][ne0]; Q4_0: uint8 [ne1][ne0/2]; F32/F16/BF16: the data
    uint16_t *s = nullptr; // Q8_0/Q4_0: f16 scales [ne1][ne0/32]
};

static void dw_free(DW &w) {
    if (w.q) cudaFree(w.q);
    if (w.s) cudaFree(w.s);
    w = DW();
}

static int64_t type_row_bytes(int type, int64_t ne0) {
    switch (type) {
    case KCUDA_T_F32: return ne0 * 4;
    case KCUDA_T_F16: case KCUDA_T_BF16: return ne0 * 2;
    case KCUDA_T_Q8_0: return ne0 / 32 * 34;
    case KCUDA_T_Q4_0: return ne0 / 32 * 18;
    default: return -1;
    }
}

// Bytes of a row of w.q in the device layout (quantized: the quants alone, scales apart in w.s).
static int64_t dw_q_row_bytes(int type, int64_t ne0) {
    switch (type) {
    case KCUDA_T_Q8_0: return ne0;
    case KCUDA_T_Q4_0: return ne0 / 2;
    default: return type_row_bytes(type, ne0);
    }
}

// Split ggml blocks into quants and scales (one thread per block).
__global__ void k_repack_q8(const uint8_t *raw, int64_t nblk, int8_t *q, uint16_t *s) {
    int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = raw + b * 34;
    s[b] = (uint16_t)(p[0] | (p[1] << 8));
    for (int i = 0; i < 32; i++) q[b * 32 + i] = (int8_t)p[2 + i];
}

__global__ void k_repack_q4(const uint8_t *raw, int64_t nblk, uint8_t *q, uint16_t *s) {
    int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = raw + b * 18;
    s[b] = (uint16_t)(p[0] | (p[1] << 8));
    for (int i = 0; i < 16; i++) q[b * 16 + i] = p[2 + i];
}

static void *g_stage = nullptr;
static size_t g_stage_bytes = 0;

static int32_t stage_reserve(size_t bytes) {
    if (bytes <= g_stage_bytes) return 0;
    if (g_stage) cudaFree(g_stage);
    g_stage = nullptr;
    g_stage_bytes = 0;
    CK(cudaMalloc(&g_stage, bytes));
    g_stage_bytes = bytes;
    return 0;
}

// Upload a matrix (rows ne1 of ne0 values) in its device layout.
static int32_t dw_upload(DW &w, int type, const void *data, int64_t ne0, int64_t ne1, int64_t nbytes) {
    int64_t rb = type_row_bytes(type, ne0);
    if (rb < 0) return KCUDA_E_UNSUPPORTED;
    if ((type == KCUDA_T_Q8_0 || type == KCUDA_T_Q4_0) && ne0 % 32) return KCUDA_E_UNSUPPORTED;
    if (rb * ne1 != nbytes || !data) return KCUDA_E_ARG;
    dw_free(w);
    w.type = type;
    w.ne0 = ne0;
    w.ne1 = ne1;
    if (type == KCUDA_T_Q8_0 || type == KCUDA_T_Q4_0) {
        int64_t nblk = ne0 / 32 * ne1;
        CKS(stage_reserve((size_t)nbytes));
        CK(cudaMemcpy(g_stage, data, (size_t)nbytes, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&w.q, (size_t)(dw_q_row_bytes(type, ne0) * ne1)));
        CK(cudaMalloc((void **)&w.s, (size_t)nblk * 2));
        int th = 256;
        unsigned gr = (unsigned)((nblk + th - 1) / th);
        if (type == KCUDA_T_Q8_0)
            k_repack_q8<<<gr, th>>>((const uint8_t *)g_stage, nblk, (int8_t *)w.q, w.s);
        else
            k_repack_q4<<<gr, th>>>((const uint8_t *)g_stage, nblk, (uint8_t *)w.q, w.s);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    } else {
        CK(cudaMalloc(&w.q, (size_t)nbytes));
        CK(cudaMemcpy(w.q, data, (size_t)nbytes, cudaMemcpyHostToDevice));
    }
    return 0;
}

// A small vector as f32 on the device (conversions from f16/bf16 are exact).
static int32_t vec_upload(float **dst, int type, const void *data, int64_t n, int64_t nbytes) {
    std::vector<float> tmp((size_t)n);
    if (type == KCUDA_T_F32) {
        if (nbytes != n * 4) return KCUDA_E_ARG;
        memcpy(tmp.data(), data, (size_t)nbytes);
    } else if (type == KCUDA_T_F16 || type == KCUDA_T_BF16) {
        if (nbytes != n * 2) return KCUDA_E_ARG;
        const uint16_t *h = (const uint16_t *)data;
        for (int64_t i = 0; i < n; i++)
            tmp[(size_t)i] = type == KCUDA_T_F16 ? kite_f16_to_f32(h[i]) : kite_bf16_to_f32(h[i]);
    } else {
        return KCUDA_E_UNSUPPORTED;
    }
    if (*dst) cudaFree(*dst);
    *dst = nullptr;
    CK(cudaMalloc((void **)dst, (size_t)n * 4));
    CK(cudaMemcpy(*dst, tmp.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
    return 0;
}

// ------------------------------------------------------------------------------------------------
// GEMV / small GEMM: y[m][r] = W[r,:] . x[m,:], one warp per output row (RPW rows per warp),
// lanes on the 32-blocks (quantized) or on elements i % 32 (float weights). Up to 4 matrices
// sharing one input in a launch.

struct GJob {
    const void *q;
    const uint16_t *s;
    float *y;
    int type, n, k, ldy, add, row0; // row0: first global row of this job (multiple of RPW)
};
struct GJobs {
    GJob j[4];
    int nj;
    int nwarps; // warps needed in all (set by launch_gemv)
};

// The activation prologue of a gemv launch. mode -1: activations already quantized in global
// memory (xq / xd, row stride ldx); otherwise every block builds them in shared memory from:
//   0: a                       1: RMSNorm(a) * w (whole row)      2: silu(a) * b
//   3: per head of hs values: (a * rsqrt(mean(a^2) + eps)) * w[j % hs] * silu(b)   (gated norm)
// out2 (mode 1, block 0 only): the float activations (the final-norm hidden state h_out).
struct Pro {
    int mode;
    const float *a, *b;
    int lda;
    const float *w;
    int hs;
    float eps;
    float *out2;
    int ld2;
};

// smem layout: int8 xq[MT][k], float xd[MT][k/32], float sc[MT][nh]
static size_t pro_smem(int MT, int k, int nh) {
    return (size_t)MT * k + (size_t)MT * (k / 32) * 4 + (size_t)MT * (nh > 0 ? nh : 1) * 4 + 16;
}

// ptxas moves a load whose value is first used after the PDL wait to below the wait (a shorter
// live range), where its round trip no longer overlaps the previous kernel: every weight load of
// the M-row gemvs (latency note, sections 7 and 12). An instruction ahead of the wait that reads a
// word of each load keeps them all ahead of it: a compare of their XOR and a fence under it
// (harmless the rare time it runs).
__device__ __forceinline__ void use_before_wait(int f) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.eq.s32 p, %0, 0x7fc00001;\n\t@p membar.cta;\n\t}" ::"r"(f) : "memory");
}

// Lane partials of quantized weights. QT is the weight kind: 1 Q8_0, 2 Q4_0 (the M-row passes:
// one kernel body per kind, so a pair issues only its own block dot, half the instructions at
// M = 4), or 0: chosen per row at run time (the M=1 step: both block dots issued, one predicated
// off). M=1 keeps QT 0 because with the kind known, ptxas moved its weight loads after the PDL
// wait (the step 14% slower); predicated, they stay ahead of it, overlapping the previous kernel.
// QT 1 / 2 keep them ahead through use_before_wait; at M=1 that was still about 1% slower than
// QT 0 (latency note, section 13). With QT 1 / 2 the loads are clamped in bounds, blocks u that
// no lane has are skipped (a warp-uniform branch), a lane whose block lies past the end of the row
// keeps its sum (a select), and the pairs of rows mm >= m are computed but never stored. Either
// way every pair that counts adds the same values in the same order as the plain loop over
// blocks b = lane, lane + 32, ... (lane l's canonical sum32 partial).
template <int MT, int RPW, int QT>
__device__ __forceinline__ void warp_rows_q(const GJob &J, int r0, int k, int m, const int8_t *XQ, const float *XD,
                                            int ldq, int ldd, int lane, bool &waited, float (&acc)[RPW][MT]) {
    const int nb = k >> 5;
    const bool q8 = QT == 0 ? J.type == KCUDA_T_Q8_0 : QT == 1;
    constexpr int U = 4 / RPW; // blocks per lane loaded ahead
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
            KC_PDL_WAIT();
            waited = true;
        }
        // Activations of G (block, row) pairs are loaded together, then used: one round trip
        // to L2 per G pairs instead of one per pair (a load under `if (mm < m)` or after a
        // `break` is not hoisted by the compiler). Pairs run block-major, so every acc[rr][mm]
        // still adds its blocks in increasing order. G is 4, but all U * MT pairs of a one-row-
        // per-warp M-row gemv at MT 2 and 4: their activations came in four round trips where
        // an M=1 gemv's come in one (183 registers for k_gemv<4, 1>; it runs one block per SM
        // at 1024 rows anyway).
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
                for (int rr = 0; rr < RPW; rr++) {
                    int is = 0;
                    if (q8) {
                        const int4 a = w0[rr][u], c = w1[rr][u];
                        is = __dp4a(a.x, x0.x, is);
                        is = __dp4a(a.y, x0.y, is);
                        is = __dp4a(a.z, x0.z, is);
                        is = __dp4a(a.w, x0.w, is);
                        is = __dp4a(c.x, x1.x, is);
                        is = __dp4a(c.y, x1.y, is);
                        is = __dp4a(c.z, x1.z, is);
                        is = __dp4a(c.w, x1.w, is);
                    } else {
                        const int4 w = w0[rr][u];
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
template <int MT, int RPW>
__device__ __forceinline__ void warp_rows(const GJob &J, int r0, int k, int m, const int8_t *XQ, const float *XD,
                                          int ldq, int ldd, const float *xf, int ldx, int lane, bool &waited,
                                          float (&acc)[RPW][MT]) {
#pragma unroll
    for (int rr = 0; rr < RPW; rr++)
#pragma unroll
        for (int mm = 0; mm < MT; mm++) acc[rr][mm] = 0.0f;
    if (J.type == KCUDA_T_Q8_0 || J.type == KCUDA_T_Q4_0) {
        if constexpr (MT == 1)
            warp_rows_q<MT, RPW, 0>(J, r0, k, m, XQ, XD, ldq, ldd, lane, waited, acc);
        else if (J.type == KCUDA_T_Q8_0)
            warp_rows_q<MT, RPW, 1>(J, r0, k, m, XQ, XD, ldq, ldd, lane, waited, acc);
        else
            warp_rows_q<MT, RPW, 2>(J, r0, k, m, XQ, XD, ldq, ldd, lane, waited, acc);
    } else {
        if (!waited) {
            KC_PDL_WAIT();
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
__device__ __forceinline__ int job_of(const GJobs &js, int grow) {
    int ji = 0;
#pragma unroll
    for (int t = 1; t < 4; t++)
        if (t < js.nj && grow >= js.j[t].row0) ji = t;
    return ji;
}

// k_gemv<2, 1> asks for two blocks per SM: with its weight loads kept ahead of the wait, ptxas chose
// 80 registers and an 8-byte stack frame for it; 0 (the others) sets no minimum
template <int MT, int RPW>
__global__ void __launch_bounds__(KC_THREADS, MT == 2 && RPW == 1 ? 2 : 0)
k_gemv(GJobs js, int m, Pro P, const int8_t *gxq, const float *gxd, const float *xf, int ldx) {
    extern __shared__ __align__(16) unsigned char smraw[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int k = js.j[0].k;
    const int nb = k >> 5;
    const int8_t *XQ = gxq;
    const float *XD = gxd;
    int ldq = ldx, ldd = ldx >> 5;
    KC_PDL_TRIGGER();
    {
        // Ask L2 for this warp's first rows of weights before waiting for the previous kernel
        // (PDL) and before the prologue, so that the memory latency overlaps them (a hint
        // only: weights are immutable and no value depends on it).
        const int gw0 = blockIdx.x * nw + warp;
        if (gw0 < js.nwarps) {
            const int grow = gw0 * RPW;
            const GJob &J = js.j[job_of(js, grow)];
            const int r0 = grow - J.row0;
            if (r0 < J.n && (J.type == KCUDA_T_Q8_0 || J.type == KCUDA_T_Q4_0)) {
                const size_t rb = J.type == KCUDA_T_Q8_0 ? (size_t)k : (size_t)(k >> 1);
                for (int rr = 0; rr < RPW && r0 + rr < J.n; rr++) {
                    const char *qb = (const char *)J.q + (size_t)(r0 + rr) * rb;
                    for (size_t off = (size_t)lane * 128; off < rb; off += 32 * 128)
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(qb + off));
                    if (lane == 0)
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(J.s + (size_t)(r0 + rr) * nb));
                }
            }
        }
    }
    // Weights are immutable: a warp loads its first blocks of weights before it waits for the
    // previous kernel (PDL), so that only the activation loads follow the wait. Everything that
    // the previous kernels write is read (and y written) after the wait.
    bool waited = false;
    if (P.mode >= 0) {
        KC_PDL_WAIT();
        waited = true;
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
                if (P.out2 && blockIdx.x == 0) P.out2[(size_t)mi * P.ld2 + j] = v;
                quant_block32(v, lane, sq + (size_t)mi * k + bb * 32, sd + (size_t)mi * nb + bb);
            }
        }
        __syncthreads();
        XQ = sq;
        XD = sd;
        ldq = k;
        ldd = nb;
    }
    for (int gw = blockIdx.x * nw + warp; gw < js.nwarps; gw += gridDim.x * nw) {
        const int grow = gw * RPW;
        const GJob &J = js.j[job_of(js, grow)];
        const int r0 = grow - J.row0;
        if (r0 >= J.n) continue;
        float acc[RPW][MT];
        warp_rows<MT, RPW>(J, r0, k, m, XQ, XD, ldq, ldd, xf, ldx, lane, waited, acc);
        // the RPW * MT sums end in lanes lane / (32 / N) (one lane per value stores)
        constexpr int N = RPW * MT;
        const float v = warp_sum32_scatter<N>(&acc[0][0], lane);
        const int i = lane / (32 / N), rr = i / MT, mm = i % MT;
        if (lane % (32 / N) == 0 && mm < m && r0 + rr < J.n) {
            float *y = J.y + (size_t)mm * J.ldy + r0 + rr;
            *y = J.add ? *y + v : v;
        }
    }
}

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
__global__ void k_embed(DW w, const int *__restrict__ in, int E, float *x) {
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

// ------------------------------------------------------------------------------------------------
// Gated DeltaNet, one launch per layer: grid (value head h, slice of nw rows of S), nw warps
// (dn_warps: enough threads for one channel each, at least KC_WARPS). Each block computes the
// causal conv + SiLU of the channels it needs (q and k of key head h % Hk, v of its rows) for
// every row of the pass, L2-normalises q and k, then each warp
// carries one row j of the state S[dv][dk] through the m rows (o[j] raw into y; the gated
// RMSNorm is the prologue of the ssm_out gemv). Conv inputs live in a ring of R >= K-1+m
// rows indexed by position: this pass reads positions < pos and writes pos..pos+m-1.
#define KC_DK_MAX 256
// warps of a k_deltanet block: its 2 * dk + nw channels on one thread each (with 8 warps and
// dk = 128, eight threads computed a second channel after the first: one more round trip)
static int dn_warps(int dk) {
    const int nw = (2 * dk + 30) / 31; // 32 * nw >= 2 * dk + nw
    return nw > KC_WARPS ? nw : KC_WARPS;
}

// its shared memory for m rows: per row q, k (dk each), v of its nw rows, beta and the decay
static size_t dn_smem(int m, int dk) {
    return (size_t)m * (2 * dk + dn_warps(dk) + 2) * sizeof(float);
}
__device__ __forceinline__ int dn_channel(int t, int kh, int h, int j0, int Hk, int dk, int dv) {
    if (t < dk) return kh * dk + t;
    if (t < 2 * dk) return Hk * dk + kh * dk + (t - dk);
    return 2 * Hk * dk + h * dv + j0 + (t - 2 * dk);
}

// Phase 0 of k_deltanet for the usual kernel size K = KC_CONV_K: each thread's channel for the m
// rows of the pass, 8 rows at a time: the K - 1 history taps and the chunk's inputs loaded
// together (one round trip per chunk where each row took one), then each row's sum in tap order
// from the register window. The inputs of this pass go to the ring here, one writer per channel
// (q and k: block y 0 of value head h < Hk; v: the block of that row of S), instead of in a loop
// after phase 0 whose loads waited for its stores, row after row. Positions read (< pos) and
// written (pos .. pos + m - 1) are distinct ring rows: R >= K - 1 + m.
#define KC_CONV_K 4
__device__ __forceinline__ void dn_conv_window(const float *qkv, int C, const float *__restrict__ cw, float *ring,
                                               int R, int h, int kh, int j0, int Hk, int dk, int dv, int nw,
                                               int pos, int m, int per, float *sm) {
    constexpr int KK = KC_CONV_K, CH = 8, NW = KK - 1 + CH;
    for (int t = threadIdx.x; t < 2 * dk + nw; t += blockDim.x) {
        if (t >= 2 * dk && j0 + (t - 2 * dk) >= dv) continue;
        const int c = dn_channel(t, kh, h, j0, Hk, dk, dv);
        const bool writer = t >= 2 * dk || (blockIdx.y == 0 && h < Hk);
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

__global__ void __launch_bounds__(1024) // dn_warps(KC_DK_MAX) = 17 warps at most
k_deltanet(const float *qkv, int C, const float *__restrict__ cw, int K, float *ring, int R,
           const int *__restrict__ in, const float *betab, const float *alphab,
           int ldba, const float *__restrict__ ssm_a, const float *__restrict__ dt_bias, float *S_all, int Hk,
           int Hv, int dk, int dv, float eps, float *y, int ldy, int m) {
    KC_PDL_TRIGGER();
    extern __shared__ float sm[];
    const int h = blockIdx.x, kh = h % Hk;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int j0 = blockIdx.y * nw;
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
    const int pos = in[0];
    for (int t = threadIdx.x; t < 2 * dk + nw; t += blockDim.x) {
        if (t >= 2 * dk && j0 + (t - 2 * dk) >= dv) continue;
        const int c = dn_channel(t, kh, h, j0, Hk, dk, dv);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(cw + (size_t)c * K));
        for (int jj = 0; jj < K - 1; jj++) {
            const int pp = pos - (K - 1) + jj;
            if (pp >= 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(ring + (size_t)(pp % R) * C + c));
        }
    }
    KC_PDL_WAIT();
    // the gate inputs of this warp's first row, loaded now so that phase 1 does not wait for them
    float bt_in = 0.0f, al_in = 0.0f;
    if (lane == 0 && warp < m) {
        bt_in = betab[(size_t)warp * ldba + h];
        al_in = alphab[(size_t)warp * ldba + h];
    }
    const float a_h = ssm_a[h], dt_h = dt_bias[h];
    const int per = 2 * dk + nw + 2;
    // phase 0: conv + SiLU
    if (K == KC_CONV_K) {
        dn_conv_window(qkv, C, cw, ring, R, h, kh, j0, Hk, dk, dv, nw, pos, m, per, sm);
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
        if (blockIdx.y == 0) {
            const int nqk = h < Hk ? 2 * dk : 0;
            for (int t = threadIdx.x; t < nqk + dv; t += blockDim.x) {
                int c = t < nqk ? (t < dk ? h * dk + t : Hk * dk + h * dk + (t - dk)) : 2 * Hk * dk + h * dv + (t - nqk);
                for (int mi = 0; mi < m; mi++)
                    ring[(size_t)((pos + mi) % R) * C + c] = qkv[(size_t)mi * C + c];
            }
        }
    }
    __syncthreads();
    // phase 1: L2 norms, beta, decay
    for (int mi = warp; mi < m; mi += nw) {
        float *q = sm + (size_t)mi * per, *kk = q + dk, *bd = q + 2 * dk + nw;
        float sq = warp_dot(q, q, dk, lane);
        float sk = warp_dot(kk, kk, dk, lane);
        float iq = kite_rsqrtf(sq + eps), ik = kite_rsqrtf(sk + eps);
        float qs = kite_rsqrtf((float)dk);
        __syncwarp();
        for (int i = lane; i < dk; i += 32) {
            q[i] = (q[i] * iq) * qs;
            kk[i] = kk[i] * ik;
        }
        if (lane == 0) {
            if (mi != warp) {
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

// ------------------------------------------------------------------------------------------------
// Full attention. Prep: per head block, RMSNorm with q_norm/k_norm, NeoX RoPE on n_rot dims,
// k and v stored in the cache at pos + mi. Blocks [0,H): query; [H,H+Hkv): key; then value.

__global__ void k_qkprep(const float *qg, int ldqg, const float *kb, const float *vb, int ldkv, const float *__restrict__ qn,
                         const float *__restrict__ kn, const float *__restrict__ cos_tab,
                         const float *__restrict__ sin_tab, int half_tab, int half,
                         const int *__restrict__ in, int H, int Hkv, int D, float eps, float *qout,
                         float *kc, float *vc, int max_pos) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    extern __shared__ float sm[];
    const int hb = blockIdx.x, mi = blockIdx.y;
    const int pos = in[0] + mi;
    if (pos >= max_pos) return;
    if (hb >= H + Hkv) {
        int vh = hb - H - Hkv;
        for (int i = threadIdx.x; i < D; i += blockDim.x)
            vc[(size_t)pos * Hkv * D + vh * D + i] = vb[(size_t)mi * ldkv + vh * D + i];
        return;
    }
    const float *src;
    const float *w;
    float *dst;
    if (hb < H) {
        src = qg + (size_t)mi * ldqg + (size_t)2 * hb * D;
        w = qn;
        dst = qout + (size_t)mi * H * D + hb * D;
    } else {
        int kh = hb - H;
        src = kb + (size_t)mi * ldkv + kh * D;
        w = kn;
        dst = kc + (size_t)pos * Hkv * D + kh * D;
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

// One block per (query head, row). scores / probabilities in global scratch [m][H][max_pos].
__global__ void __launch_bounds__(KC_THREADS)
k_attn(const float *q, const float *kc, const float *vc, const float *qg, int ldqg, const int *__restrict__ in, int H, int Hkv, int D,
       float *scr, int max_pos, float *out, int ldo) {
    KC_PDL_TRIGGER();
    KC_PDL_WAIT();
    const int h = blockIdx.x, mi = blockIdx.y;
    const int n = in[0] + mi + 1;
    if (n > max_pos) return;
    const int kvh = h / (H / Hkv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float *qr = q + (size_t)mi * H * D + h * D;
    float *sc = scr + ((size_t)mi * H + h) * max_pos;
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
                const float *kr = kc + (size_t)t * Hkv * D + kvh * D + lane;
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
            const float *kr = kc + (size_t)t * Hkv * D + kvh * D;
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
        const float *vp = vc + kvh * D + d;
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
        float gate = qg[(size_t)mi * ldqg + (size_t)2 * h * D + D + d];
        out[(size_t)mi * ldo + h * D + d] = s[0] * kite_sigmoidf(gate);
    }
}

// ------------------------------------------------------------------------------------------------
// The resident model

struct Layer {
    int rec = 0;
    int idx = 0; // index among layers of its kind
    DW w[KCUDA_W_COUNT];
    float *v[KCUDA_W_COUNT] = {};
};

// What one pass writes and the host reads back: the outputs on the device, the pinned staging
// they are copied into, the pass's inputs, the events of its copies, and the graphs that write
// this slot. A prompt call (kcuda_prompt) cycles through three: a pass runs in one while the
// copy threads copy the one before it out of another; a single pass uses slot 0.
#define KC_SLOTS 3
struct Slot {
    float *hout = nullptr, *logits = nullptr;         // device [max_m][E], [max_m][V]
    float *pin_hout = nullptr, *pin_logits = nullptr; // pinned staging, the same shapes
    int *h_in = nullptr;                              // pinned: [0] = pos, [1..m] tokens
    cudaEvent_t ev[KC_LM_PIECES] = {};                // the logits of piece p are in the staging
    cudaGraphExec_t g1 = nullptr;                     // the M=1 graph
    std::map<int, cudaGraphExec_t> gm;                // per-M graphs
};

struct kcuda_model {
    int32_t hp[KCUDA_HP_COUNT];
    float eps;
    int nl, nrec, nfull;
    std::vector<Layer> L;
    DW tok, out;
    float *out_norm = nullptr;
    float *cos_tab = nullptr, *sin_tab = nullptr;
    int rope_max_pos = 0, half_tab = 0;
    int max_m = 0, prepared = 0;
    int opt_graph = 1, opt_graph_m = 0;
    // state
    float *kc = nullptr, *vc = nullptr;      // [nfull][max_pos][Hkv*D]
    float *ring = nullptr;                   // [nrec][ring_rows][C]: conv inputs by position
    int ring_rows = 0;
    float *ssm = nullptr;                    // [nrec][Hv][dv][dk]
    // scratch
    int *d_in = nullptr;                     // [0] = pos, [1..m] tokens
    float *x = nullptr;                      // [max_m][E]
    float *xf = nullptr; int8_t *xq = nullptr; float *xd = nullptr; int ldx = 0;
    float *qkv = nullptr, *z = nullptr, *beta = nullptr, *alpha = nullptr, *ybuf = nullptr;
    float *qg = nullptr, *kb = nullptr, *vb = nullptr, *qr = nullptr, *att = nullptr, *scr = nullptr;
    float *gate = nullptr, *up = nullptr;
    Slot sl[KC_SLOTS];
    cudaStream_t cps = nullptr;          // the copies back
    cudaEvent_t lmev[KC_LM_PIECES] = {}; // piece p of the LM head is done (recorded by the pass)
    // copy helpers: thread i (1..n) takes chunks c with c % (n + 1) == i and the caller the rest,
    // or, on their own (cp_async), c % n == i - 1 (thread 1 also h_out)
    std::vector<std::thread> cp_th;
    std::mutex cp_mu;
    std::condition_variable cp_cv, cp_done;
    unsigned cp_gen = 0;
    int cp_busy = 0, cp_stop = 0;
    int32_t cp_err = 0;
    // the copy-out job (copy_job), set before cp_gen is bumped: slot cp_slot's outputs of cp_m
    // rows to cp_hdst [m][cp_e] and cp_dst [m][cp_v]; cp_async: the copy threads do it all
    float *cp_dst = nullptr, *cp_hdst = nullptr;
    int cp_nch = 0, cp_per = 1, cp_m = 0, cp_v = 0, cp_e = 0; // cp_per: chunks per LM head piece
    int cp_slot = 0, cp_async = 0;
    int cp_pending = 0; // rows of the pass the copy threads are copying out on their own (0: none)
    int64_t cnt[KCUDA_C_COUNT] = {};
    std::vector<void *> allocs;
};

// Every model buffer starts zeroed: the warm-up passes in prepare read state and scratch before
// any step wrote them (compute-sanitizer initcheck flagged those reads), and zeros keep them defined.
static int32_t dalloc(kcuda_model *md, void **p, size_t bytes) {
    CK(cudaMalloc(p, bytes ? bytes : 4));
    md->allocs.push_back(*p);
    CK(cudaMemset(*p, 0, bytes ? bytes : 4));
    return 0;
}

static void graphs_free(kcuda_model *md) {
    for (Slot &s : md->sl) {
        if (s.g1) cudaGraphExecDestroy(s.g1);
        s.g1 = nullptr;
        for (auto &kv : s.gm) cudaGraphExecDestroy(kv.second);
        s.gm.clear();
    }
}

static void copy_threads_stop(kcuda_model *md) {
    {
        std::lock_guard<std::mutex> lk(md->cp_mu);
        md->cp_stop = 1;
    }
    md->cp_cv.notify_all();
    for (auto &t : md->cp_th)
        if (t.joinable()) t.join();
    md->cp_th.clear();
}

// The logits are copied out of the pinned staging in nch chunks of vocabulary columns (all m
// rows each): at least KC_CHUNK_MIN floats a chunk, KC_NCHUNK at most, shared among the copy
// threads. The LM head runs in np pieces of nch / np whole chunks, each brought back to the
// staging in one copy; the pass and the copies back use the same split.
static void lm_split(int m, int V, int *nch, int *np) {
    int n = (int)(((size_t)m * V + KC_CHUNK_MIN - 1) / KC_CHUNK_MIN);
    if (n > KC_NCHUNK) n = KC_NCHUNK;
    if (n < 1) n = 1;
    const int p = n < KC_LM_PIECES ? n : KC_LM_PIECES;
    *nch = n / p * p;
    *np = p;
}

// first vocabulary column of chunk c (c = nch: V)
static int lm_col(int c, int nch, int V) {
    const int64_t cw = ((int64_t)V + nch - 1) / nch, v = cw * c;
    return v < V ? (int)v : V;
}

// first vocabulary column of LM head piece p (p = np: V): whole chunks, the same split in the pass
// and in the copies back
static int lm_piece_col(int p, int nch, int np, int V) { return lm_col(p * (nch / np), nch, V); }

// chunks of this thread's share: wait for each, copy it out of the staging
static int32_t copy_share(kcuda_model *md, int who, int nthr) {
    int32_t err = 0;
    for (int c = who; c < md->cp_nch; c += nthr) {
        const Slot &s = md->sl[md->cp_slot];
        cudaError_t e = cudaEventSynchronize(s.ev[c / md->cp_per]);
        if (e != cudaSuccess) {
            err = (int32_t)e;
            break;
        }
        const int v0 = lm_col(c, md->cp_nch, md->cp_v), v1 = lm_col(c + 1, md->cp_nch, md->cp_v);
        if (!md->cp_dst || v1 <= v0) continue;
        for (int mi = 0; mi < md->cp_m; mi++) {
            const size_t o = (size_t)mi * md->cp_v + v0;
            memcpy(md->cp_dst + o, s.pin_logits + o, (size_t)(v1 - v0) * 4);
        }
    }
    return err;
}

// h_out of the job's pass, once it is in the staging
static int32_t copy_hout(kcuda_model *md) {
    const Slot &s = md->sl[md->cp_slot];
    cudaError_t e = cudaEventSynchronize(s.ev[0]);
    if (e != cudaSuccess) return (int32_t)e;
    if (md->cp_hdst) memcpy(md->cp_hdst, s.pin_hout, (size_t)md->cp_m * md->cp_e * 4);
    return 0;
}

static void copy_worker(kcuda_model *md, int who) {
    cudaSetDevice(g_device);
    unsigned seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(md->cp_mu);
            md->cp_cv.wait(lk, [&] { return md->cp_stop || md->cp_gen != seen; });
            if (md->cp_stop) return;
            seen = md->cp_gen;
        }
        // with the caller: share who of n + 1; alone (cp_async): share who - 1 of n, and h_out
        const int n = (int)md->cp_th.size();
        int32_t err = md->cp_async && who == 1 ? copy_hout(md) : 0;
        if (!err) err = md->cp_async ? copy_share(md, who - 1, n) : copy_share(md, who, n + 1);
        {
            std::lock_guard<std::mutex> lk(md->cp_mu);
            if (err && !md->cp_err) md->cp_err = err;
            md->cp_busy--;
        }
        md->cp_done.notify_one();
    }
}

static void model_free(kcuda_model *md) {
    if (!md) return;
    copy_threads_stop(md);
    graphs_free(md);
    for (auto &l : md->L) {
        for (int r = 0; r < KCUDA_W_COUNT; r++) {
            dw_free(l.w[r]);
            if (l.v[r]) cudaFree(l.v[r]);
        }
    }
    dw_free(md->tok);
    dw_free(md->out);
    if (md->out_norm) cudaFree(md->out_norm);
    if (md->cos_tab) cudaFree(md->cos_tab);
    if (md->sin_tab) cudaFree(md->sin_tab);
    for (void *p : md->allocs) cudaFree(p);
    for (Slot &s : md->sl) {
        if (s.h_in) cudaFreeHost(s.h_in);
        if (s.pin_hout) cudaFreeHost(s.pin_hout);
        if (s.pin_logits) cudaFreeHost(s.pin_logits);
        for (int i = 0; i < KC_LM_PIECES; i++)
            if (s.ev[i]) cudaEventDestroy(s.ev[i]);
    }
    if (md->cps) cudaStreamDestroy(md->cps);
    for (int i = 0; i < KC_LM_PIECES; i++)
        if (md->lmev[i]) cudaEventDestroy(md->lmev[i]);
    delete md;
}

static int is_vec_role(int role) {
    switch (role) {
    case KCUDA_W_OUTPUT_NORM: case KCUDA_W_ATTN_NORM: case KCUDA_W_POST_ATTN_NORM:
    case KCUDA_W_ATTN_Q_NORM: case KCUDA_W_ATTN_K_NORM: case KCUDA_W_SSM_A:
    case KCUDA_W_SSM_DT_BIAS: case KCUDA_W_SSM_CONV1D: case KCUDA_W_SSM_NORM:
        return 1;
    default:
        return 0;
    }
}

// Launch functions (all on g_stream; no host synchronisation: capturable).
static int g_smem_max = 48 * 1024;
static int g_sms = 132; // dynamic shared memory opted in for the gemv instances

template <int MT, int RPW>
static cudaError_t gemv_launch1(unsigned grid, int threads, size_t smem, const GJobs &js, int m, const Pro &P,
                                const int8_t *q, const float *d, const float *f, int ldx) {
    return klaunch(k_gemv<MT, RPW>, dim3(grid), dim3(threads), smem, js, m, P, q, d, f, ldx);
}

template <int RPW>
static cudaError_t gemv_launch(int MT, unsigned grid, int threads, size_t smem, const GJobs &js, int m, const Pro &P,
                               const int8_t *q, const float *d, const float *f, int ldx) {
    if (MT == 1) return gemv_launch1<1, RPW>(grid, threads, smem, js, m, P, q, d, f, ldx);
    if (MT == 2) return gemv_launch1<2, RPW>(grid, threads, smem, js, m, P, q, d, f, ldx);
    if (MT == 4) return gemv_launch1<4, RPW>(grid, threads, smem, js, m, P, q, d, f, ldx);
    return gemv_launch1<8, RPW>(grid, threads, smem, js, m, P, q, d, f, ldx);
}

static int32_t gemv_smem_optin(void) {
    int dev = 0, mx = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&mx, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0) g_sms = sms;
    if (mx <= 48 * 1024) return 0;
#define KC_OPT(MT, RPW) CK(cudaFuncSetAttribute(k_gemv<MT, RPW>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx))
    KC_OPT(1, 1); KC_OPT(2, 1); KC_OPT(4, 1); KC_OPT(8, 1);
    KC_OPT(1, 2); KC_OPT(2, 2); KC_OPT(4, 2); KC_OPT(8, 2);
    KC_OPT(1, 4); KC_OPT(2, 4); KC_OPT(4, 4); KC_OPT(8, 4);
#undef KC_OPT
    g_smem_max = mx;
    return 0;
}

// gq/gd/gf: activations in global memory (P.mode == -1); otherwise the prologue builds them.
// Rows per warp: each lane keeps up to 4 weight blocks in flight (blocks b, b+32, ... of RPW
// rows), and a matrix keeps at least 8 warps per SM. One row per warp left the wide matrices
// with 1 KB in flight per warp and 2-3 waves of blocks (70 registers: 3 blocks per SM).
static int gemv_rpw(const GJobs &js) {
    int rows = 0;
    for (int t = 0; t < js.nj; t++) rows += js.j[t].n;
    const int nb = js.j[0].k / 32;
    const int per = nb > 96 ? 4 : (nb + 31) / 32; // blocks per lane and row
    int RPW = per >= 3 ? 1 : 4 / per;
    while (RPW > 1 && rows / RPW < g_sms * 8) RPW >>= 1;
    return RPW;
}

static int32_t launch_gemv(GJobs js, int m, Pro P, const int8_t *gq, const float *gd, const float *gf, int ldx) {
    const int RPW = gemv_rpw(js);
    const int threads = 256;
    int rows = 0;
    for (int t = 0; t < js.nj; t++) {
        js.j[t].row0 = rows;
        rows += (js.j[t].n + RPW - 1) / RPW * RPW;
    }
    const int warps = rows / RPW, wpb = threads / 32;
    js.nwarps = warps;
    unsigned grid = (unsigned)((warps + wpb - 1) / wpb);
    const unsigned cap = (unsigned)(g_sms * (2048 / threads));
    if (P.mode >= 0 && grid > cap) grid = cap; // the prologue runs once per block: stay resident
    const int k = js.j[0].k;
    const int nh = P.mode == 3 ? k / P.hs : 1;
    int mcap = 8;
    while (mcap > 1 && P.mode >= 0 && pro_smem(mcap, k, nh) > (size_t)g_smem_max) mcap >>= 1;
    if (P.mode >= 0 && pro_smem(1, k, nh) > (size_t)g_smem_max) return KCUDA_E_UNSUPPORTED;
    for (int m0 = 0; m0 < m; m0 += mcap) {
        int mc = m - m0 < mcap ? m - m0 : mcap;
        GJobs jc = js;
        for (int t = 0; t < js.nj; t++) jc.j[t].y = js.j[t].y + (size_t)m0 * js.j[t].ldy;
        Pro Pc = P;
        const int8_t *q = nullptr;
        const float *d = nullptr, *f = nullptr;
        if (P.mode >= 0) {
            Pc.a = P.a + (size_t)m0 * P.lda;
            if (P.b) Pc.b = P.b + (size_t)m0 * P.lda;
            if (P.out2) Pc.out2 = P.out2 + (size_t)m0 * P.ld2;
        } else {
            if (gq) q = gq + (size_t)m0 * ldx;
            if (gd) d = gd + (size_t)m0 * (ldx / 32);
            if (gf) f = gf + (size_t)m0 * ldx;
        }
        int MT = mc == 1 ? 1 : mc == 2 ? 2 : mc <= 4 ? 4 : 8;
        size_t smem = P.mode >= 0 ? pro_smem(MT, k, nh) : 0;
        cudaError_t e;
        if (RPW == 1) e = gemv_launch<1>(MT, grid, threads, smem, jc, mc, Pc, q, d, f, ldx);
        else if (RPW == 2) e = gemv_launch<2>(MT, grid, threads, smem, jc, mc, Pc, q, d, f, ldx);
        else e = gemv_launch<4>(MT, grid, threads, smem, jc, mc, Pc, q, d, f, ldx);
        CK(e);
    }
    return 0;
}

static GJob job(const DW &w, float *y, int ldy, int add) {
    GJob j;
    j.q = w.q;
    j.s = w.s;
    j.y = y;
    j.type = w.type;
    j.n = (int)w.ne1;
    j.k = (int)w.ne0;
    j.ldy = ldy;
    j.add = add;
    j.row0 = 0;
    return j;
}

// rows r0 .. r0 + n - 1 of w as a job of their own (its output y is row r0's)
static GJob job_rows(const DW &w, int r0, int n, float *y, int ldy) {
    GJob j = job(w, y, ldy, 0);
    j.q = (const char *)w.q + (size_t)r0 * dw_q_row_bytes(w.type, w.ne0);
    if (w.s) j.s = w.s + (size_t)r0 * (w.ne0 / 32);
    j.n = n;
    return j;
}

static Pro pro(int mode, const float *a, const float *b, int lda, const float *w, int hs, float eps) {
    Pro P;
    P.mode = mode;
    P.a = a;
    P.b = b;
    P.lda = lda;
    P.w = w;
    P.hs = hs > 0 ? hs : 1;
    P.eps = eps;
    P.out2 = nullptr;
    P.ld2 = 0;
    return P;
}

// The activations of a matrix product. All matrices quantized: k_actq (once per pass, parallel
// over rows and 32-blocks) into xq / xd, which the gemv reads; the gemv's own prologue remains
// for m < KC_ACTQ_MIN_M and gated norms with hs % 32 != 0. Float weights: k_act into xf first.
struct ActIn {
    Pro P; // the gemv's prologue (mode -1: activations in q / d / f)
    const int8_t *q;
    const float *d, *f;
    int ldx;
};

static int32_t act_prepare(kcuda_model *md, const GJobs &js, int m, const Pro &P, ActIn *a) {
    int allq = 1;
    for (int t = 0; t < js.nj; t++)
        if (js.j[t].type != KCUDA_T_Q8_0 && js.j[t].type != KCUDA_T_Q4_0) allq = 0;
    const int k = js.j[0].k;
    const Pro none = pro(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f);
    // Quantize the activations once instead of in the prologue of every gemv block (whose
    // latency sat in front of every weight load, and whose cost grew with m): on the H200,
    // everything else equal, 2.00 -> 1.38 ms per M=1 decode step (qwen35-0.8b Q8_0); measured
    // again with the row tiles of gemv_rpw (one wave of blocks): 0.89 -> 1.50 ms with prologues.
    if (allq && m >= KC_ACTQ_MIN_M && (P.mode != 3 || P.hs % 32 == 0)) {
        dim3 g((unsigned)((k / 32 + KC_WARPS - 1) / KC_WARPS), (unsigned)m);
        CK(klaunch(k_actq, g, dim3(KC_THREADS), 0, P.mode, P.a, P.b, P.lda, P.w, P.hs, k, P.eps, md->xq, md->xd,
                   md->ldx, P.out2, P.ld2));
        *a = ActIn{none, md->xq, md->xd, nullptr, md->ldx};
        return 0;
    }
    if (allq) {
        *a = ActIn{P, nullptr, nullptr, nullptr, 0};
        return 0;
    }
    CK(klaunch(k_act, dim3(m), dim3(KC_THREADS), 0, P.mode, P.a, P.b, P.lda, P.w, P.hs, k, P.eps, md->xf, md->xq,
               md->xd, md->ldx, P.out2, P.ld2));
    *a = ActIn{none, md->xq, md->xd, md->xf, md->ldx};
    return 0;
}

// One matrix product with its activation preparation.
static int32_t gemv_in(kcuda_model *md, const GJobs &js, int m, const Pro &P) {
    ActIn a;
    CKS(act_prepare(md, js, m, P, &a));
    return launch_gemv(js, m, a.P, a.q, a.d, a.f, a.ldx);
}

// The forward pass for m rows at positions in[0] .. in[0]+m-1 (tokens in[1..m]), device-side
// inputs only: the same launches serve the graph and the stream mode.
static int32_t forward_impl(kcuda_model *md, int m, const Slot &out);
// one pass of m rows whose h_out and logits land in slot s
static int32_t forward(kcuda_model *md, int m, int s) {
    int32_t st = forward_impl(md, m, md->sl[s]);
    g_pdl = 0;
    return st;
}

static int32_t forward_impl(kcuda_model *md, int m, const Slot &out) {
    const int32_t *hp = md->hp;
    const int E = hp[KCUDA_HP_N_EMBD], V = hp[KCUDA_HP_N_VOCAB], F = hp[KCUDA_HP_N_FF];
    const int H = hp[KCUDA_HP_N_HEAD], Hkv = hp[KCUDA_HP_N_HEAD_KV], D = hp[KCUDA_HP_HEAD_DIM];
    const int K = hp[KCUDA_HP_SSM_CONV], dk = hp[KCUDA_HP_SSM_DK], Hk = hp[KCUDA_HP_SSM_HK];
    const int Hv = hp[KCUDA_HP_SSM_HV], dv = hp[KCUDA_HP_SSM_DV], max_pos = hp[KCUDA_HP_MAX_POS];
    const int C = 2 * Hk * dk + Hv * dv;
    const int half = hp[KCUDA_HP_N_ROT] / 2;
    const float eps = md->eps;
    g_pdl = 0; // the first kernel follows a copy: plain stream order
    k_embed<<<m, KC_THREADS, 0, g_stream>>>(md->tok, md->d_in, E, md->x);
    CK(cudaGetLastError());
    g_pdl = KC_PDL && g_cc_major >= 9;
    for (int il = 0; il < md->nl; il++) {
        Layer &l = md->L[il];
        Pro pn = pro(1, md->x, nullptr, E, l.v[KCUDA_W_ATTN_NORM], 1, eps);
        if (l.rec) {
            GJobs js = {};
            js.nj = 4;
            js.j[0] = job(l.w[KCUDA_W_SSM_QKV], md->qkv, C, 0);
            js.j[1] = job(l.w[KCUDA_W_SSM_GATE], md->z, Hv * dv, 0);
            js.j[2] = job(l.w[KCUDA_W_SSM_BETA], md->beta, Hv, 0);
            js.j[3] = job(l.w[KCUDA_W_SSM_ALPHA], md->alpha, Hv, 0);
            CKS(gemv_in(md, js, m, pn));
            float *ring = md->ring + (size_t)l.idx * md->ring_rows * C;
            float *S = md->ssm + (size_t)l.idx * Hv * dv * dk;
            const int nw = dn_warps(dk);
            dim3 g(Hv, (dv + nw - 1) / nw);
            CK(klaunch(k_deltanet, g, dim3(32 * nw), dn_smem(m, dk), (const float *)md->qkv, C,
                       (const float *)l.v[KCUDA_W_SSM_CONV1D], K, ring, md->ring_rows, (const int *)md->d_in,
                       (const float *)md->beta, (const float *)md->alpha, Hv, (const float *)l.v[KCUDA_W_SSM_A],
                       (const float *)l.v[KCUDA_W_SSM_DT_BIAS], S, Hk, Hv, dk, dv, eps, md->ybuf, Hv * dv, m));
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_SSM_OUT], md->x, E, 1);
            CKS(gemv_in(md, js, m, pro(3, md->ybuf, md->z, Hv * dv, l.v[KCUDA_W_SSM_NORM], dv, eps)));
        } else {
            GJobs js = {};
            js.nj = 3;
            js.j[0] = job(l.w[KCUDA_W_ATTN_Q], md->qg, 2 * H * D, 0);
            js.j[1] = job(l.w[KCUDA_W_ATTN_K], md->kb, Hkv * D, 0);
            js.j[2] = job(l.w[KCUDA_W_ATTN_V], md->vb, Hkv * D, 0);
            CKS(gemv_in(md, js, m, pn));
            float *kc = md->kc + (size_t)l.idx * max_pos * Hkv * D;
            float *vc = md->vc + (size_t)l.idx * max_pos * Hkv * D;
            dim3 g1(H + 2 * Hkv, m);
            int th = D < KC_THREADS ? ((D + 31) / 32 * 32) : KC_THREADS;
            CK(klaunch(k_qkprep, g1, dim3(th), D * sizeof(float), (const float *)md->qg, 2 * H * D,
                       (const float *)md->kb, (const float *)md->vb, Hkv * D, (const float *)l.v[KCUDA_W_ATTN_Q_NORM],
                       (const float *)l.v[KCUDA_W_ATTN_K_NORM], (const float *)md->cos_tab,
                       (const float *)md->sin_tab, md->half_tab, half, (const int *)md->d_in, H, Hkv, D, eps, md->qr,
                       kc, vc, max_pos));
            dim3 g2(H, m);
            CK(klaunch(k_attn, g2, dim3(KC_THREADS), 0, (const float *)md->qr, (const float *)kc, (const float *)vc,
                       (const float *)md->qg, 2 * H * D, (const int *)md->d_in, H, Hkv, D, md->scr, max_pos, md->att,
                       H * D));
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_ATTN_OUTPUT], md->x, E, 1);
            CKS(gemv_in(md, js, m, pro(0, md->att, nullptr, H * D, nullptr, 1, eps)));
        }
        GJobs js = {};
        js.nj = 2;
        js.j[0] = job(l.w[KCUDA_W_FFN_GATE], md->gate, F, 0);
        js.j[1] = job(l.w[KCUDA_W_FFN_UP], md->up, F, 0);
        CKS(gemv_in(md, js, m, pro(1, md->x, nullptr, E, l.v[KCUDA_W_POST_ATTN_NORM], 1, eps)));
        js.nj = 1;
        js.j[0] = job(l.w[KCUDA_W_FFN_DOWN], md->x, E, 1);
        CKS(gemv_in(md, js, m, pro(2, md->gate, md->up, F, nullptr, 1, eps)));
    }
    // The LM head in pieces of vocabulary rows, each followed by an event that the copy back
    // waits for (pass_queue): the logits of piece p travel to the host while p + 1 is computed.
    const DW &W = md->out.type >= 0 ? md->out : md->tok;
    GJobs js = {};
    js.nj = 1;
    js.j[0] = job(W, out.logits, V, 0);
    Pro pf = pro(1, md->x, nullptr, E, md->out_norm, 1, eps);
    pf.out2 = out.hout;
    pf.ld2 = E;
    ActIn a;
    CKS(act_prepare(md, js, m, pf, &a));
    int nch = 1, np = 1;
    lm_split(m, V, &nch, &np);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(g_stream, &cs));
    for (int p = 0; p < np; p++) {
        const int r0 = lm_piece_col(p, nch, np, V), r1 = lm_piece_col(p + 1, nch, np, V);
        if (r1 > r0) {
            js.j[0] = job_rows(W, r0, r1 - r0, out.logits + r0, V);
            CKS(launch_gemv(js, m, a.P, a.q, a.d, a.f, a.ldx));
            a.P.out2 = nullptr; // h_out: written once (by a prologue of the first piece, if any)
        }
        // in a graph: an event record node that work outside the graph can wait for
        CK(cudaEventRecordWithFlags(md->lmev[p], g_stream,
                                    cs == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault));
    }
    return 0;
}

static int32_t capture(kcuda_model *md, int m, int s, cudaGraphExec_t *out) {
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    int32_t st = forward(md, m, s);
    cudaError_t e = cudaStreamEndCapture(g_stream, &g);
    if (st) {
        if (g) cudaGraphDestroy(g);
        return st;
    }
    CK(e);
    e = cudaGraphInstantiate(out, g, 0);
    cudaGraphDestroy(g);
    CK(e);
    // upload now (outside the request window), not at the first launch
    CK(cudaGraphUpload(*out, g_stream));
    md->cnt[KCUDA_C_GRAPH_CAPTURES]++;
    return 0;
}

// ------------------------------------------------------------------------------------------------
// Per-op gemm cache (host weight pointer -> device copy)

struct CacheEnt {
    DW w;
    int64_t bytes;
    int n, k;
};
static std::map<const void *, CacheEnt> g_wcache;
static void *g_op_buf = nullptr;
static size_t g_op_bytes = 0;

static void op_free_all(void) {
    for (auto &kv : g_wcache) dw_free(kv.second.w);
    g_wcache.clear();
    if (g_op_buf) cudaFree(g_op_buf);
    g_op_buf = nullptr;
    g_op_bytes = 0;
    if (g_stage) cudaFree(g_stage);
    g_stage = nullptr;
    g_stage_bytes = 0;
}

// ------------------------------------------------------------------------------------------------
// Exports

static void note_put(char *note, int32_t len, const char *s) {
    if (!note || len <= 0) return;
    snprintf(note, (size_t)len, "%s", s);
}

extern "C" {

KCUDA_API int32_t kcuda_init(char *note, int32_t note_len) {
    char buf[512];
    if (g_ready) {
        note_put(note, note_len, "already initialised");
        return 0;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, "cudart error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        cudaGetLastError();
        return (int32_t)e;
    }
    if (n <= 0) {
        note_put(note, note_len, "no CUDA device");
        return KCUDA_E_NODEVICE;
    }
    g_device = 0;
    e = cudaSetDevice(g_device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, "cudart error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        return (int32_t)e;
    }
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, g_device) == cudaSuccess) {
        snprintf(buf, sizeof buf, "device 0: %s (sm_%d%d), %d device(s)", pr.name, pr.major, pr.minor, n);
        g_cc_major = pr.major;
    }
    else
        snprintf(buf, sizeof buf, "device 0 ready");
    note_put(note, note_len, buf);
    e = (cudaError_t)gemv_smem_optin();
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, "cudart error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        return (int32_t)e;
    }
    g_ready = 1;
    return 0;
}

KCUDA_API void kcuda_shutdown(void) {
    if (!g_ready) return;
    cudaDeviceSynchronize();
    op_free_all();
    if (g_stream) cudaStreamDestroy(g_stream);
    g_stream = 0;
    g_ready = 0;
}

KCUDA_API int32_t kcuda_device_info(char *name, int32_t name_len, int32_t *cc_major, int32_t *cc_minor,
                                    int64_t *mem_total, int32_t *driver_version, int32_t *runtime_version) {
    int dv = 0, rv = 0;
    cudaDriverGetVersion(&dv);
    cudaRuntimeGetVersion(&rv);
    if (driver_version) *driver_version = dv;
    if (runtime_version) *runtime_version = rv;
    if (!g_ready) return KCUDA_E_NODEVICE;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, g_device));
    note_put(name, name_len, pr.name);
    if (cc_major) *cc_major = pr.major;
    if (cc_minor) *cc_minor = pr.minor;
    if (mem_total) *mem_total = (int64_t)pr.totalGlobalMem;
    return 0;
}

KCUDA_API int32_t kcuda_set_option(int32_t key, int64_t value) {
    if (key == KCUDA_OPT_GRAPH) g_opt_graph = value != 0;
    else if (key == KCUDA_OPT_GRAPH_M) g_opt_graph_m = value != 0;
    else return KCUDA_E_UNSUPPORTED;
    return 0;
}

KCUDA_API int32_t kcuda_gemm_gw(int32_t wtype, const void *w, int64_t w_bytes, int32_t n_out, int32_t k,
                                const int8_t *xq, const float *xd, int32_t m, float *y) {
    if (!g_ready) return KCUDA_E_NODEVICE;
    if (wtype != KCUDA_T_Q8_0 && wtype != KCUDA_T_Q4_0) return KCUDA_E_UNSUPPORTED;
    if (!w || !xq || !xd || !y || n_out <= 0 || k <= 0 || k % 32 || m <= 0) return KCUDA_E_ARG;
    auto it = g_wcache.find(w);
    if (it != g_wcache.end() && (it->second.bytes != w_bytes || it->second.n != n_out || it->second.k != k ||
                                 it->second.w.type != wtype)) {
        dw_free(it->second.w);
        g_wcache.erase(it);
        it = g_wcache.end();
    }
    if (it == g_wcache.end()) {
        CacheEnt ce;
        ce.bytes = w_bytes;
        ce.n = n_out;
        ce.k = k;
        int32_t st = dw_upload(ce.w, wtype, w, k, n_out, w_bytes);
        if (st) {
            dw_free(ce.w);
            return st;
        }
        it = g_wcache.emplace(w, ce).first;
    }
    size_t qb = (size_t)m * k, db = (size_t)m * (k / 32) * 4, yb = (size_t)m * n_out * 4;
    size_t need = ((qb + 255) / 256 + (db + 255) / 256 + (yb + 255) / 256) * 256;
    if (need > g_op_bytes) {
        if (g_op_buf) cudaFree(g_op_buf);
        g_op_buf = nullptr;
        g_op_bytes = 0;
        CK(cudaMalloc(&g_op_buf, need));
        g_op_bytes = need;
    }
    int8_t *dq = (int8_t *)g_op_buf;
    float *dd = (float *)((char *)g_op_buf + (qb + 255) / 256 * 256);
    float *dy = (float *)((char *)dd + (db + 255) / 256 * 256);
    CK(cudaMemcpyAsync(dq, xq, qb, cudaMemcpyHostToDevice, g_stream));
    CK(cudaMemcpyAsync(dd, xd, db, cudaMemcpyHostToDevice, g_stream));
    GJobs js = {};
    js.nj = 1;
    js.j[0] = job(it->second.w, dy, n_out, 0);
    CKS(launch_gemv(js, m, pro(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f), dq, dd, nullptr, k));
    CK(cudaMemcpyAsync(y, dy, yb, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    return 0;
}

KCUDA_API kcuda_model *kcuda_model_create(const int32_t *hp, int32_t n_hp, const int32_t *layer_recurrent,
                                          float eps) {
    if (!g_ready || !hp || n_hp < KCUDA_HP_COUNT) return nullptr;
    for (int i = 0; i < KCUDA_HP_COUNT; i++)
        if (hp[i] < 0) return nullptr;
    if (hp[KCUDA_HP_N_LAYER] <= 0 || hp[KCUDA_HP_N_EMBD] <= 0 || hp[KCUDA_HP_N_VOCAB] <= 0) return nullptr;
    if (hp[KCUDA_HP_SSM_CONV] > 9 || hp[KCUDA_HP_SSM_DK] > KC_DK_MAX) return nullptr;
    if (hp[KCUDA_HP_N_HEAD_KV] > 0 && hp[KCUDA_HP_N_HEAD] % hp[KCUDA_HP_N_HEAD_KV]) return nullptr;
    if (hp[KCUDA_HP_SSM_HK] > 0 && hp[KCUDA_HP_SSM_HV] % hp[KCUDA_HP_SSM_HK]) return nullptr;
    kcuda_model *md = new (std::nothrow) kcuda_model();
    if (!md) return nullptr;
    memcpy(md->hp, hp, sizeof md->hp);
    md->eps = eps;
    md->nl = hp[KCUDA_HP_N_LAYER];
    md->L.resize((size_t)md->nl);
    md->nrec = md->nfull = 0;
    for (int il = 0; il < md->nl; il++) {
        md->L[il].rec = layer_recurrent ? layer_recurrent[il] != 0 : 0;
        md->L[il].idx = md->L[il].rec ? md->nrec++ : md->nfull++;
    }
    return md;
}

KCUDA_API int32_t kcuda_model_set_tensor(kcuda_model *md, int32_t layer, int32_t role, int32_t type,
                                         const void *data, int64_t ne0, int64_t ne1, int64_t nbytes) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (role < 0 || role >= KCUDA_W_COUNT || !data) return KCUDA_E_ARG;
    if (layer < -1 || layer >= md->nl) return KCUDA_E_ARG;
    if (md->prepared) return KCUDA_E_STATE;
    if (is_vec_role(role)) {
        float **dst = layer < 0 ? (role == KCUDA_W_OUTPUT_NORM ? &md->out_norm : nullptr) : &md->L[layer].v[role];
        if (!dst) return KCUDA_E_ARG;
        return vec_upload(dst, type, data, ne0 * ne1, nbytes);
    }
    DW *dst;
    if (layer < 0) {
        if (role == KCUDA_W_TOKEN_EMBD) dst = &md->tok;
        else if (role == KCUDA_W_OUTPUT) dst = &md->out;
        else return KCUDA_E_ARG;
    } else {
        dst = &md->L[layer].w[role];
    }
    return dw_upload(*dst, type, data, ne0, ne1, nbytes);
}

KCUDA_API int32_t kcuda_model_set_rope(kcuda_model *md, const float *cos_tab, const float *sin_tab,
                                       int32_t max_pos, int32_t half_rot) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (!cos_tab || !sin_tab || max_pos <= 0 || half_rot < 0) return KCUDA_E_ARG;
    size_t n = (size_t)max_pos * (half_rot > 0 ? half_rot : 1);
    if (md->cos_tab) cudaFree(md->cos_tab);
    if (md->sin_tab) cudaFree(md->sin_tab);
    md->cos_tab = md->sin_tab = nullptr;
    CK(cudaMalloc((void **)&md->cos_tab, n * 4));
    CK(cudaMalloc((void **)&md->sin_tab, n * 4));
    if (half_rot > 0) {
        CK(cudaMemcpy(md->cos_tab, cos_tab, (size_t)max_pos * half_rot * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(md->sin_tab, sin_tab, (size_t)max_pos * half_rot * 4, cudaMemcpyHostToDevice));
    }
    md->rope_max_pos = max_pos;
    md->half_tab = half_rot;
    return 0;
}

static int dw_ok(const DW &w, int64_t ne0, int64_t ne1) {
    return w.type >= 0 && w.ne0 == ne0 && w.ne1 == ne1;
}

KCUDA_API int32_t kcuda_model_prepare(kcuda_model *md, int32_t max_m) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (md->prepared) return KCUDA_E_STATE;
    if (max_m < 1) max_m = 1;
    const int32_t *hp = md->hp;
    const int E = hp[KCUDA_HP_N_EMBD], V = hp[KCUDA_HP_N_VOCAB], F = hp[KCUDA_HP_N_FF];
    const int H = hp[KCUDA_HP_N_HEAD], Hkv = hp[KCUDA_HP_N_HEAD_KV], D = hp[KCUDA_HP_HEAD_DIM];
    const int K = hp[KCUDA_HP_SSM_CONV], dk = hp[KCUDA_HP_SSM_DK], Hk = hp[KCUDA_HP_SSM_HK];
    const int Hv = hp[KCUDA_HP_SSM_HV], dv = hp[KCUDA_HP_SSM_DV], max_pos = hp[KCUDA_HP_MAX_POS];
    const int C = 2 * Hk * dk + Hv * dv;
    // required tensors and shapes
    if (!dw_ok(md->tok, E, V) || !md->out_norm) return KCUDA_E_STATE;
    if (md->out.type >= 0 && !dw_ok(md->out, E, V)) return KCUDA_E_STATE;
    if (md->nfull > 0) {
        if (!md->cos_tab || md->rope_max_pos < max_pos || md->half_tab < hp[KCUDA_HP_N_ROT] / 2) return KCUDA_E_STATE;
        if (D > 1024 || H <= 0 || Hkv <= 0 || hp[KCUDA_HP_N_ROT] > D) return KCUDA_E_UNSUPPORTED;
    }
    if (md->nrec > 0 && (K < 1 || dk <= 0 || dv <= 0 || Hk <= 0 || Hv <= 0)) return KCUDA_E_UNSUPPORTED;
    for (int il = 0; il < md->nl; il++) {
        Layer &l = md->L[il];
        if (!l.v[KCUDA_W_ATTN_NORM] || !l.v[KCUDA_W_POST_ATTN_NORM]) return KCUDA_E_STATE;
        if (!dw_ok(l.w[KCUDA_W_FFN_GATE], E, F) || !dw_ok(l.w[KCUDA_W_FFN_UP], E, F) ||
            !dw_ok(l.w[KCUDA_W_FFN_DOWN], F, E))
            return KCUDA_E_STATE;
        if (l.rec) {
            if (!dw_ok(l.w[KCUDA_W_SSM_QKV], E, C) || !dw_ok(l.w[KCUDA_W_SSM_GATE], E, (int64_t)Hv * dv) ||
                !dw_ok(l.w[KCUDA_W_SSM_BETA], E, Hv) || !dw_ok(l.w[KCUDA_W_SSM_ALPHA], E, Hv) ||
                !dw_ok(l.w[KCUDA_W_SSM_OUT], (int64_t)Hv * dv, E) || !l.v[KCUDA_W_SSM_A] ||
                !l.v[KCUDA_W_SSM_DT_BIAS] || !l.v[KCUDA_W_SSM_CONV1D] || !l.v[KCUDA_W_SSM_NORM])
                return KCUDA_E_STATE;
        } else {
            if (!dw_ok(l.w[KCUDA_W_ATTN_Q], E, (int64_t)2 * H * D) || !dw_ok(l.w[KCUDA_W_ATTN_K], E, (int64_t)Hkv * D) ||
                !dw_ok(l.w[KCUDA_W_ATTN_V], E, (int64_t)Hkv * D) || !dw_ok(l.w[KCUDA_W_ATTN_OUTPUT], (int64_t)H * D, E) ||
                !l.v[KCUDA_W_ATTN_Q_NORM] || !l.v[KCUDA_W_ATTN_K_NORM])
                return KCUDA_E_STATE;
        }
    }
    md->max_m = max_m;
    int maxk = E;
    if (F > maxk) maxk = F;
    if (H * D > maxk) maxk = H * D;
    if (Hv * dv > maxk) maxk = Hv * dv;
    md->ldx = (maxk + 31) / 32 * 32;
    size_t M = (size_t)max_m;
    void *p;
#define AL(field, bytes) do { CKS(dalloc(md, &p, (bytes))); md->field = (decltype(md->field))p; } while (0)
    AL(d_in, (M + 1) * 4);
    AL(x, M * E * 4);
    AL(xf, M * md->ldx * 4);
    AL(xq, M * md->ldx);
    AL(xd, M * (md->ldx / 32) * 4);
    AL(gate, M * F * 4);
    AL(up, M * F * 4);
    for (int s = 0; s < KC_SLOTS; s++) {
        AL(sl[s].hout, M * E * 4);
        AL(sl[s].logits, M * (size_t)V * 4);
    }
    if (md->nrec) {
        AL(qkv, M * C * 4);
        AL(z, M * Hv * dv * 4);
        AL(beta, M * Hv * 4);
        AL(alpha, M * Hv * 4);
        AL(ybuf, M * Hv * dv * 4);
        md->ring_rows = K - 1 + max_m;
        AL(ring, (size_t)md->nrec * md->ring_rows * C * 4);
        AL(ssm, (size_t)md->nrec * Hv * dv * dk * 4);
        const size_t dsm = dn_smem(max_m, dk);
        if (dsm > 48 * 1024) {
            CK(cudaFuncSetAttribute(k_deltanet, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dsm));
        }
    }
    if (md->nfull) {
        AL(qg, M * 2 * H * D * 4);
        AL(kb, M * Hkv * D * 4);
        AL(vb, M * Hkv * D * 4);
        AL(qr, M * H * D * 4);
        AL(att, M * H * D * 4);
        AL(scr, M * H * (size_t)max_pos * 4);
        AL(kc, (size_t)md->nfull * max_pos * Hkv * D * 4);
        AL(vc, (size_t)md->nfull * max_pos * Hkv * D * 4);
    }
#undef AL
    for (Slot &s : md->sl) {
        CK(cudaMallocHost((void **)&s.h_in, (M + 1) * 4));
        CK(cudaMallocHost((void **)&s.pin_hout, M * E * 4));
        CK(cudaMallocHost((void **)&s.pin_logits, M * (size_t)V * 4));
        for (int i = 0; i < KC_LM_PIECES; i++) CK(cudaEventCreateWithFlags(&s.ev[i], cudaEventDisableTiming));
    }
    for (int i = 0; i < KC_LM_PIECES; i++) CK(cudaEventCreateWithFlags(&md->lmev[i], cudaEventDisableTiming));
    if (!md->cps) CK(cudaStreamCreateWithFlags(&md->cps, cudaStreamNonBlocking));
    if (KC_COPY_THREADS > 0 && md->cp_th.empty()) {
        try {
            for (int i = 1; i <= KC_COPY_THREADS; i++) md->cp_th.emplace_back(copy_worker, md, i);
        } catch (...) {
            copy_threads_stop(md); // run with the caller's thread alone
            md->cp_stop = 0;
        }
    }
    md->opt_graph = g_opt_graph;
    md->opt_graph_m = g_opt_graph_m;
    // Warm-up, outside any request window: one pass for each kernel instance the steps use
    // (gemv row tiles 1, 2, 4, 8), so that lazy module loading and first-launch costs do not
    // land in the first request. kcuda_seq_reset zeroes the state these passes leave behind.
    memset(md->sl[0].h_in, 0, (M + 1) * 4);
    CK(cudaMemcpyAsync(md->d_in, md->sl[0].h_in, (M + 1) * 4, cudaMemcpyHostToDevice, g_stream));
    const int wm[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        int m = wm[i] <= max_m ? wm[i] : (i > 0 && wm[i - 1] < max_m ? max_m : 0);
        if (m > 0) CKS(forward(md, m, 0));
    }
    CK(cudaStreamSynchronize(g_stream));
    md->prepared = 1;
    return 0;
}

KCUDA_API int32_t kcuda_seq_reset(kcuda_model *md) {
    if (!md || !md->prepared || !g_ready) return KCUDA_E_STATE;
    const int32_t *hp = md->hp;
    const int Hkv = hp[KCUDA_HP_N_HEAD_KV], D = hp[KCUDA_HP_HEAD_DIM], max_pos = hp[KCUDA_HP_MAX_POS];
    const int dk = hp[KCUDA_HP_SSM_DK], Hk = hp[KCUDA_HP_SSM_HK];
    const int Hv = hp[KCUDA_HP_SSM_HV], dv = hp[KCUDA_HP_SSM_DV];
    const int C = 2 * Hk * dk + Hv * dv;
    if (md->nfull) {
        CK(cudaMemsetAsync(md->kc, 0, (size_t)md->nfull * max_pos * Hkv * D * 4, g_stream));
        CK(cudaMemsetAsync(md->vc, 0, (size_t)md->nfull * max_pos * Hkv * D * 4, g_stream));
    }
    if (md->nrec) {
        CK(cudaMemsetAsync(md->ring, 0, (size_t)md->nrec * md->ring_rows * C * 4, g_stream));
        CK(cudaMemsetAsync(md->ssm, 0, (size_t)md->nrec * Hv * dv * dk * 4, g_stream));
    }
    CK(cudaStreamSynchronize(g_stream));
    // graphs: captured here (never in a step), each behind its own gate
    md->opt_graph = g_opt_graph;
    md->opt_graph_m = g_opt_graph_m;
    for (int s = 0; s < KC_SLOTS; s++) {
        Slot &sl = md->sl[s];
        if (md->opt_graph && !sl.g1) CKS(capture(md, 1, s, &sl.g1));
        if (md->opt_graph_m) {
            for (int m = 2; m <= md->max_m; m++)
                if (!sl.gm.count(m)) {
                    cudaGraphExec_t ge = nullptr;
                    CKS(capture(md, m, s, &ge));
                    sl.gm[m] = ge;
                }
        }
    }
    return 0;
}

// Arguments of a call of m rows at positions pos.. (the model prepared for them)
static int32_t rows_check(const kcuda_model *md, const int32_t *tokens, int32_t n, int32_t m, int32_t pos) {
    if (!md || !md->prepared || !g_ready) return KCUDA_E_STATE;
    const int V = md->hp[KCUDA_HP_N_VOCAB];
    if (!tokens || n < 1 || m < 1 || m > md->max_m || pos < 0 || pos > md->hp[KCUDA_HP_MAX_POS] - n)
        return KCUDA_E_ARG;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) return KCUDA_E_ARG;
    return 0;
}

// Queue one pass of m rows at positions pos.. writing slot s, and the copies of its outputs
// back to the slot's pinned staging on the copy stream: h_out once the LM head's first piece is
// done (the final norm ran before it), then the logits of each piece in one copy once the piece
// is (one copy per chunk made the copies of an M-row pass trail its last kernel by 54 us instead
// of 38: latency note, section 13), each piece followed by an event that the host waits for.
// Returns at once: nothing here waits for the device.
static int32_t pass_queue(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, int s) {
    Slot &sl = md->sl[s];
    const int E = md->hp[KCUDA_HP_N_EMBD], V = md->hp[KCUDA_HP_N_VOCAB];
    sl.h_in[0] = pos;
    for (int i = 0; i < m; i++) sl.h_in[1 + i] = tokens[i];
    CK(cudaMemcpyAsync(md->d_in, sl.h_in, (size_t)(m + 1) * 4, cudaMemcpyHostToDevice, g_stream));
    if (m == 1) {
        if (md->opt_graph && sl.g1) {
            CK(cudaGraphLaunch(sl.g1, g_stream));
            md->cnt[KCUDA_C_GRAPH_REPLAYS]++;
        } else {
            CKS(forward(md, 1, s));
            md->cnt[KCUDA_C_STREAM_STEPS]++;
        }
    } else {
        auto it = md->opt_graph_m ? sl.gm.find(m) : sl.gm.end();
        if (it != sl.gm.end()) {
            CK(cudaGraphLaunch(it->second, g_stream));
            md->cnt[KCUDA_C_MROW_GRAPH_REPLAYS]++;
        } else {
            CKS(forward(md, m, s));
        }
    }
    int nch = 1, np = 1;
    lm_split(m, V, &nch, &np);
    for (int p = 0; p < np; p++) {
        CK(cudaStreamWaitEvent(md->cps, md->lmev[p], 0));
        if (p == 0) CK(cudaMemcpyAsync(sl.pin_hout, sl.hout, (size_t)m * E * 4, cudaMemcpyDeviceToHost, md->cps));
        const int v0 = lm_piece_col(p, nch, np, V), v1 = lm_piece_col(p + 1, nch, np, V);
        if (v1 > v0)
            CK(cudaMemcpy2DAsync(sl.pin_logits + v0, (size_t)V * 4, sl.logits + v0, (size_t)V * 4,
                                 (size_t)(v1 - v0) * 4, (size_t)m, cudaMemcpyDeviceToHost, md->cps));
        CK(cudaEventRecord(sl.ev[p], md->cps));
    }
    return 0;
}

// The copy-out of the pass queued into slot s (m rows) to the caller's h_out[m][E] and
// logits[m][V] (either may be NULL), as the copy threads' next job; returns its chunks.
static int copy_job(kcuda_model *md, int32_t m, int s, float *h_out, float *logits, int async) {
    const int V = md->hp[KCUDA_HP_N_VOCAB];
    int nch = 1, np = 1;
    lm_split(m, V, &nch, &np);
    md->cp_dst = logits;
    md->cp_hdst = h_out;
    md->cp_nch = nch;
    md->cp_per = nch / np;
    md->cp_m = m;
    md->cp_v = V;
    md->cp_e = md->hp[KCUDA_HP_N_EMBD];
    md->cp_slot = s;
    md->cp_async = async;
    return nch;
}

static void copy_wake(kcuda_model *md, int nthreads) {
    {
        std::lock_guard<std::mutex> lk(md->cp_mu);
        md->cp_err = 0;
        md->cp_busy = nthreads;
        md->cp_gen++;
    }
    md->cp_cv.notify_all();
}

static int32_t copy_wait(kcuda_model *md) {
    std::unique_lock<std::mutex> lk(md->cp_mu);
    md->cp_done.wait(lk, [&] { return md->cp_busy == 0; });
    return md->cp_err;
}

static void count_pass(kcuda_model *md, int32_t m) {
    if (m == 1) md->cnt[KCUDA_C_STEPS]++;
    else md->cnt[KCUDA_C_MROW_CALLS]++;
}

// Wait for the pass queued into slot s and copy its outputs out of the staging: the host copies
// the chunks of a piece out while the pieces after it are still in flight, with the copy threads
// for M rows.
static int32_t pass_collect(kcuda_model *md, int32_t m, int s, float *h_out, float *logits) {
    const int nch = copy_job(md, m, s, h_out, logits, 0);
    // helpers for M rows only: at M=1 the caller reads the logits next (greedy pick), and a
    // copy by this thread leaves them in its own cache (measured faster on the H200)
    const int nthr = (nch > 1 && m > 1) ? (int)md->cp_th.size() + 1 : 1;
    if (nthr > 1) copy_wake(md, nthr - 1);
    int32_t err = copy_hout(md);
    if (!err) err = copy_share(md, 0, nthr);
    if (nthr > 1) {
        const int32_t e = copy_wait(md);
        if (!err) err = e;
    }
    if (err) return err;
    count_pass(md, m);
    return 0;
}

// The same copy-out done by the copy threads alone while this thread queues the next pass
// (kcuda_prompt); collect_end waits for it. Without copy threads, this thread does it now.
static int32_t collect_begin(kcuda_model *md, int32_t m, int s, float *h_out, float *logits) {
    if (md->cp_th.empty()) return pass_collect(md, m, s, h_out, logits);
    copy_job(md, m, s, h_out, logits, 1);
    md->cp_pending = m;
    copy_wake(md, (int)md->cp_th.size());
    return 0;
}

static int32_t collect_end(kcuda_model *md) {
    const int32_t m = md->cp_pending;
    if (!m) return 0;
    md->cp_pending = 0;
    CKS(copy_wait(md));
    count_pass(md, m);
    return 0;
}

static int32_t run_rows(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, float *h_out,
                        float *logits) {
    CKS(rows_check(md, tokens, m, m, pos));
    CKS(pass_queue(md, tokens, m, pos, 0));
    return pass_collect(md, m, 0, h_out, logits);
}

KCUDA_API int32_t kcuda_step(kcuda_model *md, int32_t token, int32_t pos, float *h_out, float *logits) {
    if (!md) return KCUDA_E_STATE;
    return run_rows(md, &token, 1, pos, h_out, logits);
}

// n rows in passes of m queued back to back. Pass i + 1 is queued before pass i is copied out,
// and the copy threads copy pass i out while this thread queues pass i + 2: the device does not
// idle between passes for the copy back and the return to the caller, nor (in stream mode)
// for this thread's copying (latency note, section 14). Passes cycle through three slots; before
// pass i + 3 reuses a slot, pass i has been copied out, so no pass overwrites outputs still on
// their way back. Row r's outputs go to row r % ring of h_out / logits.
KCUDA_API int32_t kcuda_prompt(kcuda_model *md, const int32_t *tokens, int32_t n, int32_t m, int32_t pos,
                               float *h_out, float *logits, int32_t ring) {
    CKS(rows_check(md, tokens, n, m, pos));
    if (ring < n && (ring < m || ring % m != 0)) return KCUDA_E_ARG;
    const int E = md->hp[KCUDA_HP_N_EMBD], V = md->hp[KCUDA_HP_N_VOCAB];
    int32_t err = 0;
    int prev = -1, prev_m = 0; // first row and rows of the pass queued and not yet copied out
    for (int r = 0; !err && (r < n || prev >= 0); r += m) {
        const int mi = r >= n ? 0 : n - r < m ? n - r : m;
        if (mi > 0) err = pass_queue(md, tokens + r, mi, pos + r, (r / m) % KC_SLOTS);
        const int32_t e = collect_end(md); // the pass before prev: its slot is free again
        if (!err) err = e;
        if (!err && prev >= 0) {
            const size_t o = (size_t)(prev % ring);
            err = collect_begin(md, prev_m, (prev / m) % KC_SLOTS, h_out ? h_out + o * E : nullptr,
                                logits ? logits + o * V : nullptr);
        }
        prev = mi > 0 ? r : -1;
        prev_m = mi;
    }
    const int32_t e = collect_end(md); // the last pass; never leave a copy into the caller's rows behind
    return err ? err : e;
}

KCUDA_API int32_t kcuda_model_counters(kcuda_model *md, int64_t *out, int32_t n) {
    if (!md || !out) return KCUDA_E_ARG;
    for (int i = 0; i < n; i++) out[i] = i < KCUDA_C_COUNT ? md->cnt[i] : 0;
    return 0;
}

KCUDA_API void kcuda_model_free(kcuda_model *md) {
    if (!md) return;
    if (g_ready) {
        cudaStreamSynchronize(g_stream);
        if (md->cps) cudaStreamSynchronize(md->cps);
    }
    model_free(md);
}

} // extern "C"

// Not exported by itself: exports.cu wraps it as kcuda_step_m (the loader test module omits it).
int32_t kcuda_impl_step_m(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, float *h_out,
                          float *logits) {
    if (!md) return KCUDA_E_STATE;
    return run_rows(md, tokens, m, pos, h_out, logits);
}
