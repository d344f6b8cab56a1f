// op_chain.cuh - how the kernels of a planned pass wait for one another. Every kernel lets the
// next one be scheduled at its start (PDL), so the kernels of a pass are resident ahead of their
// turn with their weights loaded. Instead of waiting for the whole previous grid to complete
// (griddepcontrol.wait: the grid's exit and memory flush), a block waits on a count in global
// memory of the blocks done with the op before, which each block of that op adds to after its
// writes. A block done with op i has waited for op i - 1, so the count orders every op before.
#pragma once
#include "kc_common.cuh"

// The counts of one op and of the op before it. done == nullptr: no count (the kernel waits with
// griddepcontrol.wait, as outside a planned pass); before == nullptr: the first op of a pass,
// which follows the host's copies in plain stream order.
struct OpChain {
    unsigned long long *done;         // blocks done with this op, over all passes of its plan
    const unsigned long long *before; // the same for the op before
    unsigned blocks, blocks_before;   // blocks of each op in one pass
    unsigned sleep_ns, late_trigger;  // EXPERIMENT
};

#ifdef __CUDACC__
// A pass runs every op of its plan once, and the first op of a pass starts after the whole pass
// before it (stream order): the count of this op, read at the block's start, says which pass this
// is, and so which count of the op before means "done with this pass".
struct ChainWait {
    const unsigned long long *before;
    unsigned long long target;
    unsigned sleep_ns, late;
    __device__ __forceinline__ explicit ChainWait(const OpChain &c) : before(c.before), target(0), sleep_ns(c.sleep_ns), late(c.late_trigger) {
        if (before) {
            unsigned long long own;
            asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(own) : "l"(c.done) : "memory");
            target = (own / c.blocks + 1) * c.blocks_before;
        }
    }
    // Every thread polls (a warp's lanes share one load); its acquire orders this thread's later
    // loads after the writes that the other blocks released with their counts.
    __device__ __forceinline__ void operator()() const {
        if (!before) {
            KC_PDL_WAIT();
            return;
        }
        for (unsigned spins = 0;; spins++) {
            unsigned long long v;
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(before) : "memory");
            if ((long long)(v - target) >= 0) break;
            if (sleep_ns) __nanosleep(sleep_ns);
            if (spins == (1u << 27)) __trap(); // a count that never comes: an error, not a hang
        }
        if (late) KC_PDL_TRIGGER();
    }
};

// After the block's last write of the op: the barrier orders every thread's writes before thread
// 0's release add.
__device__ __forceinline__ void chain_arrive(const OpChain &c) {
    if (!c.done) return;
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(c.done) : "memory");
}
#endif
