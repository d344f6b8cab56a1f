// P6 (issue 48): does the LM head stream slowly alone, or only inside the pass? The M=1 timelines
// have each of its 4 pieces (`gemv <1, 4>`, 1940 blocks) at ~26 us, ~25.5 of them after its wait:
// ~2.6 TB/s of weight bytes, where a device copy runs at 4.2 TB/s. Here the module's own kernel
// (matvec.cu compiled into the probe, launched as gemv_plan plans it for forward.cu's LM head)
// runs alone on qwen35-0.8b's head shape, V = 248,320 rows of E = 1024, Q8_0 in the device layout
// (int8 quants [V][E], f16 scales [V][E / 32]), with activations quantized by the module's own
// quant_block32, beside a pure streaming read of the same bytes:
//   (a)  the module's kernel: one piece (lm_split's 62,080 rows, 1940 blocks), and the whole head
//        in one launch;
//   (b)  a streaming read: 16-byte loads, grid-stride, a grid that fills every SM, a sum of words;
//   (c1) the module's kernel on one resident grid (its warps loop over rows: no waves of blocks);
//   (c2) the streaming read in (a)'s launch shape and lane addresses, without its dots;
//   and the 4 pieces back to back as the pass launches them: stream launches without and with
//   PDL, and one CUDA graph with PDL;
//   (d)  when the tree has the module's streamed k_lm_head (native/cuda/lm_head_device.cuh, kept from
//        the candidate patch judged on 2026-12-05): its body on one piece for each (rows a group,
//        groups in flight, CTAs an SM) that fits, and the module's own launch of it over the 4
//        pieces in one graph with PDL. Reported, not judged by the bar.
// Each row of the table is the median of REPS launches, each between its own pair of events.
// A one-piece launch reads another piece than the launch before it (the 4 rotate: 203 MB between
// two reads of a piece, 4 times the L2), so its bytes come from DRAM, as in the pass.
// GB/s = weight bytes (quants + scales) / time.
// Correct: (a) and (c1) equal, bit for bit, a reference kernel's logits (plain int8 products for
// each block's integer dot, then the module's float order: dot * (d_w * d_x), the butterfly's
// tree); (b) and (c2) equal a reference sum of the words they read. A variant that is wrong prints
// FAIL and does not count. Built without the module's -fmad=false, ptxas fuses the kernel's
// acc + dot * scale into an FMA; acc is 0 there (one block a lane at E = 1024), so every value is
// the same, and the loads and the 80 registers are those of the module's build (nvcc 13.0).
// Pass (written down before the first run, docs/PERFORMANCE.md): (a), one piece, >= 85 % of (b)'s
// GB/s in the same run.
// Build: nvcc -O3 -arch=sm_90 -o probe_lmhead bench/probe_lmhead.cu
#include "../native/cuda/matvec.cu"        // k_gemv, gemv_plan, gemv_launch, job_rows
#include "../native/cuda/device_matrix.cu" // matrix_quant_row_bytes (job_rows)
#include "../native/cuda/copy_threads.cu"  // lm_split, lm_piece_col: the pass's pieces
#if __has_include("../native/cuda/lm_head_device.cuh")
#define P6_CANDIDATE 1                            // the candidate's k_lm_head is in matvec.cu
#else
#define P6_CANDIDATE 0
#endif
#undef CK                                  // the module's returns a status; the probes' exits
#include "probe_common.cuh"
#include <string>

// what the module's launches read (module.cu defines them in the module)
int g_device = 0;
cudaStream_t g_stream = 0;
int g_pdl = 0;

constexpr int E = 1024, NB = E / 32;            // row width, 32-blocks a row
constexpr int V = 248320;                       // qwen35-0.8b's vocabulary: rows of the head
constexpr int REPS = 61, WARMUP = 4;            // timed launches a row of the table, untimed before
constexpr int STREAM_THREADS = 256, STREAM_UNROLL = 4;
constexpr int SCRATCH_WORDS = 1 << 20;          // per-warp sums of (b) and (c2), at most

// ------------------------------------------------------------------------------------------------
// Data and references

__device__ __forceinline__ unsigned hash32(unsigned long long i) {
    unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    return (unsigned)((z ^ (z >> 29)) >> 32);
}

// Random quant bytes; f16 scales in [2^-10, 2^-9) (normal, positive: Q8_0's); the hidden state in [-4, 4).
__global__ void k_fill(unsigned *quant_words, long long n_words, uint16_t *scales, long long n_scales,
                       float *hidden) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_words; i += stride) {
        quant_words[i] = hash32(i);
        if (i < n_scales) scales[i] = (uint16_t)(0x1400u | (hash32(i + (1ull << 40)) & 0x3ffu));
        if (i < E) hidden[i] = (float)(int)(hash32(i + (2ull << 40)) & 0xffff) / 8192.0f - 4.0f;
    }
}

// The activations as the module feeds the LM head: each 32-block of the hidden state quantized by
// quant_block32 (warp_math.cuh, k_actq's operations). One block of E threads, a warp a 32-block.
__global__ void k_quantize(const float *hidden, int8_t *xq, float *xd) {
    const int lane = threadIdx.x & 31, block32 = threadIdx.x >> 5;
    quant_block32(hidden[threadIdx.x], lane, xq + 32 * block32, xd + block32);
}

// One thread a row: each 32-block's dot by plain int8 products (no dp4a), then the module's float
// operations in its order (docs/NUMERICS.md): lane b's partial (float)dot_b * (d_w,b * d_x,b), then
// the butterfly's tree (pairs b, b + 16; then + 8, 4, 2, 1). __fmul_rn / __fadd_rn are never
// contracted into an FMA.
__global__ void k_reference(const int8_t *quants, const uint16_t *scales, const int8_t *xq, const float *xd, int rows,
                            float *ref) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float partial[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const int4 *wp = (const int4 *)(quants + (size_t)r * E + 32 * b);
        const int4 w0 = wp[0], w1 = wp[1];
        const int words[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        int dot = 0;
#pragma unroll
        for (int j = 0; j < 32; j++) dot += (int)(int8_t)(words[j / 4] >> (8 * (j % 4))) * (int)xq[32 * b + j];
        partial[b] = __fmul_rn((float)dot, __fmul_rn(half_bits_to_f32(scales[(size_t)r * NB + b]), xd[b]));
    }
#pragma unroll
    for (int off = NB / 2; off > 0; off >>= 1)
#pragma unroll
        for (int b = 0; b < off; b++) partial[b] = __fadd_rn(partial[b], partial[b + off]);
    ref[r] = partial[0];
}

// The wrapping sum of n elements into *out (a thread each 4096 of them, one atomic add a thread):
// what (b) and (c2) must find.
template <class T>
__global__ void k_sum(const T *p, long long n, unsigned *out) {
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4096;
    unsigned sum = 0;
    for (long long i = i0; i < n && i < i0 + 4096; i++) sum += (unsigned)p[i];
    atomicAdd(out, sum);
}

// ------------------------------------------------------------------------------------------------
// The streaming reads

__device__ __forceinline__ unsigned words_of(int4 v) {
    return (unsigned)v.x + (unsigned)v.y + (unsigned)v.z + (unsigned)v.w;
}

// p[i], p[i + stride], ... below n: STREAM_UNROLL 16-byte loads of a thread in flight, then their sum.
__device__ __forceinline__ unsigned stream_part(const int4 *p, long long n, long long i, long long stride) {
    unsigned sum = 0;
    for (; i + (STREAM_UNROLL - 1) * stride < n; i += STREAM_UNROLL * stride) {
        int4 v[STREAM_UNROLL];
#pragma unroll
        for (int u = 0; u < STREAM_UNROLL; u++) v[u] = __ldg(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < STREAM_UNROLL; u++) sum += words_of(v[u]);
    }
    for (; i < n; i += stride) sum += words_of(__ldg(p + i));
    return sum;
}

// (b): every 16 bytes of a [na] and b [nb] loaded once, grid-stride; warp w of the grid writes its
// sum of the words to sums[w] (nothing is optimised away, and the read can be checked).
__global__ void __launch_bounds__(STREAM_THREADS) k_stream(const int4 *a, long long na, const int4 *b, long long nb,
                                                           unsigned *sums) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned sum = __reduce_add_sync(0xffffffffu, stream_part(a, na, t, stride) + stream_part(b, nb, t, stride));
    if ((threadIdx.x & 31) == 0) sums[t >> 5] = sum;
}

// (c2): (a)'s blocks and lane addresses without its dots: warp gw (gw, gw + warps of the grid, ...,
// as gemv_rows) takes rows 4 gw .. 4 gw + 3; for each, lane l loads its 32 quants (two 16-byte
// loads at 32 l) and its f16 scale l, all 4 rows' loads issued before their sum. rows % 4 == 0.
__global__ void k_stream_shape(const int8_t *quants, const uint16_t *scales, int rows, unsigned *sums) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    unsigned sum = 0;
    for (int gw = blockIdx.x * warps + warp; 4 * gw < rows; gw += gridDim.x * warps) {
        int4 w0[4], w1[4];
        uint16_t d[4];
#pragma unroll
        for (int rr = 0; rr < 4; rr++) {
            const int r = 4 * gw + rr;
            const int4 *wp = (const int4 *)(quants + (size_t)r * E + 32 * lane);
            w0[rr] = __ldg(wp);
            w1[rr] = __ldg(wp + 1);
            d[rr] = __ldg(scales + (size_t)r * NB + lane);
        }
#pragma unroll
        for (int rr = 0; rr < 4; rr++) sum += words_of(w0[rr]) + words_of(w1[rr]) + (unsigned)d[rr];
    }
    sum = __reduce_add_sync(0xffffffffu, sum);
    if (lane == 0) sums[blockIdx.x * warps + warp] = sum;
}

__global__ void k_empty() {}

#if P6_CANDIDATE
// (d): the candidate's body for Q8_0 with R rows a group and DEPTH groups in flight, as a kernel
// of its own without PDL (the module's k_lm_head is one of these, with KC_LM_ROWS, KC_LM_DEPTH)
template <int R, int DEPTH>
__global__ void __launch_bounds__(KC_LM_THREADS) k_lm_candidate(LmHeadArgs a) {
    lm_head_block<1, R, DEPTH>(a, block_at_launch(), PdlWait{});
}
#endif

// ------------------------------------------------------------------------------------------------
// Host

struct Head {
    DeviceMatrix W;             // Q8_0 [V][E]: quants int8 [V][E], scales f16 [V][NB]
    int pieces = 0;
    int col[KC_LM_PIECES + 1];  // piece p: rows [col[p], col[p + 1])
    int8_t *xq = nullptr;       // [E] the activations, quantized
    float *xd = nullptr;        // [NB] their block scales
    float *logits = nullptr;    // [V]
    std::vector<float> ref;     // [V] the reference logits
    unsigned *sums = nullptr;   // [SCRATCH_WORDS] per-warp sums of (b) and (c2)
    // what (b) and (c2) must find: piece p's quant words, scale words, scale halves (p = pieces: the head)
    unsigned expect[KC_LM_PIECES + 1][3];
};

// The module's launch of rows [r0, r1) of the head into logits + r0 (forward.cu's LM head: the
// activations quantized in global memory, one row).
static GemvCall plan_rows(const Head &h, int r0, int r1) {
    MatvecJobs js = {};
    js.nj = 1;
    js.j[0] = job_rows(h.W, r0, r1 - r0, h.logits + r0, V);
    const Prologue none = prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f);
    std::vector<GemvCall> calls;
    if (gemv_plan(js, 1, none, h.xq, h.xd, nullptr, E, &calls) != 0 || calls.size() != 1) {
        printf("gemv_plan: no single launch for rows %d..%d\n", r0, r1);
        exit(1);
    }
    return calls[0];
}

static const int8_t *quants_of(const Head &h, int r0) { return (const int8_t *)h.W.q + (size_t)r0 * E; }
static const uint16_t *scales_of(const Head &h, int r0) { return h.W.s + (size_t)r0 * NB; }
static double bytes_of(int rows) { return (double)rows * (E + NB * 2); }

static int g_turn = 0; // the piece the next one-piece launch reads: never the one the launch before read

// Median us of REPS calls of work(piece), each between its own pair of events on g_stream.
template <class Work>
static double time_us(Work work) {
    std::vector<cudaEvent_t> ev(2 * REPS);
    for (cudaEvent_t &event : ev) CK(cudaEventCreate(&event));
    for (int r = 0; r < WARMUP; r++) work(g_turn++ % KC_LM_PIECES);
    for (int r = 0; r < REPS; r++) {
        CK(cudaEventRecord(ev[2 * r], g_stream));
        work(g_turn++ % KC_LM_PIECES);
        CK(cudaEventRecord(ev[2 * r + 1], g_stream));
    }
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaGetLastError());
    std::vector<double> us;
    for (int r = 0; r < REPS; r++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
        us.push_back(ms * 1000.0);
    }
    for (cudaEvent_t &event : ev) CK(cudaEventDestroy(event));
    return median(us);
}

// dev[0, n) filled with the byte fill, then run(), then dev[0, n) as the host sees it.
template <class T, class Run>
static std::vector<T> run_and_fetch(T *dev, int fill, size_t n, Run run) {
    CK(cudaMemsetAsync(dev, fill, n * sizeof(T), g_stream));
    run();
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaGetLastError());
    std::vector<T> got(n);
    CK(cudaMemcpy(got.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    return got;
}

// Rows whose logit differs from the reference after run() (logits first set to NaN: a row not
// written counts).
template <class Run>
static int wrong_logits(const Head &h, Run run) {
    const std::vector<float> got = run_and_fetch(h.logits, 0xff, (size_t)V, run);
    int wrong = 0;
    for (int r = 0; r < V; r++) wrong += !(got[r] == h.ref[r]);
    return wrong;
}

// Whether the per-warp sums of one launch of run() (entries [0, entries)) add up to expect.
template <class Run>
static bool sums_match(const Head &h, int entries, unsigned expect, Run run) {
    if (entries > SCRATCH_WORDS) {
        printf("%d per-warp sums: more than the scratch holds\n", entries);
        exit(1);
    }
    const std::vector<unsigned> got = run_and_fetch(h.sums, 0, (size_t)entries, run);
    unsigned sum = 0;
    for (unsigned v : got) sum += v;
    return sum == expect;
}

struct Row {
    const char *what;
    std::string launch; // blocks x threads
    double us, bytes;   // bytes: weight bytes (0: none)
    int base;           // the row whose GB/s is 100 % (-1: none)
    const char *correct;
};

static std::string shape(unsigned grid, int threads, int launches = 1) {
    char s[48];
    if (launches > 1) snprintf(s, sizeof s, "%d x %u x %d", launches, grid, threads);
    else snprintf(s, sizeof s, "%u x %d", grid, threads);
    return s;
}

static void print_row(const std::vector<Row> &rows, const Row &r) {
    printf("| %s | %s | %.2f |", r.what, r.launch.c_str(), r.us);
    if (r.bytes > 0) printf(" %.0f |", r.bytes / (r.us * 1e3));
    else printf(" - |");
    if (r.base >= 0) printf(" %.0f %% |", 100.0 * (r.bytes / r.us) / (rows[r.base].bytes / rows[r.base].us));
    else printf(" - |");
    printf(" %s |\n", r.correct);
}

int main() {
    int dev = 0, sms = 0, l2 = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    g_device = dev;
    if (gemv_smem_optin() != 0) { // the module's init: the SM count gemv_plan plans with
        printf("gemv_smem_optin failed\n");
        return 1;
    }
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));

    // the head, its activations, the references
    Head h;
    h.W.type = KCUDA_T_Q8_0;
    h.W.ne0 = E;
    h.W.ne1 = V;
    const long long quant_words = (long long)V * E / 4, n_scales = (long long)V * NB;
    CK(cudaMalloc(&h.W.q, (size_t)V * E));
    CK(cudaMalloc(&h.W.s, (size_t)n_scales * 2));
    float *hidden, *ref;      // [E], [V]
    int8_t *copy_to;          // [one piece's quants] the device copy's destination
    unsigned *expect_sum;     // [1]
    CK(cudaMalloc(&hidden, E * 4));
    CK(cudaMalloc(&h.xq, E));
    CK(cudaMalloc(&h.xd, NB * 4));
    CK(cudaMalloc(&h.logits, (size_t)V * 4));
    CK(cudaMalloc(&ref, (size_t)V * 4));
    CK(cudaMalloc(&h.sums, (size_t)SCRATCH_WORDS * 4));
    CK(cudaMalloc(&expect_sum, 4));
    k_fill<<<sms * 8, 256, 0, g_stream>>>((unsigned *)h.W.q, quant_words, h.W.s, n_scales, hidden);
    k_quantize<<<1, E, 0, g_stream>>>(hidden, h.xq, h.xd);
    k_reference<<<(V + 127) / 128, 128, 0, g_stream>>>((const int8_t *)h.W.q, h.W.s, h.xq, h.xd, V, ref);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaGetLastError());
    h.ref.resize(V);
    CK(cudaMemcpy(h.ref.data(), ref, (size_t)V * 4, cudaMemcpyDeviceToHost));

    // the pass's pieces (copy_threads.cu), each as the module plans it
    int chunks = 1;
    lm_split(1, V, &chunks, &h.pieces);
    if (h.pieces != KC_LM_PIECES) {
        printf("lm_split gives %d pieces, not %d\n", h.pieces, KC_LM_PIECES);
        return 1;
    }
    for (int p = 0; p <= h.pieces; p++) h.col[p] = lm_piece_col(p, chunks, h.pieces, V);
    for (int p = 0; p <= h.pieces; p++) {
        const int r0 = p < h.pieces ? h.col[p] : 0, r1 = p < h.pieces ? h.col[p + 1] : V;
        if (r0 % 4 != 0 || r1 % 4 != 0) {
            printf("rows %d..%d: not whole groups of 4 ((c2) takes 4 a warp)\n", r0, r1);
            return 1;
        }
        const long long rows = r1 - r0;
        const long long part[3][2] = {{(long long)r0 * E / 4, rows * E / 4}, {(long long)r0 * NB / 2, rows * NB / 2},
                                      {(long long)r0 * NB, rows * NB}};
        for (int k = 0; k < 3; k++) {
            CK(cudaMemsetAsync(expect_sum, 0, 4, g_stream));
            const long long threads = (part[k][1] + 4095) / 4096;
            if (k < 2) {
                const unsigned *words = (k == 0 ? (const unsigned *)h.W.q : (const unsigned *)h.W.s) + part[k][0];
                k_sum<<<(unsigned)((threads + 255) / 256), 256, 0, g_stream>>>(words, part[k][1], expect_sum);
            } else {
                const uint16_t *halves = h.W.s + part[k][0];
                k_sum<<<(unsigned)((threads + 255) / 256), 256, 0, g_stream>>>(halves, part[k][1], expect_sum);
            }
            CK(cudaStreamSynchronize(g_stream));
            CK(cudaGetLastError());
            CK(cudaMemcpy(&h.expect[p][k], expect_sum, 4, cudaMemcpyDeviceToHost));
        }
    }
    const int piece_rows = h.col[1] - h.col[0];
    for (int p = 1; p < h.pieces; p++)
        if (h.col[p + 1] - h.col[p] != piece_rows) {
            printf("pieces of unequal rows: one piece's time would depend on which\n");
            return 1;
        }
    CK(cudaMalloc(&copy_to, (size_t)piece_rows * E));

    GemvCall piece_call[KC_LM_PIECES];
    for (int p = 0; p < h.pieces; p++) piece_call[p] = plan_rows(h, h.col[p], h.col[p + 1]);
    const GemvCall head_call = plan_rows(h, 0, V);
    const GemvCall &c = piece_call[0];
    void (*gemv_kernel)(GemvArgs) = k_gemv<1, 4, false>;
    cudaFuncAttributes fa, fs;
    CK(cudaFuncGetAttributes(&fa, gemv_kernel));
    CK(cudaFuncGetAttributes(&fs, k_stream));
    int gemv_per_sm = 0, stream_per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&gemv_per_sm, gemv_kernel, c.threads, c.smem));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&stream_per_sm, k_stream, STREAM_THREADS, 0));
    const unsigned stream_grid = (unsigned)(sms * stream_per_sm);
    const unsigned resident_grid = std::min(c.grid, (unsigned)(sms * gemv_per_sm));

    printf("P6 LM head alone: %s, %d SMs, %d MB L2; V = %d rows of E = %d, Q8_0 (quants + f16 scales), "
           "%d pieces of %d rows (%.1f MB each), %.1f MB in all\n",
           prop.name, sms, l2 >> 20, V, E, h.pieces, piece_rows, bytes_of(piece_rows) / 1e6, bytes_of(V) / 1e6);
    printf("the module's plan, one piece: k_gemv<%d, %d> %u blocks of %d threads, %zu B dynamic shared memory; "
           "whole head: %u blocks\n",
           c.MT, c.RPW, c.grid, c.threads, c.smem, head_call.grid);
    printf("k_gemv<1, 4, false>: %d registers, %zu B local, %d blocks an SM; k_stream: %d registers, %d blocks an SM\n",
           fa.numRegs, fa.localSizeBytes, gemv_per_sm, fs.numRegs, stream_per_sm);
    if (c.MT != 1 || c.RPW != 4 || c.grid != 1940 || c.threads != 256 || c.smem != 0)
        printf("NOTE: not the timeline's gemv <1, 4> (1940 blocks of 256): the module's plan has changed\n");
    printf("us: median of %d launches, each timed by its own events; the 4 pieces rotate (a launch never "
           "reads what the launch before it read)\n\n", REPS);

    // the launches
    auto gemv_piece = [&](int p, unsigned grid) {
        GemvCall call = piece_call[p];
        call.grid = grid;
        CK(gemv_launch(call));
    };
    auto stream_rows = [&](int r0, int r1) {
        const long long rows = r1 - r0;
        launch(k_stream, dim3(stream_grid), STREAM_THREADS, 0, g_stream, false, (const int4 *)quants_of(h, r0),
               rows * E / 16, (const int4 *)scales_of(h, r0), rows * NB * 2 / 16, h.sums);
    };
    auto stream_shape = [&](int r0, int r1, unsigned grid) {
        launch(k_stream_shape, dim3(grid), c.threads, 0, g_stream, false, quants_of(h, r0), scales_of(h, r0), r1 - r0,
               h.sums);
    };
    auto four_pieces = [&](bool pdl) {
        for (int p = 0; p < h.pieces; p++) {
            g_pdl = pdl && p > 0; // as run_ops: the first kernel follows something else
            CK(gemv_launch(piece_call[p]));
        }
        g_pdl = 0;
    };
    cudaGraph_t graph;
    cudaGraphExec_t graph_exec;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    four_pieces(true);
    CK(cudaStreamEndCapture(g_stream, &graph));
    CK(cudaGraphInstantiate(&graph_exec, graph, 0));
    CK(cudaGraphUpload(graph_exec, g_stream));

    // correctness: each variant once over every piece (or the head)
    bool all_correct = true;
    char verdicts[32][48];
    int nv = 0;
    auto logits_verdict = [&](int wrong) {
        char *v = verdicts[nv++];
        if (wrong == 0) snprintf(v, 48, "yes");
        else snprintf(v, 48, "FAIL (%d rows wrong)", wrong);
        all_correct = all_correct && wrong == 0;
        return (const char *)v;
    };
    auto sums_verdict = [&](bool ok) {
        char *v = verdicts[nv++];
        snprintf(v, 48, ok ? "yes" : "FAIL (sum of words)");
        all_correct = all_correct && ok;
        return (const char *)v;
    };
    auto every_piece = [&](unsigned grid) {
        for (int p = 0; p < h.pieces; p++) gemv_piece(p, grid);
    };
    const char *ok_a = logits_verdict(wrong_logits(h, [&] { every_piece(c.grid); }));
    const char *ok_c1 = logits_verdict(wrong_logits(h, [&] { every_piece(resident_grid); }));
    const char *ok_head = logits_verdict(wrong_logits(h, [&] { CK(gemv_launch(head_call)); }));
    const char *ok_four = logits_verdict(wrong_logits(h, [&] { four_pieces(false); }));
    const char *ok_four_pdl = logits_verdict(wrong_logits(h, [&] { four_pieces(true); }));
    const char *ok_graph = logits_verdict(wrong_logits(h, [&] { CK(cudaGraphLaunch(graph_exec, g_stream)); }));
    const int stream_warps = (int)stream_grid * STREAM_THREADS / 32, shape_warps = (int)c.grid * c.threads / 32;
    bool b_ok = true, c2_ok = true;
    for (int p = 0; p < h.pieces; p++) {
        const unsigned *e = h.expect[p];
        const int r0 = h.col[p], r1 = h.col[p + 1];
        b_ok = b_ok && sums_match(h, stream_warps, e[0] + e[1], [&] { stream_rows(r0, r1); });
        c2_ok = c2_ok && sums_match(h, shape_warps, e[0] + e[2], [&] { stream_shape(r0, r1, c.grid); });
    }
    const unsigned *eh = h.expect[h.pieces];
    const bool bh_ok = sums_match(h, stream_warps, eh[0] + eh[1], [&] { stream_rows(0, V); });
    const char *ok_b = sums_verdict(b_ok), *ok_c2 = sums_verdict(c2_ok), *ok_bh = sums_verdict(bh_ok);

    // timing
    std::vector<Row> rows;
    auto add = [&](const char *what, std::string launch, const char *correct, double bytes, int base, double us) {
        rows.push_back(Row{what, launch, us, bytes, base, correct});
        return (int)rows.size() - 1;
    };
    const double piece_bytes = bytes_of(piece_rows), head_bytes = bytes_of(V);
    const int row_b = add("(b) streaming read, one piece", shape(stream_grid, STREAM_THREADS), ok_b, piece_bytes, -1,
                          time_us([&](int p) { stream_rows(h.col[p], h.col[p + 1]); }));
    rows[row_b].base = row_b;
    const int row_a = add("(a) the module's LM-head kernel, one piece", shape(c.grid, c.threads), ok_a, piece_bytes,
                          row_b, time_us([&](int p) { gemv_piece(p, c.grid); }));
    add("(c1) the module's kernel, one piece, one resident grid", shape(resident_grid, c.threads), ok_c1, piece_bytes,
        row_b, time_us([&](int p) { gemv_piece(p, resident_grid); }));
    add("(c2) streaming read in (a)'s blocks and lane addresses, one piece", shape(c.grid, c.threads), ok_c2,
        piece_bytes, row_b, time_us([&](int p) { stream_shape(h.col[p], h.col[p + 1], c.grid); }));
    const int row_bh = add("(b) streaming read, the whole head", shape(stream_grid, STREAM_THREADS), ok_bh, head_bytes,
                           -1, time_us([&](int) { stream_rows(0, V); }));
    rows[row_bh].base = row_bh;
    add("(a) the module's kernel, the whole head in one launch", shape(head_call.grid, head_call.threads), ok_head,
        head_bytes, row_bh, time_us([&](int) { CK(gemv_launch(head_call)); }));
    add("(a), the 4 pieces back to back, stream launches", shape(c.grid, c.threads, 4), ok_four, head_bytes, row_bh,
        time_us([&](int) { four_pieces(false); }));
    add("(a), the 4 pieces back to back, stream launches with PDL", shape(c.grid, c.threads, 4), ok_four_pdl,
        head_bytes, row_bh, time_us([&](int) { four_pieces(true); }));
    add("(a), the 4 pieces back to back, one CUDA graph with PDL", shape(c.grid, c.threads, 4), ok_graph, head_bytes,
        row_bh, time_us([&](int) { CK(cudaGraphLaunch(graph_exec, g_stream)); }));
    add("an empty kernel (what the events themselves cost)", shape(1, 32), "-", 0.0, -1,
        time_us([&](int) { launch(k_empty, dim3(1), 32, 0, g_stream, false); }));
    add("device copy of one piece's quants (GB/s: read + write)", "cudaMemcpyAsync", "-", 2.0 * piece_rows * E, -1,
        time_us([&](int p) {
            CK(cudaMemcpyAsync(copy_to, quants_of(h, h.col[p]), (size_t)piece_rows * E, cudaMemcpyDeviceToDevice,
                               g_stream));
        }));

#if P6_CANDIDATE
    // (d): each configuration that fits on an SM, one piece, checked over every piece first
    struct Candidate {
        void (*kernel)(LmHeadArgs);
        int rows, depth;
    };
    const Candidate candidates[] = {{k_lm_candidate<4, 2>, 4, 2}, {k_lm_candidate<4, 3>, 4, 3},
                                    {k_lm_candidate<2, 4>, 2, 4}, {k_lm_candidate<8, 2>, 8, 2}};
    auto lm_args = [&](int p) {
        MatvecJob w = job_rows(h.W, h.col[p], h.col[p + 1] - h.col[p], h.logits + h.col[p], V);
        return LmHeadArgs{w, h.xq, h.xd};
    };
    static char what[8][96];
    int nwhat = 0;
    for (const Candidate &cd : candidates) {
        cudaFuncAttributes ka;
        CK(cudaFuncGetAttributes(&ka, cd.kernel));
        int fit = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, cd.kernel, KC_LM_THREADS, 0));
        for (int per_sm = 1; per_sm <= 2 && per_sm <= fit && nwhat < 8; per_sm++) {
            const unsigned grid = (unsigned)(sms * per_sm);
            auto run = [&](int p) { launch(cd.kernel, dim3(grid), KC_LM_THREADS, 0, g_stream, false, lm_args(p)); };
            const char *ok = logits_verdict(wrong_logits(h, [&] {
                for (int p = 0; p < h.pieces; p++) run(p);
            }));
            snprintf(what[nwhat], sizeof what[nwhat], "(d) k_lm_head, %d rows a group, %d in flight, %d CTA%s an SM "
                     "(%d registers)", cd.rows, cd.depth, per_sm, per_sm > 1 ? "s" : "", ka.numRegs);
            add(what[nwhat++], shape(grid, KC_LM_THREADS), ok, piece_bytes, row_b, time_us(run));
        }
    }
    // the module's own plan and launch of the candidate, the 4 pieces in one graph with PDL
    unsigned lm_grid = 0;
    const Prologue none = prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f);
    if (!lm_head_takes(lm_args(0).w, 1, none, &lm_grid)) {
        printf("lm_head_takes: the module would not take this head\n");
        return 1;
    }
    cudaGraph_t lm_graph;
    cudaGraphExec_t lm_exec;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    for (int p = 0; p < h.pieces; p++) {
        g_pdl = p > 0;
        CK(lm_head_launch(lm_args(p), lm_grid));
    }
    g_pdl = 0;
    CK(cudaStreamEndCapture(g_stream, &lm_graph));
    CK(cudaGraphInstantiate(&lm_exec, lm_graph, 0));
    CK(cudaGraphUpload(lm_exec, g_stream));
    const char *ok_lm_graph = logits_verdict(wrong_logits(h, [&] { CK(cudaGraphLaunch(lm_exec, g_stream)); }));
    add("(d) the module's k_lm_head, the 4 pieces back to back, one CUDA graph with PDL",
        shape(lm_grid, KC_LM_THREADS, 4), ok_lm_graph, head_bytes, row_bh,
        time_us([&](int) { CK(cudaGraphLaunch(lm_exec, g_stream)); }));
#else
    printf("(d): no candidate LM-head kernel in this tree (git apply bench/candidates/lm-head-stream.patch)\n\n");
#endif
    printf("| variant | blocks x threads | us | GB/s of weight bytes | of (b) on the same bytes | correct |\n");
    printf("| --- | --- | ---: | ---: | ---: | --- |\n");
    for (const Row &r : rows) print_row(rows, r);

    const Row &a = rows[row_a], &b = rows[row_b];
    const double ratio = (a.bytes / a.us) / (b.bytes / b.us);
    const char *bar = "P6 bar ((a), the module's LM-head kernel alone, one piece, >= 85 % of (b)'s GB/s)";
    if (strcmp(a.correct, "yes") != 0 || strcmp(b.correct, "yes") != 0)
        printf("\n%s: FAIL, %s is wrong\n", bar, strcmp(a.correct, "yes") != 0 ? "(a)" : "(b)");
    else
        printf("\n%s: %s, %.0f %% (%.2f us, %.0f GB/s against %.2f us, %.0f GB/s)\n", bar,
               ratio >= 0.85 ? "PASS" : "FAIL", 100.0 * ratio, a.us, a.bytes / (a.us * 1e3), b.us,
               b.bytes / (b.us * 1e3));
    CK(cudaGraphExecDestroy(graph_exec));
    CK(cudaGraphDestroy(graph));
#if P6_CANDIDATE
    CK(cudaGraphExecDestroy(lm_exec));
    CK(cudaGraphDestroy(lm_graph));
#endif
    return all_correct ? 0 : 1;
}
