// fused_pass.cu - the ops of a pass up to the LM head in one persistent kernel: every block of the
// grid (all resident: a cooperative launch) walks the op list, taking the op's blocks x, x + grid,
// ...; between ops, a count of the blocks done with op i in global memory replaces the kernel
// boundary. An op's bodies issue their weight loads before they wait for that count (as they do
// before the PDL wait in a kernel of their own), so that the weights of op i + 1 are in flight
// while the last blocks finish op i. Same bodies as the kernels, same bytes (docs/NUMERICS.md).
#include "activation_device.cuh"
#include "attention_device.cuh"
#include "deltanet_device.cuh"
#include "matvec_device.cuh"
#include "model.cuh"
#include "pass_ops.cuh"

// Waits until every block of the grid is done with the op before (done_before counts the blocks
// done with it over all passes; this pass is done with it at `target`). The acquire load orders
// this thread's later loads after the other blocks' writes (their fence and count, fused_arrive).
struct FusedWait {
    const unsigned *done_before; // nullptr: the first op (its inputs come from the copy before the kernel)
    unsigned target;
    __device__ __forceinline__ void operator()() const {
        if (!done_before) return;
        for (;;) {
            unsigned v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(done_before) : "memory");
            if ((int)(v - target) >= 0) break;
            __nanosleep(32);
        }
    }
};

struct NoWait {
    __device__ __forceinline__ void operator()() const {}
};

// The whole block waits: thread 0 polls, the barrier orders the others' loads after its acquire.
__device__ __forceinline__ void block_wait(const FusedWait &wait) {
    if (threadIdx.x == 0) wait();
    __syncthreads();
}

template <int MT, int R2, class Wait>
__device__ __forceinline__ void fused_body(const PassOp &o, const BlockAt &at, const Wait &wait) {
    switch (o.kind) {
    case OP_EMBED: embed_block(o.embed, at, wait); break;
    case OP_ACT: act_block(o.act, at, wait); break;
    case OP_ACTQ: actq_block(o.act, at, wait); break;
    case OP_GEMV:
        if (o.RPW == 1) gemv_block<MT, 1>(o.gemv, at, wait);
        else if (R2 && o.RPW == 2) gemv_block<MT, R2 ? 2 : 1>(o.gemv, at, wait);
        else gemv_block<MT, 4>(o.gemv, at, wait);
        break;
    case OP_DELTANET: deltanet_block(o.deltanet, at, wait); break;
    case OP_QKPREP: qkprep_block(o.qkprep, at, wait); break;
    case OP_ATTN_SCORES: attn_scores_block(o.scores, at, wait); break;
    case OP_ATTN_VALUES: attn_values_block(o.values, at, wait); break;
    default: break;
    }
}

template <int MT, int BLOCKWAIT, int R2>
__device__ __forceinline__ void fused_op_block(const PassOp &o, const BlockAt &at, const FusedWait &wait, bool first) {
    if constexpr (BLOCKWAIT) {
        if (first) {
            if (o.kind == OP_GEMV) {
                if (o.RPW == 1) gemv_prefetch_l2<1>(o.gemv, at);
                else if (o.RPW == 2) gemv_prefetch_l2<2>(o.gemv, at);
                else gemv_prefetch_l2<4>(o.gemv, at);
            }
            block_wait(wait);
        }
        fused_body<MT, R2>(o, at, NoWait{});
    } else {
        fused_body<MT, R2>(o, at, wait);
    }
}

// ops [nops]: the fused ops (gemvs of MT rows); done [nops]: blocks done with op i, over all
// passes; passes [gridDim.x]: passes block b has run (so this pass ends op i at
// (passes[b] + 1) * gridDim.x). Each op's arguments are staged in shared memory one op ahead.
template <int MT, int MINB, int BLOCKWAIT, int R2>
__global__ void __launch_bounds__(KC_THREADS, MINB)
k_fused(const PassOp *__restrict__ ops, int nops, unsigned *done, unsigned *passes) {
    constexpr int words = (int)(sizeof(PassOp) / 4);
    static_assert(words <= KC_THREADS, "an op's arguments: one word per thread");
    __shared__ __align__(16) PassOp staged[2];
    const unsigned target = (passes[blockIdx.x] + 1u) * gridDim.x;
    if (threadIdx.x < words) ((unsigned *)&staged[0])[threadIdx.x] = __ldg((const unsigned *)&ops[0] + threadIdx.x);
    __syncthreads();
    for (int i = 0; i < nops; i++) {
        const PassOp &o = staged[i & 1];
        unsigned next = 0;
        if (i + 1 < nops && threadIdx.x < words) next = __ldg((const unsigned *)&ops[i + 1] + threadIdx.x);
        // the kernels after the pass (the LM head) may start loading their weights now
        if (i == nops - 1) KC_PDL_TRIGGER();
        const FusedWait wait{i > 0 ? done + i - 1 : nullptr, target};
        const int blocks = o.gx * o.gy * o.gz;
        for (int v = blockIdx.x; v < blocks; v += gridDim.x) {
            const BlockAt at{v % o.gx, (v / o.gx) % o.gy, v / (o.gx * o.gy), o.gx, o.gy, o.gz};
            fused_op_block<MT, BLOCKWAIT, R2>(o, at, wait, v == (int)blockIdx.x);
            __syncthreads(); // shared memory is the next block's
        }
        // this block's writes of op i before its count: the barrier above, then a release
        if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(done + i) : "memory");
        if (i + 1 < nops && threadIdx.x < words) ((unsigned *)&staged[(i + 1) & 1])[threadIdx.x] = next;
        __syncthreads();
    }
    if (threadIdx.x == 0) passes[blockIdx.x] += 1u;
}

// The ops before the LM head: up to its activations (the gemvs before the first piece's event).
static size_t lm_head_first(const std::vector<PassOp> &ops) {
    size_t i = 0;
    while (i < ops.size() && ops[i].kind != OP_PIECE_DONE) i++;
    while (i > 0 && ops[i - 1].kind == OP_GEMV) i--;
    return i;
}

typedef void (*FusedKernel)(const PassOp *, int, unsigned *, unsigned *);
static FusedKernel fused_kernel(int variant) {
    switch (variant) {
    case 2: return k_fused<1, 2, 0, 1>;
    case 3: return k_fused<1, 1, 1, 1>;
    case 4: return k_fused<1, 2, 1, 1>;
    case 5: return k_fused<1, 2, 0, 0>;
    case 6: return k_fused<1, 2, 1, 0>;
    case 7: return k_fused<1, 2, 1, 0>;
    case 8: return k_fused<1, 2, 0, 0>;
    default: return k_fused<1, 1, 0, 1>;
    }
}

// The fused table of slot s for m rows: the ops before the LM head on the device, with the
// deltanet ops at KC_WARPS warps a block (the fused kernel's blocks).
int32_t fused_prepare(kcuda_model *md, int m, int s) {
    FusedTable &t = md->sl[s].fused_m1;
    if (m != 1 || t.ops) return 0;
    int coop = 0;
    CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, g_device));
    if (!coop) return 0; // kernel by kernel
    std::vector<PassOp> ops;
    const char *ev = getenv("KITE_FUSED_VARIANT");
    const int variant = ev ? atoi(ev) : 1;
    if (variant == 0) return 0;
    CKS(plan_pass(md, m, s, &ops, variant >= 7 ? -3 : variant >= 5 ? -1 : 0));
    ops.resize(lm_head_first(ops));
    std::vector<PassOp> kernel_ops;
    CKS(plan_pass(md, m, s, &kernel_ops, 0));
    t.lm_first = (int)lm_head_first(kernel_ops);
    int smem = 0;
    for (PassOp &o : ops) {
        if (o.kind == OP_DELTANET) o.gy = (o.deltanet.dv + KC_WARPS - 1) / KC_WARPS;
        if (o.kind == OP_GEMV && o.MT != 1) return 0;
        if (o.smem > smem) smem = o.smem;
    }
    if (smem > 48 * 1024) return 0;
    int per_sm = 0, sms = 0;
    t.variant = variant;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_kernel(t.variant), KC_THREADS, (size_t)smem));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g_device));
    if (per_sm < 1) return 0;
    if (per_sm > 2) per_sm = 2;
    void *p;
    CKS(dalloc(md, &p, ops.size() * sizeof(PassOp)));
    CK(cudaMemcpy(p, ops.data(), ops.size() * sizeof(PassOp), cudaMemcpyHostToDevice));
    t.ops = (PassOp *)p;
    CKS(dalloc(md, &p, ops.size() * sizeof(unsigned)));
    t.done = (unsigned *)p;
    CKS(dalloc(md, &p, (size_t)per_sm * sms * sizeof(unsigned)));
    t.passes = (unsigned *)p;
    t.nops = (int)ops.size();
    t.grid = per_sm * sms;
    t.smem = smem;
    return 0;
}

int fused_ready(const kcuda_model *md, int m, int s) { return m == 1 && md->sl[s].fused_m1.ops != nullptr; }

int32_t fused_launch(kcuda_model *md, int m, int s) {
    if (!fused_ready(md, m, s)) return KCUDA_E_STATE;
    const FusedTable &t = md->sl[s].fused_m1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)t.grid);
    cfg.blockDim = dim3(KC_THREADS);
    cfg.dynamicSmemBytes = (size_t)t.smem;
    cfg.stream = g_stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative; // every block resident, or the launch fails
    at[0].val.cooperative = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, fused_kernel(t.variant), (const PassOp *)t.ops, t.nops, t.done, t.passes));
    return 0;
}
