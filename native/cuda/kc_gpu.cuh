// kc_gpu.cuh - the module's one portability header. Every source of native/cuda is written in
// CUDA's spelling; nvcc sees CUDA's own headers and nothing else from this file. Built by hipcc
// for AMD (clang's HIP mode: __HIP__), the CUDA names the module uses are mapped onto HIP's,
// and what HIP (ROCm 5.2) lacks gets a named fallback:
//   KC_HAS_PDL 0              no programmatic dependent launch: launches are plain stream order
//   KC_HAS_GRAPH_EXT_EVENT 0  no external event nodes in a captured graph (the LM head pieces'
//                             copies wait on them), so the module keeps CUDA graphs off
//   KC_PREFETCH_L2(p)         an L2 prefetch hint on NVIDIA, nothing on AMD
// The lane count is KC_WARP (32) on both vendors: docs/NUMERICS.md's sum32 order. HIP builds
// target 32-lane wavefronts only (RDNA, wave32); a 64-lane target is a compile error below.
#pragma once

#define KC_WARP 32 // lanes of one warp / wavefront; the canonical sum32 order needs exactly 32

#if defined(__HIP__)
#define KC_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#if defined(__HIP_DEVICE_COMPILE__) && __AMDGCN_WAVEFRONT_SIZE != KC_WARP
#error "kite's HIP module needs 32-lane wavefronts (RDNA wave32, e.g. gfx1030): docs/DESIGN.md"
#endif

#define KC_RUNTIME "hip" // names the runtime in kcuda_init's note
#define KC_HAS_PDL 0
#define KC_HAS_GRAPH_EXT_EVENT 0
#define KC_PREFETCH_L2(p) ((void)(p))
#define KC_MAX_REGISTERS(n, threads) __launch_bounds__(threads) // no register cap: the block size only

// ---- types and constants -----------------------------------------------------------------------
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaDeviceProp hipDeviceProp_t
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaStreamCaptureStatusActive hipStreamCaptureStatusActive
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventRecordDefault 0
#define cudaEventRecordExternal 1
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
// AMD has no opt-in above the per-block limit: the per-block limit is the whole LDS a block gets
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeMaxSharedMemoryPerBlock

// ---- runtime calls -----------------------------------------------------------------------------
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaFreeHost hipHostFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaGraphInstantiate hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy

// functions, not macros: a kernel name like k<A, B> holds commas
template <typename F>
static inline hipError_t cudaFuncSetAttribute(F *kernel, hipFuncAttribute attr, int value) {
    return hipFuncSetAttribute((const void *)kernel, attr, value);
}
static inline hipError_t cudaMallocHost(void **p, size_t bytes) {
    return hipHostMalloc(p, bytes, hipHostMallocDefault);
}
// KC_HAS_GRAPH_EXT_EVENT 0: an external record is refused (graphs stay off, so never asked for)
static inline hipError_t cudaEventRecordWithFlags(hipEvent_t e, hipStream_t s, unsigned flags) {
    return flags == cudaEventRecordExternal ? hipErrorNotSupported : hipEventRecord(e, s);
}
// no upload call in ROCm 5.2: the graph goes to the device at its first launch
static inline hipError_t cudaGraphUpload(hipGraphExec_t, hipStream_t) { return hipSuccess; }

// ---- device intrinsics -------------------------------------------------------------------------
// ROCm 5.2 has no *_sync shuffles (later ROCm: only with HIP_ENABLE_WARP_SYNC_BUILTINS): a
// wavefront runs its lanes together, the mask is all lanes
#if !defined(HIP_ENABLE_WARP_SYNC_BUILTINS)
template <typename T>
__device__ __forceinline__ T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    return __shfl_xor(v, lane_mask, KC_WARP);
}
template <typename T>
__device__ __forceinline__ T __shfl_sync(unsigned, T v, int src_lane) {
    return __shfl(v, src_lane, KC_WARP);
}
__device__ __forceinline__ void __syncwarp() { __builtin_amdgcn_wave_barrier(); }
#endif
// a load that sees other blocks' stores of this kernel (CUDA: cached in L2 only); on AMD an
// agent-scope atomic load, past the CU's own (non-coherent) vector cache
template <typename T>
__device__ __forceinline__ T __ldcg(const T *p) {
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
// c + the dot of a's and b's four signed bytes: exact in int32, as CUDA's
__device__ __forceinline__ int __dp4a(int a, int b, int c) {
    return c + (int)(int8_t)a * (int8_t)b + (int)(int8_t)(a >> 8) * (int8_t)(b >> 8) +
           (int)(int8_t)(a >> 16) * (int8_t)(b >> 16) + (int)(int8_t)(a >> 24) * (int8_t)(b >> 24);
}

#else // nvcc
#define KC_HIP 0
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define KC_RUNTIME "cudart"
#define KC_HAS_PDL 1
#define KC_HAS_GRAPH_EXT_EVENT 1
#define KC_PREFETCH_L2(p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p))
// at most n registers a thread (a block of up to 1024 threads), where the compiler would take more
#define KC_MAX_REGISTERS(n, threads) __maxnreg__(n)
#endif
