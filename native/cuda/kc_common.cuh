// kc_common.cuh - what every file of the module shares: its configuration, error checks, the
// device-wide state set by kcuda_init and the launch helper of a forward pass.
// Every kernel follows docs/NUMERICS.md: a warp is the 32 lanes of sum32 (lane l owns partial l,
// then __shfl_xor_sync by 16, 8, 4, 2, 1), blocks split output rows, quantized block dots are exact
// int32, element-wise math comes from kite_math.h. Built with -fmad=false (no FMA contraction),
// IEEE division and square root.
#pragma once
#include "kc_gpu.cuh" // CUDA or HIP: the one portability header

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// by their path from here, so that a file outside native/cuda (bench/probe_lmhead.cu) builds the
// module's headers with nvcc alone
#include "../include/kite_cuda.h"
#include "../include/kite_math.h"
#include "timeline.cuh"

#define KC_WARPS 8
// rows from which a gemv gets its activations from k_actq instead of its own prologue (1: always)
#ifndef KC_ACTQ_MIN_M
#define KC_ACTQ_MIN_M 1
#endif
// programmatic dependent launch (sm_90+) between the kernels of one forward pass: each kernel
// lets the next one be scheduled at its start (a product once past its wait: KC_PRODUCT_KERNEL),
// and waits for the previous one to complete (and its memory to be visible) before it touches any
// activation or state. Pointers to activations and state are never `const __restrict__` in a
// kernel: the compiler may treat such loads as invariant (ld.global.nc) and issue them before the
// wait.
// HIP has none (KC_HAS_PDL 0): the waits and triggers are empty, launches plain stream order.
#ifndef KC_PDL
#define KC_PDL KC_HAS_PDL
#endif
#if KC_HAS_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KC_PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define KC_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define KC_PDL_TRIGGER() do { } while (0)
#define KC_PDL_WAIT() do { } while (0)
#endif
#define KC_NCHUNK 16              // chunks of the logits copy back to the host
#define KC_CHUNK_MIN (64 * 1024)  // floats per chunk at least
// pieces of the LM head: the logits of piece p are copied back while piece p + 1 is computed
#ifndef KC_LM_PIECES
#define KC_LM_PIECES 4
#endif
// host threads (besides the caller's) that copy logits chunks of an M-row pass out of the
// pinned staging
#ifndef KC_COPY_THREADS
#define KC_COPY_THREADS 3
#endif
#define KC_THREADS (KC_WARPS * KC_WARP)
#define KC_ATT_D 256 // head sizes up to this (multiples of 32) take k_attn_scores' register path
#define KC_ATT_SPLITS 16 // blocks that share one head's scores (a long context fills the SMs)
#define KC_ATT_BATCH 8 // positions whose loads an attention thread issues together

// Where a kernel body runs: its block's coordinates among the blocks of its op (blockIdx and
// gridDim in its own kernel; an executor that runs several ops in one launch passes its own).
struct BlockAt {
    int x, y, z;    // this block
    int nx, ny, nz; // blocks of the op
};
#if defined(__CUDACC__) || KC_HIP
__device__ __forceinline__ BlockAt block_at_launch() {
    return BlockAt{(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)gridDim.x, (int)gridDim.y, (int)gridDim.z};
}
#endif
// How a body waits for the ops before it (their outputs visible): as its own kernel, for the
// previous kernel (PDL). Bodies load weights before they wait, activations and state after. A
// product's wait (trigger_after) also lets the next kernel be scheduled, once past it.
struct PdlWait {
#if KC_TIMELINE
    unsigned long long *times = nullptr;
    int op = 0;
#endif
    bool trigger_after = false;
    __device__ __forceinline__ void operator()() const {
        KC_PDL_WAIT();
        if (trigger_after) KC_PDL_TRIGGER();
#if KC_TIMELINE
        tl_first(times, TL_WAIT, op);
#endif
    }
};

// The body of a kernel over this block, waiting as a kernel of its own (with KC_TIMELINE,
// recorded). A pass kernel lets the next kernel be scheduled at once (PDL). A product's kernel
// (gemv, glu, LM head) lets it be scheduled only once every block of this one is past its wait,
// so that the products' weight loads run at most one product ahead of the op whose body runs,
// whose own dependent loads wait behind them (P9: 9x an idle L2 round trip beside HBM
// streaming); the ops between products still let the next product start at once. Three products
// trigger at their start (matvec.cu): the down product (k_gemv takes which from its arguments),
// the glu after a DeltaNet layer (k_gemv_glu_early) and a Q4_0 file's DeltaNet in-proj
// (k_gemv_wide, so that the head starts beside it).
#define KC_KERNEL_BODY(product, args, ...)                                                     \
    do {                                                                                       \
        KC_TL_BEGIN();                                                                         \
        if (!(product)) KC_PDL_TRIGGER();                                                      \
        __VA_ARGS__(args, block_at_launch(), KC_TL_WAIT(product));                             \
        KC_TL_END();                                                                           \
    } while (0)
#define KC_PASS_KERNEL(args, ...) KC_KERNEL_BODY(false, args, __VA_ARGS__)
#define KC_PRODUCT_KERNEL(args, ...) KC_KERNEL_BODY(true, args, __VA_ARGS__)

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess)                                                                 \
            return (int32_t)e_;                                                                \
    } while (0)

#define CKS(x)                                                                                 \
    do {                                                                                       \
        int32_t s_ = (x);                                                                      \
        if (s_ != 0)                                                                           \
            return s_;                                                                         \
    } while (0)

// ------------------------------------------------------------------------------------------------
// Module state (defined in module.cu)

extern int g_ready;              // kcuda_init succeeded
extern int g_device;
extern cudaStream_t g_stream;    // every kernel of the module runs on it
extern int g_opt_graph;          // KCUDA_OPT_GRAPH
extern int g_opt_graph_m;        // KCUDA_OPT_GRAPH_M
extern int g_cc_major;
extern int g_pdl;                // launches of the current forward pass carry the PDL attribute

// Launch on g_stream, with the programmatic-serialization attribute while g_pdl is set.
// HIP (KC_HAS_PDL 0): a plain launch on g_stream, g_pdl ignored.
template <typename... KArgs, typename... Args>
static cudaError_t klaunch(void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
#if KC_HIP
#if KC_TIMELINE
#error "KITE_CUDA_TIMELINE is CUDA only"
#endif
    hipLaunchKernelGGL(kern, grid, block, (unsigned)smem, g_stream, ((KArgs)args)...);
    return hipGetLastError();
#else
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = g_stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = g_pdl ? 1 : 0;
#if KC_TIMELINE
    return cudaLaunchKernelEx(&cfg, kern, args..., g_tl_times, g_tl_op);
#else
    return cudaLaunchKernelEx(&cfg, kern, args...);
#endif
#endif
}

