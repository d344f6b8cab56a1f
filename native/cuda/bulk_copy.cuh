// bulk_copy.cuh - copies of immutable data (weights) from global into shared memory by the bulk
// copy engine (sm_90: cp.async.bulk), counted on mbarriers, so that a kernel can start them
// before its PDL wait and wait for them only where it reads them. KC_BULK_COPY 0 (HIP, or a
// device pass below sm_90): none of it exists, and the host plans no kernel that needs it.
#pragma once
#include "kc_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KC_BULK_COPY 1

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// An mbarrier (8 bytes of shared memory) completing a phase after `count` arrivals; the block must
// pass a barrier (mbar_init_done) before any other thread uses it.
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_init_done() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// one arrival that also expects `bytes` of copies to complete on b
__device__ __forceinline__ void mbar_arrive_expect(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
// wait for the phase of the given parity (0 for the first phase, then 1, 0, ...) to complete
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity) {
    asm volatile("{\n\t.reg .pred p;\n\tW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W;\n\t}" ::"r"(
                     smem_u32(b)), "r"(parity) : "memory");
}
// one copy of `bytes` (a multiple of 16; both addresses 16-byte aligned), completing on b
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(b)) : "memory");
}
#else
#define KC_BULK_COPY 0
#endif
