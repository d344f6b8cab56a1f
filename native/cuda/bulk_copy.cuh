// bulk_copy.cuh - copies of immutable data (weights) from global into shared memory, started
// before a kernel's PDL wait so that they overlap the kernels before it. On sm_90 one thread
// issues cp.async.bulk copies that complete on an mbarrier, and the block waits for it only where
// it reads the data; elsewhere (HIP) the block copies with plain 16-byte loads.
#pragma once
#include "kc_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KC_BULK_COPY 1
#else
#define KC_BULK_COPY 0
#endif

#if KC_BULK_COPY
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

// Before the copies: the block's mbarrier (8 bytes of shared memory) set to expect `total` bytes.
// Every thread of the block calls it (one barrier with bulk copies).
__device__ __forceinline__ void stage_begin(uint64_t *bar, unsigned total) {
#if KC_BULK_COPY
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(total) : "memory");
    }
    __syncthreads(); // the initialisation before any thread waits on the barrier
#else
    (void)bar;
    (void)total;
#endif
}

// One copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) into shared memory,
// counted on bar. Every thread of the block calls it: thread 0 issues the bulk copy, or every
// thread copies its share.
__device__ __forceinline__ void stage_copy(void *dst, const void *src, unsigned bytes, uint64_t *bar) {
#if KC_BULK_COPY
    if (threadIdx.x == 0)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
#else
    (void)bar;
    const int4 *s = (const int4 *)src;
    int4 *d = (int4 *)dst;
    for (unsigned t = threadIdx.x; t < bytes / 16; t += blockDim.x) d[t] = __ldg(s + t);
#endif
}

// Wait until the copies have landed (every thread of the block; one barrier
// without bulk copies).
__device__ __forceinline__ void stage_wait(uint64_t *bar) {
#if KC_BULK_COPY
    asm volatile("{\n\t.reg .pred p;\n\tW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t@!p bra W;\n\t}" ::"r"(
                     smem_u32(bar)) : "memory");
#else
    (void)bar;
    __syncthreads();
#endif
}
