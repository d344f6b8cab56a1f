// P10 (issue 48): how long after a grid's last warp ends the next kernel's PDL wait is released,
// by the grid's shape (CTAs x threads), and whether the timeline build's end records lengthen it:
// every warp's lane 0 an atomicMax on one address (the timeline until P10b), or on one of
// KC_TL_SLOTS addresses a 128-byte line apart (the timeline since, P10c).
// A CUDA graph of PAIRS pairs: kernel A of the shape under test, then B, 4 CTAs of 256 threads
// (a row norm's shape). Each kernel lets the next be scheduled at its start, waits, reads the
// value the kernel before wrote, spins SPIN_NS and writes its own value; each CTA records when its
// wait was released, each warp when it ended, into slots of its own (no atomics). For each pair:
//   release after A = B's first wait release - A's last warp end (and after B likewise);
// a round replays every variant's graph REPLAYS times, the variants in turn; per variant and round
// the median over replays of the mean over pairs (%globaltimer ticks are coarser than the effect:
// the mean over pairs is not bound to them), and the replay time a pair.
// Build: nvcc -O3 -arch=sm_90 -o probe_release bench/probe_release.cu
#include "probe_common.cuh"
#include "../native/cuda/timeline.cuh" // KC_TL_SLOTS, KC_TL_SLOT_STRIDE

#define PAIRS 100
#define REPLAYS 5
#define ROUNDS 3
#define SPIN_NS 2000
#define B_CTAS 4
#define B_THREADS 256

// The bars, written before the first run (docs/PERFORMANCE.md, P10), in us
#define BAR_SHAPE_US 0.3  // P10a: 528 x 64 released this much later than 132 x 256, every round
#define BAR_ATOMIC_US 0.3 // P10b: 257 x 256 with the end atomics this much later than without
#define BAR_SLOTS_US 0.1  // P10c: 257 x 256 with them in slots at most this much later than without
#define SLOTS KC_TL_SLOTS             // the timeline build's slots (native/cuda/timeline.cuh)
#define SLOT_STRIDE KC_TL_SLOT_STRIDE // 8-byte words from one slot to the next
enum Records { NONE, ONE_ADDRESS, IN_SLOTS, RECORDS };
static const char *RECORD_NAMES[RECORDS] = {"no", "one address", "in slots"};

struct Shape {
    int ctas, threads;
};
static const Shape SHAPES[] = {{4, 256}, {132, 256}, {264, 128}, {528, 64}, {1056, 32}, {257, 256}};
static const int NSHAPES = sizeof(SHAPES) / sizeof(SHAPES[0]);
static const int MAX_WARPS = 2056; // 257 x 8

// kernel k of the chain: wait[k][cta], end[k][warp]
__global__ void k_link(float *vals, int k, uint64_t *wait, uint64_t *end, int records, unsigned long long *one) {
    pdl_trigger();
    pdl_wait();
    const uint64_t t_wait = gtime();
    if (threadIdx.x == 0) wait[(size_t)k * MAX_WARPS + blockIdx.x] = t_wait;
    const float before = *(volatile float *)&vals[k]; // the kernel before's value: a dependent load
    while (gtime() - t_wait < SPIN_NS) {
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) vals[k + 1] = before + 1.0f;
    const uint64_t t_end = gtime();
    if ((threadIdx.x & 31) == 0) {
        const int warp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        end[(size_t)k * MAX_WARPS + warp] = t_end;
        if (records == ONE_ADDRESS) atomicMax(one, (unsigned long long)t_end);
        if (records == IN_SLOTS) atomicMax(one + (size_t)(warp % SLOTS) * SLOT_STRIDE, (unsigned long long)t_end);
    }
}

struct Result {
    double after_a = 0, after_b = 0, us_pair = 0;
};

static Result run_variant(const Shape &a, int records, cudaStream_t s, float *vals, uint64_t *d_wait, uint64_t *d_end,
                          unsigned long long *one) {
    const int nk = 2 * PAIRS;
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int p = 0; p < PAIRS; p++) {
        launch(k_link, dim3(a.ctas), a.threads, 0, s, p > 0, vals, 2 * p, d_wait, d_end, records, one);
        launch(k_link, dim3(B_CTAS), B_THREADS, 0, s, true, vals, 2 * p + 1, d_wait, d_end, records, one);
    }
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    graph_ms(ge, s, 2); // warm-up
    std::vector<uint64_t> wait((size_t)nk * MAX_WARPS), end((size_t)nk * MAX_WARPS);
    std::vector<double> after_a, after_b, us;
    for (int r = 0; r < REPLAYS; r++) {
        CK(cudaMemset(d_end, 0, (size_t)nk * MAX_WARPS * sizeof(uint64_t)));
        CK(cudaMemset(d_wait, 0xff, (size_t)nk * MAX_WARPS * sizeof(uint64_t)));
        us.push_back(graph_ms(ge, s, 1) * 1000.0 / PAIRS);
        CK(cudaMemcpy(wait.data(), d_wait, wait.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(end.data(), d_end, end.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        double sa = 0, sb = 0;
        int na = 0, nb = 0;
        for (int k = 0; k + 1 < nk; k++) {
            const bool is_a = k % 2 == 0;
            const int warps = is_a ? a.ctas * a.threads / 32 : B_CTAS * B_THREADS / 32;
            const int next_ctas = is_a ? B_CTAS : a.ctas;
            const uint64_t *e = &end[(size_t)k * MAX_WARPS], *w = &wait[(size_t)(k + 1) * MAX_WARPS];
            const uint64_t last_end = *std::max_element(e, e + warps);
            const uint64_t first_wait = *std::min_element(w, w + next_ctas);
            const double rel = ((double)first_wait - (double)last_end) / 1000.0;
            if (is_a) sa += rel, na++;
            else sb += rel, nb++;
        }
        after_a.push_back(sa / na);
        after_b.push_back(sb / nb);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return Result{median(after_a), median(after_b), median(us)};
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major < 9) {
        printf("P10 needs compute capability 9.0 (PDL): %s is %d.%d\n", prop.name, prop.major, prop.minor);
        return 1;
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *vals;
    uint64_t *d_wait, *d_end;
    unsigned long long *one;
    const size_t slots = (size_t)2 * PAIRS * MAX_WARPS;
    CK(cudaMalloc(&vals, (2 * PAIRS + 1) * sizeof(float)));
    CK(cudaMemset(vals, 0, (2 * PAIRS + 1) * sizeof(float)));
    CK(cudaMalloc(&d_wait, slots * sizeof(uint64_t)));
    CK(cudaMalloc(&d_end, slots * sizeof(uint64_t)));
    CK(cudaMalloc(&one, SLOTS * SLOT_STRIDE * sizeof(unsigned long long)));
    CK(cudaMemset(one, 0, SLOTS * SLOT_STRIDE * sizeof(unsigned long long)));
    printf("P10 release after a grid, by its shape: %d pairs of (A, then B = %d x %d), each kernel %d ns of "
           "spin after its wait; us, per round the median over %d replays of the mean over pairs\n\n",
           PAIRS, B_CTAS, B_THREADS, SPIN_NS, REPLAYS);
    printf("| round | A: CTAs x threads | end atomics | release after A | release after B | us a pair |\n");
    printf("|---:|---|---|---:|---:|---:|\n");
    Result res[ROUNDS][NSHAPES][RECORDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < NSHAPES; i++)
            for (int at = 0; at < RECORDS; at++) {
                // the order turns round from one round to the next
                const int ii = r % 2 ? NSHAPES - 1 - i : i;
                Result x = run_variant(SHAPES[ii], at, s, vals, d_wait, d_end, one);
                res[r][ii][at] = x;
                printf("| %d | %d x %d | %s | %.3f | %.3f | %.2f |\n", r + 1, SHAPES[ii].ctas, SHAPES[ii].threads,
                       RECORD_NAMES[at], x.after_a, x.after_b, x.us_pair);
            }
    // P10a: 528 x 64 (index 3) against 132 x 256 (index 1), no atomics; P10b, P10c: 257 x 256 (index 5)
    int shape_rounds = 0, atomic_rounds = 0, slot_rounds = 0;
    printf("\n");
    for (int r = 0; r < ROUNDS; r++) {
        const double d_shape = res[r][3][NONE].after_a - res[r][1][NONE].after_a;
        const double d_atomic = res[r][5][ONE_ADDRESS].after_a - res[r][5][NONE].after_a;
        const double d_slots = res[r][5][IN_SLOTS].after_a - res[r][5][NONE].after_a;
        shape_rounds += d_shape >= BAR_SHAPE_US;
        atomic_rounds += d_atomic >= BAR_ATOMIC_US;
        slot_rounds += d_slots <= BAR_SLOTS_US;
        printf("round %d: 528 x 64 - 132 x 256 = %+.3f us; 257 x 256 with atomics on one address - without = %+.3f "
               "us, in slots - without = %+.3f us\n",
               r + 1, d_shape, d_atomic, d_slots);
    }
    printf("P10a (a grid of many small CTAs is released later, >= %.1f us in every round): %s\n", BAR_SHAPE_US,
           shape_rounds == ROUNDS ? "PASS" : "FAIL");
    printf("P10b (the timeline's end atomics delay the release, >= %.1f us in every round): %s\n", BAR_ATOMIC_US,
           atomic_rounds == ROUNDS ? "PASS" : "FAIL");
    printf("P10c (the end atomics in %d slots delay it by at most %.1f us, every round): %s\n", SLOTS, BAR_SLOTS_US,
           slot_rounds == ROUNDS ? "PASS" : "FAIL");
    return 0;
}
