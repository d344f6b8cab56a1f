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

#define KC_TL_OPS 1024 // ops of a pass the buffer holds: times[field * KC_TL_OPS + op]
enum TimelineField { TL_START, TL_WAIT, TL_END }; // earliest block start, earliest wait release, latest warp end

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
// field TL_START or TL_WAIT of op: this block's time, if earlier (thread 0)
__device__ __forceinline__ void tl_first(unsigned long long *times, int field, int op) {
    if (times && threadIdx.x == 0) atomicMin(&times[field * KC_TL_OPS + op], tl_now());
}
// field TL_END of op: this warp's time, if later (lane 0)
__device__ __forceinline__ void tl_last(unsigned long long *times, int op) {
    if (times && (threadIdx.x & 31) == 0) atomicMax(&times[TL_END * KC_TL_OPS + op], tl_now());
}
#endif
#define KC_TL_BEGIN() tl_first(tl_times, TL_START, tl_op)
#define KC_TL_END() tl_last(tl_times, tl_op)
#define KC_TL_WAIT(trigger_after) PdlWait{tl_times, tl_op, trigger_after}
#else
#define KC_TL_PARAMS
#define KC_TL_BEGIN() do { } while (0)
#define KC_TL_END() do { } while (0)
#define KC_TL_WAIT(trigger_after) PdlWait{trigger_after}
#endif
