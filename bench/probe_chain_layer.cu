// P3' (issue 48): a chain of 24 DeltaNet-shaped layers, each five kernels of the uniform shape
// (one CTA an SM at most, 288 threads: a producer lane and 8 warps), with kite's per-CTA bytes of
// qwen35-0.8b Q8_0 staged into shared memory by bulk copies before the PDL wait:
//   norm + in-proj   131 CTAs, 63 of 8224 rows of 1024 (68.5 KB), the row norm per warp after the wait
//                    (x by one bulk copy into shared memory after the wait, no block barrier)
//   head             16 CTAs, one value head's 128 x 128 float state (64 KB) and 3 KB of conv data
//   out + residual   128 CTAs, 8 of 1024 rows of 2048 (17 KB), x[r] read right after the wait
//   norm + gate/up   112 CTAs, 32 gate and 32 up rows of 1024 (69.6 KB), SwiGLU and its quantization
//   down + residual  128 CTAs, 8 of 1024 rows of 3584 (30.5 KB), x[r] read right after the wait
// x (the residual stream) is really written and read; the dots are Q8_0 block dots (dp4a, a
// butterfly per row) on the staged bytes. Not kite's bytes: a probe of the chain's timing only.
// Output: us a layer (graph replays), and per kernel the median lookahead (previous kernel's end
// minus this one's first CTA start), release (first wait release minus previous end) and body
// (this kernel's end minus the previous end), over the 24 layers.
// Pass (written down before the first run, docs/PERFORMANCE.md): <= 12 us a layer; stretch <= 9.
// Two diagnostic variants follow the chain (no bar): "no body" (after the wait a CTA only waits
// for its copy and writes its outputs' first word) and "no staging" (no bulk copy: the bodies
// read shared memory as it is), to tell the staged bytes' share of a layer from the bodies'.
// Build: nvcc -O3 -arch=sm_90 -o probe_chain_layer bench/probe_chain_layer.cu
#include "probe_common.cuh"
#include <cuda_fp16.h>

constexpr int THREADS = 288, WARPS = 8, E = 1024, F = 3584, INPROJ = 8224, HEADS = 16, DV = 128;
constexpr int LAYERS = 24, OPS = 5;

enum Mode { NORM_GEMV, HEAD, GEMV_RES, NORM_GLU };

enum Variant { FULL, NO_BODY, NO_STAGING };

struct OpArgs {
    int mode, rows, k;       // rows of this CTA's weights, row width
    int variant;
    const int8_t *q;         // [grid][rows][k] quants
    const uint16_t *s;       // [grid][rows][k / 32] f16 scales
    float *state;            // HEAD: [HEADS][DV][DV]
    float *x;                // [E] the residual stream
    float *proj;             // [INPROJ] in-proj output
    int8_t *aq;              // [F] quantized activations of the next product
    float *ad;               // [F / 32]
    const int8_t *in_q;      // GEMV_RES: activations
    const float *in_d;
    uint64_t *times;         // [cta][3] start, release, end
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Lane l's 32-block l of the row norm of x (1024 wide, in shared memory), quantized: q[8] words,
// scale d. Both passes read shared memory without bank conflicts: x[l + 32 j], then lane l's own
// block with a per-lane rotation (element (j + l) % 32 in v[j]: a probe packs them in that order;
// kite's kernel would restore the element order, the same work).
__device__ __forceinline__ void norm_block(const float *x, int lane, int (&q)[8], float &d) {
    float ss = 0.0f;
#pragma unroll 8
    for (int j = 0; j < 32; j++) {
        const float v = x[lane + 32 * j];
        ss = ss + v * v;
    }
    const float sc = rsqrtf(warp_sum(ss) / E + 1e-6f);
    float v[32], amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        v[j] = x[32 * lane + ((j + lane) & 31)] * sc;
        amax = fmaxf(amax, fabsf(v[j]));
    }
    d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
#pragma unroll
    for (int w = 0; w < 8; w++) {
        int p = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) p |= (__float2int_rn(v[4 * w + b] * id) & 0xff) << (8 * b);
        q[w] = p;
    }
}

// A Q8_0 block dot: 32 staged int8 weights against 32 activations in 8 words.
__device__ __forceinline__ int block_dot(const int8_t *wq, const int (&q)[8]) {
    const int4 a = ((const int4 *)wq)[0], b = ((const int4 *)wq)[1];
    int s = __dp4a(a.x, q[0], 0);
    s = __dp4a(a.y, q[1], s); s = __dp4a(a.z, q[2], s); s = __dp4a(a.w, q[3], s);
    s = __dp4a(b.x, q[4], s); s = __dp4a(b.y, q[5], s); s = __dp4a(b.z, q[6], s); s = __dp4a(b.w, q[7], s);
    return s;
}

__global__ void __launch_bounds__(THREADS, 1) k_op(OpArgs a) {
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ __align__(8) uint64_t bar, bar_x; // the staged weights; x (norm kernels, after the wait)
    __shared__ float s_out[2 * DV];
    const uint64_t t0 = gtime();
    pdl_trigger();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5; // warp 8: the producer
    const int nb = a.k / 32;
    const size_t qbytes = (size_t)a.rows * a.k, sbytes = (size_t)a.rows * nb * 2;
    int8_t *sq = (int8_t *)smem;
    const uint16_t *ss = (const uint16_t *)(smem + qbytes);
    float *xs = (float *)(smem + qbytes + sbytes); // [E] norm kernels: x, copied after the wait
    const bool norm = a.mode == NORM_GEMV || a.mode == NORM_GLU;
    if (threadIdx.x == WARPS * 32) {
        bar_init(&bar);
        bar_init(&bar_x);
        if (a.variant == NO_STAGING) {
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(&bar)) : "memory");
        } else if (a.mode == HEAD) {
            const uint32_t bytes = DV * DV * 4 + 3072;
            bar_expect(&bar, bytes);
            bulk_copy(smem, a.state + (size_t)blockIdx.x * DV * DV, DV * DV * 4, &bar);
            bulk_copy(smem + DV * DV * 4, a.q + (size_t)blockIdx.x * 3072, 3072, &bar);
        } else {
            bar_expect(&bar, (uint32_t)(qbytes + sbytes));
            bulk_copy(smem, a.q + (size_t)blockIdx.x * qbytes, (uint32_t)qbytes, &bar);
            bulk_copy(smem + qbytes, a.s + (size_t)blockIdx.x * a.rows * nb, (uint32_t)sbytes, &bar);
        }
    }
    __syncthreads(); // the barrier is initialised
    pdl_wait();
    const uint64_t t1 = gtime();
    if (norm && a.variant != NO_BODY && threadIdx.x == WARPS * 32) { // one activation load: x by bulk copy
        bar_expect(&bar_x, E * 4);
        bulk_copy(xs, a.x, E * 4, &bar_x);
    }
    if (a.variant == NO_BODY) {
        bar_wait(&bar, 0);
        if (threadIdx.x == 0) a.x[blockIdx.x % E] = a.x[blockIdx.x % E] + (float)smem[0];
    } else if (warp < WARPS) {
        if (a.mode == NORM_GEMV || a.mode == NORM_GLU) {
            int q[8];
            float d;
            bar_wait(&bar_x, 0);
            norm_block(xs, lane, q, d); // every warp its own norm: no block barrier
            bar_wait(&bar, 0);
            for (int r = warp; r < a.rows; r += WARPS) {
                const float p = (float)block_dot(sq + (size_t)r * a.k + 32 * lane, q) * (__half2float(__ushort_as_half(ss[r * nb + lane])) * d);
                const float v = warp_sum(p);
                if (lane == 0) {
                    if (a.mode == NORM_GEMV) a.proj[(blockIdx.x * a.rows + r) % INPROJ] = v;
                    else s_out[r] = v;
                }
            }
        } else if (a.mode == GEMV_RES) {
            const int r = blockIdx.x * a.rows + warp;         // one row a warp
            const float xr = a.x[r];                          // the residual, right after the wait
            float p = 0.0f;
            for (int b = lane; b < nb; b += 32) {
                const int4 x0 = ((const int4 *)(a.in_q + 32 * b))[0], x1 = ((const int4 *)(a.in_q + 32 * b))[1];
                const int q[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
                const float xd = a.in_d[b];
                if (b == lane) bar_wait(&bar, 0);
                p = p + (float)block_dot(sq + (size_t)warp * a.k + 32 * b, q) * (__half2float(__ushort_as_half(ss[warp * nb + b])) * xd);
            }
            const float v = warp_sum(p);
            if (lane == 0) a.x[r] = xr + v;
        } else { // HEAD: q, k, v of the head from the in-proj; state rows w, w + 8, ...
            const float *hq = a.proj + blockIdx.x * DV, *hk = hq + HEADS * DV, *hv = hk + HEADS * DV;
            float kq[4], kk[4];
            float nq = 0.0f, nk = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                kq[j] = hq[lane + 32 * j];
                kk[j] = hk[lane + 32 * j];
                nq = nq + kq[j] * kq[j];
                nk = nk + kk[j] * kk[j];
            }
            nq = rsqrtf(warp_sum(nq) + 1e-6f);
            nk = rsqrtf(warp_sum(nk) + 1e-6f);
            const float beta = 1.0f / (1.0f + expf(-hv[DV - 1])), decay = expf(-log1pf(expf(hv[0])));
            bar_wait(&bar, 0);
            float *S = (float *)smem;
            constexpr int G = 4; // rows a warp takes together: G independent butterflies
            for (int r0 = warp; r0 < DV; r0 += G * WARPS) {
                float dk[G], o[G];
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const float *row = S + (r0 + g * WARPS) * DV;
                    dk[g] = 0.0f;
#pragma unroll
                    for (int j = 0; j < 4; j++) dk[g] = dk[g] + row[lane + 32 * j] * (kk[j] * nk);
                }
#pragma unroll
                for (int g = 0; g < G; g++) dk[g] = warp_sum(dk[g]);
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const int r = r0 + g * WARPS;
                    float *row = S + r * DV;
                    const float u = (hv[r] - dk[g] * decay) * beta;
                    o[g] = 0.0f;
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const float sv = row[lane + 32 * j] * decay + (kk[j] * nk) * u;
                        row[lane + 32 * j] = sv;
                        a.state[(size_t)blockIdx.x * DV * DV + r * DV + lane + 32 * j] = sv;
                        o[g] = o[g] + sv * (kq[j] * nq);
                    }
                }
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const float v = warp_sum(o[g]);
                    if (lane == 0) s_out[r0 + g * WARPS] = v;
                }
            }
        }
    }
    if (a.variant != NO_BODY && (a.mode == HEAD || a.mode == NORM_GLU)) {
        __syncthreads();
        // HEAD: the gated norm of the head's 128 outputs, 4 warps a 32-block each;
        // NORM_GLU: silu(gate) * up of the CTA's 32 rows, one warp
        const int blocks = a.mode == HEAD ? 4 : 1;
        if (warp < blocks) {
            float v;
            if (a.mode == HEAD) {
                float s2 = 0.0f;
#pragma unroll
                for (int j = 0; j < 4; j++) s2 = s2 + s_out[lane + 32 * j] * s_out[lane + 32 * j];
                v = s_out[32 * warp + lane] * rsqrtf(warp_sum(s2) / DV + 1e-6f);
            } else {
                const float g = s_out[lane];
                v = g / (1.0f + expf(-g)) * s_out[32 + lane];
            }
            float amax = fabsf(v);
#pragma unroll
            for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            const float d = amax / 127.0f;
            const int blk = blockIdx.x * blocks + warp;
            a.aq[32 * blk + lane] = (int8_t)__float2int_rn(d > 0.0f ? v / d : 0.0f);
            if (lane == 0) a.ad[blk] = d;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint64_t *t = a.times + (size_t)blockIdx.x * 3;
        t[0] = t0; t[1] = t1; t[2] = gtime();
    }
}

struct Kernel { int grid, rows, k, mode; size_t smem; const char *name; };

int main() {
    const Kernel ks[OPS] = {
        {131, 63, E, NORM_GEMV, 0, "norm + in-proj"},
        {HEADS, 0, DV, HEAD, 0, "head"},
        {128, 8, 2 * E, GEMV_RES, 0, "out + residual"},
        {112, 64, E, NORM_GLU, 0, "norm + gate/up + SwiGLU"},
        {128, 8, F, GEMV_RES, 0, "down + residual"},
    };
    size_t smem[OPS], wbytes[OPS];
    for (int o = 0; o < OPS; o++) {
        const Kernel &k = ks[o];
        smem[o] = k.mode == HEAD ? DV * DV * 4 + 3072 : (size_t)k.rows * k.k + (size_t)k.rows * (k.k / 32) * 2;
        wbytes[o] = (size_t)k.grid * smem[o];
        if (k.mode == NORM_GEMV || k.mode == NORM_GLU) smem[o] += E * 4; // x, after the wait
    }
    int8_t *w[LAYERS][OPS];
    uint16_t *sc[LAYERS][OPS];
    float *state[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        for (int o = 0; o < OPS; o++) {
            CK(cudaMalloc(&w[l][o], wbytes[o]));
            CK(cudaMemset(w[l][o], 1, wbytes[o]));
            CK(cudaMalloc(&sc[l][o], wbytes[o] / 8 + 256));
            CK(cudaMemset(sc[l][o], 0x10, wbytes[o] / 8 + 256)); // small f16 scales
        }
        CK(cudaMalloc(&state[l], (size_t)HEADS * DV * DV * 4));
        CK(cudaMemset(state[l], 0, (size_t)HEADS * DV * DV * 4));
    }
    float *x, *proj, *ad;
    int8_t *aq, *aq2;
    uint64_t *times;
    CK(cudaMalloc(&x, E * 4));
    CK(cudaMemset(x, 0, E * 4));
    CK(cudaMalloc(&proj, INPROJ * 4));
    CK(cudaMemset(proj, 0, INPROJ * 4));
    CK(cudaMalloc(&aq, F));
    CK(cudaMalloc(&aq2, F));
    CK(cudaMemset(aq, 1, F));
    CK(cudaMemset(aq2, 1, F));
    CK(cudaMalloc(&ad, F / 32 * 4 * 2));
    CK(cudaMemset(ad, 0, F / 32 * 4 * 2));
    CK(cudaMalloc(&times, (size_t)LAYERS * OPS * 132 * 3 * 8));
    CK(cudaFuncSetAttribute(k_op, cudaFuncAttributeMaxDynamicSharedMemorySize, 72 << 10));
    CK(cudaFuncSetAttribute(k_op, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, k_op));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t layer_bytes = 0;
    for (int o = 0; o < OPS; o++) layer_bytes += wbytes[o];
    printf("P3' layer chain: %d DeltaNet-shaped layers x %d kernels of %d threads, k_op %d registers, %.1f MB a layer\n",
           LAYERS, OPS, THREADS, fa.numRegs, layer_bytes / 1e6);
    const char *vname[3] = {"the chain", "no body (diagnostic)", "no staging (diagnostic)"};
    float *ad2 = ad + F / 32;
    double us_full = 0.0;
    for (int variant = FULL; variant <= NO_STAGING; variant++) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < LAYERS; l++)
            for (int o = 0; o < OPS; o++) {
                const Kernel &k = ks[o];
                OpArgs a = {};
                a.mode = k.mode; a.rows = k.rows; a.k = k.k; a.variant = variant;
                a.q = w[l][o]; a.s = sc[l][o]; a.state = state[l]; a.x = x; a.proj = proj;
                // head -> out reads aq / ad; glu -> down reads aq2 / ad2
                a.aq = o == 1 ? aq : aq2; a.ad = o == 1 ? ad : ad2;
                a.in_q = o == 2 ? aq : aq2; a.in_d = o == 2 ? ad : ad2;
                a.times = times + (size_t)(l * OPS + o) * 132 * 3;
                launch(k_op, dim3(k.grid), THREADS, smem[o], s, l + o > 0, a);
            }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int r = 0; r < 5; r++) CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        const float ms = graph_ms(ge, s, 50); // a replay
        const double us_layer = ms * 1000.0 / LAYERS;
        if (variant == FULL) us_full = us_layer;
        std::vector<uint64_t> h((size_t)LAYERS * OPS * 132 * 3);
        CK(cudaMemcpy(h.data(), times, h.size() * 8, cudaMemcpyDeviceToHost));
        printf("\n%s: %.2f us a layer (%.0f GB/s of staged bytes)\n\n", vname[variant], us_layer,
               layer_bytes / us_layer / 1e3);
        printf("| kernel | CTAs | staged a CTA | lookahead, us | release, us | body after the previous end, us |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
        for (int o = 0; o < OPS; o++) {
            std::vector<double> ahead, rel, body;
            for (int l = 0; l < LAYERS; l++) {
                const int i = l * OPS + o;
                if (i == 0) continue;
                const int pi = i - 1, pg = ks[pi % OPS].grid, g2 = ks[o].grid;
                uint64_t pend = 0, st = UINT64_MAX, rl = UINT64_MAX, en = 0;
                for (int c = 0; c < pg; c++) pend = std::max(pend, h[((size_t)pi * 132 + c) * 3 + 2]);
                for (int c = 0; c < g2; c++) {
                    const uint64_t *t = &h[((size_t)i * 132 + c) * 3];
                    st = std::min(st, t[0]); rl = std::min(rl, t[1]); en = std::max(en, t[2]);
                }
                ahead.push_back(((double)pend - (double)st) / 1e3);
                rel.push_back(((double)rl - (double)pend) / 1e3);
                body.push_back(((double)en - (double)pend) / 1e3);
            }
            printf("| %s | %d | %.1f KB | %.2f | %.2f | %.2f |\n", ks[o].name, ks[o].grid, smem[o] / 1024.0,
                   median(ahead), median(rel), median(body));
        }
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    printf("\nthe chain: %.2f us a layer; bar <= 12 (stretch <= 9): %s\n", us_full,
           us_full <= 9.0 ? "PASS (stretch)" : us_full <= 12.0 ? "PASS" : "FAIL");
    return 0;
}
