// d2h_bw.cu: device-to-host copy time into pinned memory, one stream against the same bytes split
// over 2 or 4 streams (each its own DMA queue). Build: nvcc -O2 -cudart static d2h_bw.cu
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
int main() {
    const size_t maxb = 4u << 20;
    char *d = nullptr, *h = nullptr;
    cudaMalloc(&d, maxb);
    cudaMemset(d, 1, maxb);
    cudaMallocHost(&h, maxb);
    cudaStream_t s[4];
    for (auto &x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
    const size_t sizes[3] = {256u << 10, 1u << 20, 4u << 20};
    for (size_t bytes : sizes)
        for (int ns : {1, 2, 4}) {
            std::vector<double> t;
            for (int rep = 0; rep < 41; rep++) {
                auto t0 = std::chrono::steady_clock::now();
                const size_t part = bytes / ns;
                for (int i = 0; i < ns; i++) cudaMemcpyAsync(h + i * part, d + i * part, part, cudaMemcpyDeviceToHost, s[i]);
                for (int i = 0; i < ns; i++) cudaStreamSynchronize(s[i]);
                auto t1 = std::chrono::steady_clock::now();
                if (rep) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
            std::sort(t.begin(), t.end());
            printf("%5zu KB over %d stream(s): median %.1f us (%.1f GB/s), min %.1f us\n", bytes >> 10, ns, t[t.size() / 2],
                   bytes / t[t.size() / 2] / 1e3, t[0]);
        }
    printf("err=%d\n", (int)cudaGetLastError());
    return 0;
}
