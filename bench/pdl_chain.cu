// The device-side floor of a chain of dependent kernels: N kernels captured in one graph, each
// waiting for the one before (PDL: trigger at start, griddepcontrol.wait; or plain graph edges),
// with a grid of B blocks. Optionally every block loads W bytes of "weights" before its wait and
// sums them after it (a gemv-like body). Prints microseconds per kernel.
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void k_step(float *chain, int i, const int4 *w, int per_block, int stride_blocks) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    int4 acc = make_int4(0, 0, 0, 0);
    int4 v[4];
    const int4 *p = w + ((size_t)(i * stride_blocks + blockIdx.x) % 65536) * per_block;
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = u * 256 + (int)threadIdx.x < per_block ? __ldg(p + u * 256 + threadIdx.x) : make_int4(0, 0, 0, 0);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const float prev = chain[i];
#pragma unroll
    for (int u = 0; u < 4; u++) acc.x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (threadIdx.x == 0 && blockIdx.x == 0) chain[i + 1] = prev + 1.0f + (acc.x == 0x7fffffff ? 1.0f : 0.0f);
}

int main() {
    const int N = 234, reps = 200;
    float *chain; int4 *w;
    CK(cudaMalloc(&chain, (N + 2) * sizeof(float)));
    const size_t wbytes = (size_t)65536 * 1024 * 16; // 1 GiB of weights: every kernel reads new lines
    CK(cudaMalloc(&w, wbytes));
    CK(cudaMemset(w, 1, wbytes));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int grids[3] = {1, 132, 264};
    const int loads[3] = {0, 256, 1024}; // int4 per block before the wait: 0, 4 KB, 16 KB
    for (int pdl = 0; pdl < 2; pdl++)
        for (int gi = 0; gi < 3; gi++)
            for (int li = 0; li < 3; li++) {
                cudaGraph_t g; cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                for (int i = 0; i < N; i++) {
                    cudaLaunchConfig_t cfg = {};
                    cfg.gridDim = dim3(grids[gi]); cfg.blockDim = dim3(256); cfg.stream = s;
                    cudaLaunchAttribute at[1];
                    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                    at[0].val.programmaticStreamSerializationAllowed = 1;
                    cfg.attrs = at; cfg.numAttrs = pdl && i > 0 ? 1 : 0;
                    CK(cudaLaunchKernelEx(&cfg, k_step, chain, i, (const int4 *)w, loads[li], grids[gi]));
                }
                CK(cudaStreamEndCapture(s, &g));
                CK(cudaGraphInstantiate(&ge, g, 0));
                for (int r = 0; r < 10; r++) CK(cudaGraphLaunch(ge, s));
                cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
                CK(cudaEventRecord(a, s));
                for (int r = 0; r < reps; r++) CK(cudaGraphLaunch(ge, s));
                CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
                float ms; CK(cudaEventElapsedTime(&ms, a, b));
                printf("pdl %d blocks %3d weights/block %5d B: %.3f us per kernel (%.3f ms per %d)\n", pdl, grids[gi],
                       loads[li] * 16, ms * 1000.0f / (reps * N), ms / reps, N);
                cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
            }
    return 0;
}
