// P1 (issue 37, design review step 0): the latency of one handoff between SMs.
// One CTA per SM (a cooperative launch, so every CTA is resident). A chain of N phases; in
// phase i, P producer CTAs write the 1024 floats of an activation row (producer p: a slice of
// it), and every CTA must see the whole row before it is a producer of phase i + 1. Two ways:
//   counter: the producer's threads store their floats, bar.sync, one thread adds 1 to the
//            phase's counter with red.release.gpu; one thread of each consumer polls it with
//            ld.acquire.gpu until it reads P, bar.sync, then the CTA loads the row;
//   flag:    each float travels with the phase's epoch as one 8-byte store (NCCL "LL" style,
//            st.relaxed.gpu of a u64); each consumer thread polls its 4 words until every
//            epoch is the phase's: the poll is the load, no fence and no counter.
// Each CTA checks every value it read; the phase time is (t(N2) - t(N1)) / (N2 - N1), so the
// launch is left out. Prints us per phase for P = 1, 8, 132.
// Build: nvcc -O3 -arch=sm_90 -o probe_handoff bench/probe_handoff.cu
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int ROW = 1024;   // floats of the activation row
constexpr int THREADS = 256; // 4 floats a thread

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed64(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed64(unsigned long long *p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// the value of element e in phase i (checked by every consumer)
__device__ __forceinline__ float expect(int i, int e) { return (float)((i * 7 + e) & 0xffff); }

// Producer p of P owns elements [p * ROW / P, (p + 1) * ROW / P). The producers of phase i are
// CTAs (i * 37 + k) % G, k < P: they move from phase to phase.
__device__ __forceinline__ bool producer(int i, int cta, int G, int P, int *p) {
    const int k = ((cta - i * 37) % G + G) % G;
    *p = k;
    return k < P;
}

__global__ void k_counter(float *rows, unsigned *counters, int N, int P, int *bad) {
    const int cta = blockIdx.x, G = gridDim.x;
    __shared__ int s_bad;
    if (threadIdx.x == 0) s_bad = 0;
    __syncthreads();
    for (int i = 0; i < N; i++) {
        float *row = rows + (size_t)i * ROW;
        int p;
        if (producer(i, cta, G, P, &p)) {
            const int e0 = p * ROW / P, e1 = (p + 1) * ROW / P;
            for (int e = e0 + threadIdx.x; e < e1; e += THREADS) row[e] = expect(i, e);
            __syncthreads();
            if (threadIdx.x == 0) red_release(&counters[i * 32], 1u);
        }
        if (threadIdx.x == 0)
            while (ld_acquire(&counters[i * 32]) < (unsigned)P) { }
        __syncthreads();
        int wrong = 0;
#pragma unroll
        for (int u = 0; u < ROW / THREADS; u++) {
            const int e = threadIdx.x + u * THREADS;
            wrong += __ldcg(&row[e]) != expect(i, e);
        }
        if (wrong) atomicAdd(&s_bad, wrong);
    }
    __syncthreads();
    if (threadIdx.x == 0 && s_bad) atomicAdd(bad, s_bad);
}

__global__ void k_flag(unsigned long long *rows, int N, int P, unsigned epoch0, int *bad) {
    const int cta = blockIdx.x, G = gridDim.x;
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        unsigned long long *row = rows + (size_t)i * ROW;
        const unsigned ep = epoch0 + (unsigned)i;
        int p;
        if (producer(i, cta, G, P, &p)) {
            const int e0 = p * ROW / P, e1 = (p + 1) * ROW / P;
            for (int e = e0 + threadIdx.x; e < e1; e += THREADS)
                st_relaxed64(&row[e], ((unsigned long long)ep << 32) | __float_as_uint(expect(i, e)));
        }
        unsigned long long v[ROW / THREADS];
#pragma unroll
        for (int u = 0; u < ROW / THREADS; u++) {
            const int e = threadIdx.x + u * THREADS;
            do v[u] = ld_relaxed64(&row[e]); while ((unsigned)(v[u] >> 32) != ep);
            wrong += __uint_as_float((unsigned)v[u]) != expect(i, e);
        }
    }
    if (wrong) atomicAdd(bad, wrong);
}

int main() {
    int dev = 0, sms = 0, coop = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) { printf("no cooperative launch\n"); return 1; }
    const int N1 = 200, N2 = 2200, reps = 7;
    float *rows; unsigned *counters; unsigned long long *rows64; int *bad;
    CK(cudaMalloc(&rows, (size_t)N2 * ROW * 4));
    CK(cudaMalloc(&counters, (size_t)N2 * 32 * 4));
    CK(cudaMalloc(&rows64, (size_t)N2 * ROW * 8));
    CK(cudaMalloc(&bad, 4));
    CK(cudaMemset(bad, 0, 4));
    CK(cudaMemset(rows64, 0, (size_t)N2 * ROW * 8));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    unsigned epoch = 1;
    const int Ps[3] = {1, 8, sms};
    printf("P1 handoff: %d CTAs of %d threads, a %d-float row a phase; us per phase (median of %d, slope %d..%d phases)\n",
           sms, THREADS, ROW, reps, N1, N2);
    printf("| producers | counter (red.release + ld.acquire) | flag in data (8-byte {value, epoch}) |\n|---:|---:|---:|\n");
    for (int pi = 0; pi < 3; pi++) {
        int P = Ps[pi];
        double us[2];
        for (int mode = 0; mode < 2; mode++) {
            std::vector<double> t;
            for (int r = 0; r < reps; r++) {
                float ms[2];
                for (int k = 0; k < 2; k++) {
                    int N = k ? N2 : N1;
                    CK(cudaMemset(counters, 0, (size_t)N2 * 32 * 4));
                    unsigned ep = epoch;
                    epoch += N2;
                    void *args_c[] = {&rows, &counters, &N, &P, &bad};
                    void *args_f[] = {&rows64, &N, &P, &ep, &bad};
                    CK(cudaEventRecord(a));
                    if (mode == 0) CK(cudaLaunchCooperativeKernel((void *)k_counter, sms, THREADS, args_c, 0, 0));
                    else CK(cudaLaunchCooperativeKernel((void *)k_flag, sms, THREADS, args_f, 0, 0));
                    CK(cudaEventRecord(b));
                    CK(cudaEventSynchronize(b));
                    CK(cudaGetLastError());
                    CK(cudaEventElapsedTime(&ms[k], a, b));
                }
                t.push_back((ms[1] - ms[0]) * 1000.0 / (N2 - N1));
            }
            std::sort(t.begin(), t.end());
            us[mode] = t[t.size() / 2];
        }
        printf("| %d | %.3f | %.3f |\n", P, us[0], us[1]);
    }
    int h_bad = 0;
    CK(cudaMemcpy(&h_bad, bad, 4, cudaMemcpyDeviceToHost));
    printf("values read wrong: %d\n", h_bad);
    return h_bad != 0;
}
