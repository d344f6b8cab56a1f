// timeline.cuh - per-op times of the M=1 steps, a diagnostic built only with the CMake option
// KITE_CUDA_TIMELINE=ON (KC_TIMELINE=1). Each kernel's thread 0 records %globaltimer at its block's
// start and after its PDL wait, lane 0 of every warp at its end; the earliest start and wait and
// the latest end of each op of the pass are kept by atomics, spread over KC_TL_SLOTS addresses a
// line apart (the host takes the earliest or latest of them): on one address, the atomics of an
// op's 2,056 warps delayed the next op's release by 1.3 us (P10b), in these slots by 0.14 us
// (P10c, docs/PERFORMANCE.md: a release after a many-warp op is read with that bias). With
// KITE_CUDA_TIMELINE=FILE in the environment, kcuda_step appends the op list and its times to FILE
// (bench/pass_timeline.py reads it). Off (the default), the kernels and launches are those without it.
#pragma once
#ifndef KC_TIMELINE
#define KC_TIMELINE 0
#endif

#define KC_TL_OPS 1024        // ops of a pass the buffer holds
#define KC_TL_SLOTS 32        // addresses an op's field is spread over (by block, or by warp for the end)
#define KC_TL_SLOT_STRIDE 16  // 8-byte words from one slot to the next: a 128-byte line each
#define KC_TL_WORDS (3 * KC_TL_OPS * KC_TL_SLOTS * KC_TL_SLOT_STRIDE) // the buffer, in 8-byte words
// the word of slot `slot` of `field` of `op`
#define KC_TL_AT(field, op, slot) ((((size_t)(field) * KC_TL_OPS + (op)) * KC_TL_SLOTS + (slot)) * KC_TL_SLOT_STRIDE)
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
__device__ __forceinline__ unsigned tl_block() {
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// field TL_START or TL_WAIT of op: this block's time, if earlier (thread 0)
__device__ __forceinline__ void tl_first(unsigned long long *times, int field, int op) {
    if (times && threadIdx.x == 0) atomicMin(&times[KC_TL_AT(field, op, tl_block() % KC_TL_SLOTS)], tl_now());
}
// field TL_END of op: this warp's time, if later (lane 0)
__device__ __forceinline__ void tl_last(unsigned long long *times, int op) {
    const unsigned warp = tl_block() * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (times && (threadIdx.x & 31) == 0) atomicMax(&times[KC_TL_AT(TL_END, op, warp % KC_TL_SLOTS)], tl_now());
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
