// launch_cost.cu: host time per kernel launch, 228 launches of an empty 16-block kernel per round:
// <<<>>>, cudaLaunchKernelEx without and with the programmatic-serialization (PDL) attribute, with
// no parameters and with a 292-byte parameter block. Build: nvcc -O2 -arch=sm_90 launch_cost.cu
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
struct Big { char b[288]; };
__global__ void k0() { asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); }
__global__ void kb(Big p, int x) { asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); if (x == 12345) printf("%d", p.b[x & 255]); }
template <typename... K, typename... A>
static cudaError_t L(cudaStream_t s, bool pdl, void (*k)(K...), int grid, A... a) {
  cudaLaunchConfig_t c = {}; c.gridDim = dim3(grid); c.blockDim = dim3(256); c.stream = s;
  cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = pdl ? 1 : 0; return cudaLaunchKernelEx(&c, k, a...);
}
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Big b = {};
  for (int rep = 0; rep < 3; rep++)
  for (int v = 0; v < 5; v++) {
    const int N = 228;
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < N; i++) {
      if (v == 0) k0<<<16, 256, 0, s>>>();
      else if (v == 1) L(s, false, k0, 16);
      else if (v == 2) L(s, true, k0, 16);
      else if (v == 3) L(s, false, kb, 16, b, i);
      else L(s, true, kb, 16, b, i);
    }
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    auto t2 = std::chrono::steady_clock::now();
    const char *nm[] = {"<<<>>> no params", "Ex no params", "Ex PDL no params", "Ex 292B params", "Ex PDL 292B params"};
    printf("rep%d %-22s host %.2f us/launch, total %.2f us/launch\n", rep, nm[v],
           std::chrono::duration<double, std::micro>(t1 - t0).count() / N, std::chrono::duration<double, std::micro>(t2 - t0).count() / N);
  }
  return 0;
}
