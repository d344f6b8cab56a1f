// P3 (issue 37, design review step 0): how far programmatic dependent launch (PDL) lets
// kernels that stage their weights into shared memory run ahead of their turn. A chain of N
// kernels in one CUDA graph, one CTA per SM (256 threads), each kernel: trigger its dependents at
// its start, issue one bulk copy of S KB of its own weights into shared memory
// (cp.async.bulk, completing on an mbarrier), griddepcontrol.wait, read the value the kernel
// before wrote, wait for its copy, sum the staged words, write its value. Every CTA records
// %globaltimer at its start, after the wait and at its end. For kernel k (median over k):
//   ahead = how many kernels before k had not ended when k's first CTA started (the lookahead);
//   early = end of kernel k - 1 (last CTA) minus the start of k's first CTA, in us;
//   release = wait released in k's first CTA minus the end of k - 1;
//   us a kernel from the graph's replay time.
// Build: nvcc -O3 -arch=sm_90 -o probe_pdl_stage bench/probe_pdl_stage.cu
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ uint64_t gtime() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// times[k][cta][3]: start, wait released, end (ns)
__global__ void k_stage(float *chain, int k, const uint8_t *w, size_t per_kernel, int bytes, uint64_t *times, int record) {
    extern __shared__ __align__(128) uint8_t buf[];
    __shared__ __align__(8) uint64_t bar;
    const uint64_t t0 = gtime();
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0 && bytes > 0) {
        const uint8_t *src = w + (size_t)k * per_kernel + (size_t)blockIdx.x * bytes;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar)), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(buf)),
                     "l"(src), "r"(bytes), "r"(smem_u32(&bar)) : "memory");
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const uint64_t t1 = gtime();
    const float prev = *(volatile float *)&chain[k];
    uint32_t acc = 0;
    if (bytes > 0) {
        asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W;\n}" ::"r"(smem_u32(&bar))
                     : "memory");
        for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) acc ^= ((const uint32_t *)buf)[i];
    }
    __syncthreads();
    if (threadIdx.x == 0 && blockIdx.x == 0) chain[k + 1] = prev + 1.0f + (acc == 0x7fffffffu ? 1.0f : 0.0f);
    if (threadIdx.x == 0 && record) {
        uint64_t *t = times + ((size_t)k * gridDim.x + blockIdx.x) * 3;
        t[0] = t0; t[1] = t1; t[2] = gtime();
    }
}

static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int N = 234, reps = 100;
    const int sizes[5] = {0, 16 << 10, 32 << 10, 48 << 10, 70 << 10};
    const size_t per_kernel = (size_t)sms * (70 << 10);
    uint8_t *w; float *chain; uint64_t *times;
    CK(cudaMalloc(&w, per_kernel * N)); // every kernel reads its own bytes (2.2 GB: no L2 reuse across replays)
    CK(cudaMemset(w, 1, per_kernel * N));
    CK(cudaMalloc(&chain, (N + 2) * 4));
    CK(cudaMalloc(&times, (size_t)N * sms * 3 * 8));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaFuncSetAttribute(k_stage, cudaFuncAttributeMaxDynamicSharedMemorySize, 70 << 10));
    printf("P3 PDL lookahead with shared-memory staging: %d kernels of %d CTAs x 256 threads in one graph\n", N, sms);
    printf("| staged a CTA | us a kernel | GB/s | kernels ahead (median, max) | first CTA start before previous end, us | wait release after previous end, us |\n|---:|---:|---:|---:|---:|---:|\n");
    for (int si = 0; si < 5; si++) {
        const int bytes = sizes[si];
        for (int record = 0; record < 2; record++) {
            cudaGraph_t g; cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int k = 0; k < N; k++) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(sms); cfg.blockDim = dim3(256); cfg.stream = s; cfg.dynamicSmemBytes = bytes;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.attrs = at; cfg.numAttrs = k > 0 ? 1 : 0;
                CK(cudaLaunchKernelEx(&cfg, k_stage, chain, k, (const uint8_t *)w, per_kernel, bytes, times, record));
            }
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            for (int r = 0; r < 5; r++) CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            if (!record) {
                cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
                CK(cudaEventRecord(a, s));
                for (int r = 0; r < reps; r++) CK(cudaGraphLaunch(ge, s));
                CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
                float ms; CK(cudaEventElapsedTime(&ms, a, b));
                const double us = ms * 1000.0 / ((double)reps * N);
                printf("| %d KB | %.3f | %.0f | ", bytes >> 10, us, (double)bytes * sms / us / 1e3);
            } else {
                std::vector<uint64_t> h((size_t)N * sms * 3);
                CK(cudaMemcpy(h.data(), times, h.size() * 8, cudaMemcpyDeviceToHost));
                std::vector<uint64_t> start(N, UINT64_MAX), rel(N, UINT64_MAX), end(N, 0);
                for (int k = 0; k < N; k++)
                    for (int c = 0; c < sms; c++) {
                        const uint64_t *t = &h[((size_t)k * sms + c) * 3];
                        start[k] = std::min(start[k], t[0]);
                        rel[k] = std::min(rel[k], t[1]);
                        end[k] = std::max(end[k], t[2]);
                    }
                std::vector<double> ahead, early, release;
                double amax = 0;
                for (int k = 8; k < N; k++) {
                    int n = 0;
                    for (int j = 0; j < k; j++) n += end[j] > start[k];
                    ahead.push_back(n);
                    amax = std::max(amax, (double)n);
                    early.push_back(((double)end[k - 1] - (double)start[k]) / 1e3);
                    release.push_back(((double)rel[k] - (double)end[k - 1]) / 1e3);
                }
                printf("%.0f, %.0f | %.2f | %.2f |\n", med(ahead), amax, med(early), med(release));
            }
            CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
        }
    }
    return 0;
}
