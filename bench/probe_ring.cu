// P2 (issue 37, design review step 0): bulk-copy streaming into a shared-memory ring with
// block-dot consumers. One CTA per SM; warp 0's lane 0 is the producer: for each 16 KB page of
// quants (and its f16 scales) it waits for the stage to be free, then issues
// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes (optionally with an
// L2::evict_first cache hint). Warps 1..8 consume: the Q8_0 or Q4_0 block dots of the page's
// rows against a 1024-wide int8 activation row (lane l: 32-block l, then the sum32 butterfly),
// as kite's gemv does, then free the stage. The whole weights of qwen35-0.8b (about 801 MB for
// Q8_0, 435 MB for Q4_0 here) are streamed once per pass. The same dots by a plain kernel
// (global loads, one warp a row) check the outputs bit for bit and give a second figure. A 1 GiB
// device-to-device copy in the same run gives the ceiling.
// Build: nvcc -O3 -arch=sm_90 -o probe_ring bench/probe_ring.cu
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int K = 1024, NB = K / 32; // activation width, 32-blocks a row
constexpr int PAGE = 16384;          // bytes of quants a page
constexpr int CONSUMERS = 8;         // consumer warps

template <bool Q4> struct Fmt {
    static constexpr int ROWQ = Q4 ? K / 2 : K;    // quant bytes a row
    static constexpr int ROWS = PAGE / ROWQ;       // rows a page: 16 (Q8_0) or 32 (Q4_0)
    static constexpr int SCB = ROWS * NB * 2;      // scale bytes a page
    static constexpr int STAGE = PAGE + SCB;       // bytes a stage
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(smem_u32(b)),
                 "r"(parity) : "memory");
}
template <bool HINT>
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *bar, uint64_t policy) {
    if (HINT)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
                         smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy) : "memory");
    else
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
                     "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ float warp_sum32(float v) {
    for (int off = 16; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// lane's block dot: 32 quants (Q8_0) or 16 bytes of nibbles (Q4_0) against the activation block
template <bool Q4>
__device__ __forceinline__ int block_dot(const uint8_t *wq, const int (&x)[8]) {
    int s = 0;
    if (Q4) {
        const int4 w = *(const int4 *)wq;
        const int ww[4] = {w.x, w.y, w.z, w.w};
        int sx = 0;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            s = __dp4a(ww[u] & 0x0f0f0f0f, x[u], s);
            s = __dp4a((ww[u] >> 4) & 0x0f0f0f0f, x[u + 4], s);
        }
#pragma unroll
        for (int u = 0; u < 8; u++) sx = __dp4a(x[u], 0x01010101, sx);
        s = s - 8 * sx;
    } else {
        const int4 a = *(const int4 *)wq, b = *(const int4 *)(wq + 16);
        s = __dp4a(a.x, x[0], s); s = __dp4a(a.y, x[1], s); s = __dp4a(a.z, x[2], s); s = __dp4a(a.w, x[3], s);
        s = __dp4a(b.x, x[4], s); s = __dp4a(b.y, x[5], s); s = __dp4a(b.z, x[6], s); s = __dp4a(b.w, x[7], s);
    }
    return s;
}

template <bool Q4>
__device__ __forceinline__ float row_dot(const uint8_t *rq, const uint16_t *rs, const int (&x)[8], float xd, int lane) {
    const int isum = block_dot<Q4>(rq + lane * (Q4 ? 16 : 32), x);
    const float p = (float)isum * (__half2float(__ushort_as_half(rs[lane])) * xd);
    return warp_sum32(p);
}

// pages [cta * per, (cta + 1) * per): quants wq + page * PAGE, scales ws + page * SCB
template <bool Q4, bool HINT, bool COMPUTE>
__global__ void __launch_bounds__(32 * (1 + CONSUMERS), 1)
k_ring(const uint8_t *wq, const uint8_t *ws, const int8_t *xq, float xd, float *out, int per, int stages) {
    using F = Fmt<Q4>;
    extern __shared__ __align__(128) uint8_t ring[];
    __shared__ __align__(8) uint64_t full[16], empty[16];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const size_t p0 = (size_t)blockIdx.x * per;
    if (warp == 0) {
        if (lane == 0) {
            uint64_t policy = 0;
            if (HINT) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
            for (int k = 0; k < per; k++) {
                const int s = k % stages;
                if (k >= stages) mbar_wait(&empty[s], ((k / stages) - 1) & 1);
                mbar_expect_tx(&full[s], F::STAGE);
                uint8_t *dst = ring + (size_t)s * F::STAGE;
                bulk_copy<HINT>(dst, wq + (p0 + k) * PAGE, PAGE, &full[s], policy);
                bulk_copy<HINT>(dst + PAGE, ws + (p0 + k) * F::SCB, F::SCB, &full[s], policy);
            }
        }
        return;
    }
    const int cw = warp - 1;
    int x[8];
#pragma unroll
    for (int u = 0; u < 8; u++) x[u] = ((const int *)(xq + lane * 32))[u];
    for (int k = 0; k < per; k++) {
        const int s = k % stages;
        mbar_wait(&full[s], (k / stages) & 1);
        const uint8_t *st = ring + (size_t)s * F::STAGE;
        if (COMPUTE) {
#pragma unroll
            for (int r = cw; r < F::ROWS; r += CONSUMERS) {
                const float v = row_dot<Q4>(st + r * F::ROWQ, (const uint16_t *)(st + PAGE) + r * NB, x, xd, lane);
                if (lane == 0) out[(p0 + k) * F::ROWS + r] = v;
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
    }
}

// the same dots from global memory: one warp a row
template <bool Q4>
__global__ void k_plain(const uint8_t *wq, const uint8_t *ws, const int8_t *xq, float xd, float *out, size_t rows) {
    using F = Fmt<Q4>;
    const int lane = threadIdx.x & 31;
    int x[8];
#pragma unroll
    for (int u = 0; u < 8; u++) x[u] = ((const int *)(xq + lane * 32))[u];
    for (size_t r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += (size_t)gridDim.x * (blockDim.x >> 5)) {
        const size_t page = r / F::ROWS, rr = r % F::ROWS;
        const float v = row_dot<Q4>(wq + page * PAGE + rr * F::ROWQ, (const uint16_t *)(ws + page * F::SCB) + rr * NB, x, xd, lane);
        if (lane == 0) out[r] = v;
    }
}

__global__ void k_fill(uint8_t *p, size_t n, uint32_t seed, int scales) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        if (scales) { if ((i & 1) == 0) ((uint16_t *)p)[i / 2] = (uint16_t)(0x1000 + (h & 0x3ff)); }
        else p[i] = (uint8_t)(h >> 8);
    }
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <bool Q4>
static void run(int sms, int per, const char *name) {
    using F = Fmt<Q4>;
    const size_t pages = (size_t)sms * per, qb = pages * PAGE, sb = pages * F::SCB, rows = pages * F::ROWS;
    uint8_t *wq, *ws; int8_t *xq; float *out, *ref;
    CK(cudaMalloc(&wq, qb)); CK(cudaMalloc(&ws, sb)); CK(cudaMalloc(&xq, K));
    CK(cudaMalloc(&out, rows * 4)); CK(cudaMalloc(&ref, rows * 4));
    k_fill<<<1024, 256>>>(wq, qb, 1u, 0);
    k_fill<<<1024, 256>>>(ws, sb, 2u, 1);
    std::vector<int8_t> hx(K);
    for (int i = 0; i < K; i++) hx[i] = (int8_t)((i * 37 + 11) % 255 - 127);
    CK(cudaMemcpy(xq, hx.data(), K, cudaMemcpyHostToDevice));
    const float xd = 0.0123f;
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    const double bytes = (double)(qb + sb);
    std::vector<float> t;
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(a));
        k_plain<Q4><<<sms * 4, 256>>>(wq, ws, xq, xd, ref, rows);
        CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r) t.push_back(ms);
    }
    printf("| %s | plain loads, %d blocks of 8 warps | - | - | %.3f | %.0f | - |\n", name, sms * 4, median(t), bytes / median(t) / 1e6);
    std::vector<float> h_out(rows), h_ref(rows);
    CK(cudaMemcpy(h_ref.data(), ref, rows * 4, cudaMemcpyDeviceToHost));
    const int stage_list[3] = {4, 8, 12};
    for (int hint = 0; hint < 2; hint++)
        for (int compute = 1; compute >= 0; compute--)
            for (int si = 0; si < 3; si++) {
                const int stages = stage_list[si];
                const size_t smem = (size_t)stages * F::STAGE;
                auto kern = hint ? (compute ? k_ring<Q4, true, true> : k_ring<Q4, true, false>)
                                 : (compute ? k_ring<Q4, false, true> : k_ring<Q4, false, false>);
                CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                CK(cudaMemset(out, 0xff, rows * 4));
                t.clear();
                for (int r = 0; r < 6; r++) {
                    CK(cudaEventRecord(a));
                    kern<<<sms, 32 * (1 + CONSUMERS), smem>>>(wq, ws, xq, xd, out, per, stages);
                    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
                    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r) t.push_back(ms);
                }
                const char *same = "-";
                if (compute) {
                    CK(cudaMemcpy(h_out.data(), out, rows * 4, cudaMemcpyDeviceToHost));
                    same = memcmp(h_out.data(), h_ref.data(), rows * 4) == 0 ? "yes" : "NO";
                }
                printf("| %s | ring, %s%s | %d x %d B | %zu KB | %.3f | %.0f | %s |\n", name, compute ? "block dots" : "no compute",
                       hint ? ", evict_first" : "", stages, F::STAGE, smem / 1024, median(t), bytes / median(t) / 1e6, same);
            }
    CK(cudaFree(wq)); CK(cudaFree(ws)); CK(cudaFree(xq)); CK(cudaFree(out)); CK(cudaFree(ref));
}

int main() {
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    // the copy ceiling: 1 GiB device to device, read + write bytes
    {
        const size_t n = (size_t)1 << 30;
        void *s, *d; CK(cudaMalloc(&s, n)); CK(cudaMalloc(&d, n));
        CK(cudaMemset(s, 1, n));
        cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
        std::vector<float> t;
        for (int r = 0; r < 6; r++) {
            CK(cudaEventRecord(a)); CK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice)); CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (r) t.push_back(ms);
        }
        printf("P2 ring streaming, %d SMs; copy 1 GiB device to device: %.0f GB/s (read + write)\n", sms, 2.0 * n / median(t) / 1e6);
        CK(cudaFree(s)); CK(cudaFree(d));
    }
    printf("| weights | kernel | stages | shared memory | ms a pass (median of 5) | GB/s | outputs = plain |\n|---|---|---|---:|---:|---:|---|\n");
    run<false>(sms, 350, "Q8_0 (804 MB)");
    run<true>(sms, 179, "Q4_0 (435 MB)");
    return 0;
}
