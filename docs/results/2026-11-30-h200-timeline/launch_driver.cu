// launch_driver.cu: host time per launch of one kernel (292-byte parameters, 228 launches a round): the
// runtime cudaLaunchKernelEx against the driver cuLaunchKernelEx (entry point from the runtime, no
// link to libcuda), with the programmatic-serialization (PDL) attribute and without.
// Build: nvcc -O2 -arch=sm_90 -cudart static launch_driver.cu
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
struct Big { char b[288]; };
__global__ void kb(Big p, int x) { asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); if (x == 12345) printf("%d", p.b[x & 255]); }
typedef CUresult (*PFN_LEx)(const CUlaunchConfig *, CUfunction, void **, void **);
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Big b = {};
  void *fp = nullptr; cudaDriverEntryPointQueryResult q;
  cudaError_t e = cudaGetDriverEntryPoint("cuLaunchKernelEx", &fp, cudaEnableDefault, &q);
  printf("entry point: %d %d %p\n", (int)e, (int)q, fp);
  PFN_LEx lex = (PFN_LEx)fp;
  cudaFunction_t f; e = cudaGetFuncBySymbol(&f, (const void *)kb); printf("func: %d\n", (int)e);
  for (int rep = 0; rep < 4; rep++)
  for (int v = 0; v < 3; v++) {
    const int N = 228;
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < N; i++) {
      if (v == 0) {
        cudaLaunchConfig_t c = {}; c.gridDim = dim3(16); c.blockDim = dim3(256); c.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
        c.attrs = at; c.numAttrs = 1; cudaLaunchKernelEx(&c, kb, b, i);
      } else {
        CUlaunchConfig c = {}; c.gridDimX = 16; c.gridDimY = 1; c.gridDimZ = 1; c.blockDimX = 256; c.blockDimY = 1; c.blockDimZ = 1;
        c.hStream = (CUstream)s;
        CUlaunchAttribute at[1]; at[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; at[0].value.programmaticStreamSerializationAllowed = 1;
        c.attrs = at; c.numAttrs = v == 1 ? 1 : 0;
        void *args[2] = {&b, &i};
        lex(&c, (CUfunction)f, args, nullptr);
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    auto t2 = std::chrono::steady_clock::now();
    const char *nm[] = {"runtime Ex PDL", "driver Ex PDL", "driver Ex no attr"};
    printf("rep%d %-20s host %.2f us/launch, total %.2f us/launch  err=%d\n", rep, nm[v],
           std::chrono::duration<double, std::micro>(t1 - t0).count() / N, std::chrono::duration<double, std::micro>(t2 - t0).count() / N, (int)cudaGetLastError());
  }
  return 0;
}
