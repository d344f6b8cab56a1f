// timeline.cuh - per-op times of the M=1 steps, a diagnostic built only with the CMake option
// KITE_CUDA_TIMELINE=ON (KC_TIMELINE=1). Each kernel's thread 0 records %globaltimer at its block's
// start and after its PDL wait, lane 0 of every warp at its end; the earliest start and wait and
// the latest end of each op of the pass are kept by atomics. With KITE_CUDA_TIMELINE=FILE in the
// environment, kcuda_step appends the op list and its times to FILE (bench/pass_timeline.py reads
// it). Off (the default), the kernels and launches are those without it.
#pragma once
#ifndef KC_TIMELINE
#define KC_TIMELINE 0
#endif

#define KC_TL_OPS 1024 // ops of a pass the buffer holds: times[field][op], fields start, wait, end

#if KC_TIMELINE
// the kernel arguments that the launch helper appends: the buffer (null: not recording) and the op
extern unsigned long long *g_tl_times;
extern int g_tl_op;
#define KC_TL_PARAMS , unsigned long long *tl_times, int tl_op
#ifdef __CUDACC__
__device__ __forceinline__ unsigned long long tl_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
#define KC_TL_BEGIN()                                                                          \
    do {                                                                                       \
        if (tl_times && threadIdx.x == 0) atomicMin(&tl_times[tl_op], tl_now());               \
    } while (0)
#define KC_TL_END()                                                                            \
    do {                                                                                       \
        if (tl_times && (threadIdx.x & 31) == 0) atomicMax(&tl_times[2 * KC_TL_OPS + tl_op], tl_now()); \
    } while (0)
#define KC_TL_WAIT PdlWait{tl_times, tl_op}
#else
#define KC_TL_PARAMS
#define KC_TL_BEGIN() do { } while (0)
#define KC_TL_END() do { } while (0)
#define KC_TL_WAIT PdlWait{}
#endif
