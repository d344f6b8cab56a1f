// launch_mt.cu: host issue rate of PDL launches (21-parameter kernel, 16 blocks) from one thread on
// one stream against T threads each on its own stream (no dependencies between them): does the
// driver issue launches from several threads in parallel?
// Build: nvcc -O2 -arch=sm_90 -cudart static launch_mt.cu -o launch_mt
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
__global__ void k21(const float *a0, const float *a1, int a2, const float *a3, int a4, float *a5, int a6, const int *a7, const float *a8,
  const float *a9, int a10, const float *a11, const float *a12, float *a13, int a14, int a15, int a16, int a17, float a18, float *a19, int a20) {
  asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); if (a20 == 12345) printf("%d", a2 + a4 + a6); }
static void issue(cudaStream_t s, int n) {
  cudaLaunchConfig_t c = {}; c.gridDim = dim3(16); c.blockDim = dim3(256); c.stream = s;
  cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = 1;
  const float *p = nullptr; float *q = nullptr; const int *pi = nullptr;
  for (int i = 0; i < n; i++) cudaLaunchKernelEx(&c, k21, p, p, 3, p, 3, q, 3, pi, p, p, 3, p, p, q, 3, 3, 3, 3, 1.0f, q, i);
}
int main() {
  const int N = 228 * 8;
  std::vector<cudaStream_t> st(4);
  for (auto &s : st) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  issue(st[0], 64); cudaDeviceSynchronize();
  for (int rep = 0; rep < 3; rep++)
    for (int T : {1, 2, 4}) {
      cudaDeviceSynchronize();
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> th;
      for (int t = 0; t < T; t++) th.emplace_back([&, t] { cudaSetDevice(0); issue(st[t], N / T); });
      for (auto &x : th) x.join();
      auto t1 = std::chrono::steady_clock::now();
      cudaDeviceSynchronize();
      auto t2 = std::chrono::steady_clock::now();
      printf("rep%d threads=%d host %.2f us/launch (all %d launches), until done %.2f us/launch\n", rep, T,
             std::chrono::duration<double, std::micro>(t1 - t0).count() / N, N,
             std::chrono::duration<double, std::micro>(t2 - t0).count() / N);
    }
  return 0;
}
