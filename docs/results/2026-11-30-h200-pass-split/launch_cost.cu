// launch_cost.cu: host time per kernel launch, 228 launches of an empty 16-block kernel per round:
// <<<>>>, cudaLaunchKernelEx without and with the programmatic-serialization (PDL) attribute, with
// no parameters and with a 292-byte parameter block; and the driver's cuLaunchKernelEx (entry point
// from the runtime, no link to libcuda) with the 292-byte block, with and without PDL; and a kernel of
// 21 scalar and pointer parameters (as k_deltanet's) through both, with PDL.
// Build: nvcc -O2 -arch=sm_90 -cudart static launch_cost.cu
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
struct Big { char b[288]; };
__global__ void k0() { asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); }
__global__ void kb(Big p, int x) { asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); if (x == 12345) printf("%d", p.b[x & 255]); }
__global__ void k21(const float *a0, const float *a1, int a2, const float *a3, int a4, float *a5, int a6, const int *a7, const float *a8,
  const float *a9, int a10, const float *a11, const float *a12, float *a13, int a14, int a15, int a16, int a17, float a18, float *a19, int a20) {
  asm volatile("griddepcontrol.launch_dependents;"); asm volatile("griddepcontrol.wait;"); if (a20 == 12345) printf("%d", a2 + a4 + a6); }
template <typename... K, typename... A>
static cudaError_t L(cudaStream_t s, bool pdl, void (*k)(K...), int grid, A... a) {
  cudaLaunchConfig_t c = {}; c.gridDim = dim3(grid); c.blockDim = dim3(256); c.stream = s;
  cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = pdl ? 1 : 0; return cudaLaunchKernelEx(&c, k, a...);
}
typedef CUresult (*LaunchEx)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult D(LaunchEx lex, CUfunction f, cudaStream_t s, bool pdl, void **args) {
  CUlaunchConfig c = {}; c.gridDimX = 16; c.gridDimY = c.gridDimZ = 1; c.blockDimX = 256; c.blockDimY = c.blockDimZ = 1; c.hStream = (CUstream)s;
  CUlaunchAttribute at[1]; at[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; at[0].value.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = pdl ? 1 : 0;
  return lex(&c, f, args, nullptr);
}
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Big b = {};
  void *fp = nullptr; cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fp, 12000, cudaEnableDefault, &q);
  cudaFunction_t f; cudaGetFuncBySymbol(&f, (const void *)kb);
  cudaFunction_t f21; cudaGetFuncBySymbol(&f21, (const void *)k21);
  if (!fp) { printf("no cuLaunchKernelEx entry point\n"); return 1; }
  const char *nm[] = {"<<<>>> no params", "Ex no params", "Ex PDL no params", "Ex 292B params", "Ex PDL 292B params",
                      "driver Ex 292B", "driver Ex PDL 292B", "Ex PDL 21 params", "driver Ex PDL 21 params"};
  for (int rep = 0; rep < 3; rep++)
  for (int v = 0; v < 9; v++) {
    const int N = 228;
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < N; i++) {
      if (v == 0) k0<<<16, 256, 0, s>>>();
      else if (v == 1) L(s, false, k0, 16);
      else if (v == 2) L(s, true, k0, 16);
      else if (v == 3) L(s, false, kb, 16, b, i);
      else if (v == 4) L(s, true, kb, 16, b, i);
      else if (v == 7) { const float *p = nullptr; float *q = nullptr; const int *pi = nullptr;
        L(s, true, k21, 16, p, p, 3, p, 3, q, 3, pi, p, p, 3, p, p, q, 3, 3, 3, 3, 1.0f, q, i); }
      else if (v == 8) { const float *p = nullptr; float *q = nullptr; const int *pi = nullptr; int z = 3; float e = 1.0f;
        void *args[21] = {&p, &p, &z, &p, &z, &q, &z, &pi, &p, &p, &z, &p, &p, &q, &z, &z, &z, &z, &e, &q, &i};
        D((LaunchEx)fp, (CUfunction)f21, s, true, args); }
      else { void *args[2] = {&b, &i}; D((LaunchEx)fp, (CUfunction)f, s, v == 6, args); }
    }
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    auto t2 = std::chrono::steady_clock::now();
    printf("rep%d %-22s host %.2f us/launch, total %.2f us/launch  err=%d\n", rep, nm[v],
           std::chrono::duration<double, std::micro>(t1 - t0).count() / N, std::chrono::duration<double, std::micro>(t2 - t0).count() / N,
           (int)cudaGetLastError());
  }
  return 0;
}
