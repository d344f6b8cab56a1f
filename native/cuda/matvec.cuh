// matvec.cuh - matrix-vector products (small GEMMs): y[m][r] = W[r,:] . x[m,:] for the m rows of a
// pass, one warp per output row (or a few), lanes on the 32-blocks of a quantized row (on elements
// i % 32 for float weights): each lane's adds are its canonical sum32 partial (docs/NUMERICS.md).
// Up to 4 matrices that share one input run in one launch.
#pragma once
#include <vector>

#include "device_matrix.cuh"

struct MatvecJob {
    const void *q;
    const uint16_t *s;
    float *y;
    int type, n, k, ldy, add, row0; // row0: first global row of this job (multiple of RPW)
};
struct MatvecJobs {
    MatvecJob j[4];
    int nj;
    int nwarps; // warps needed in all (set by gemv_plan)
};

// The activation prologue of a gemv launch. mode -1: activations already quantized in global
// memory (xq / xd, row stride ldx); otherwise every block builds them in shared memory from:
//   0: a                       1: RMSNorm(a) * w (whole row)      2: silu(a) * b
//   3: per head of hs values: (a * rsqrt(mean(a^2) + eps)) * w[j % hs] * silu(b)   (gated norm)
// out2 (mode 1, block 0 only): the float activations (the final-norm hidden state h_out).
struct Prologue {
    int mode;
    const float *a, *b;
    int lda;
    const float *w;
    int hs;
    float eps;
    float *out2;
    int ld2;
};

// The weights of a later product that a launch asks L2 for before its wait, `delay` SM clock
// cycles after it started, spread over its warps (a hint: weights are immutable and no value
// depends on it). The M=1 out products ask for the glu's gate and up quants and, after a DeltaNet
// head, the next layer's first product's, so that they stream during the head's (or attention's)
// body, not beside the dependent loads of the ops before those products (forward.cu,
// weights_ahead); zero lines: nothing asked.
#define KC_AHEAD 5
struct L2Ahead {
    const char *p[KC_AHEAD];
    unsigned lines[KC_AHEAD]; // 128-byte lines of each range
    int delay;
};

// The arguments of one gemv: its jobs over m rows (at most 8) and their activations: built by the
// prologue P (P.mode >= 0), or read from global memory (P.mode == -1: int8 quants xq, f32 block
// scales xd, f32 values xf, row stride ldx).
struct GemvArgs {
    MatvecJobs js;
    int m;
    Prologue P;
    const int8_t *xq;
    const float *xd, *xf;
    int ldx;
    bool trigger_after_wait; // the next kernel is scheduled once this one is past its wait (k_gemv)
    L2Ahead ahead;           // M=1 one-row-a-warp products only (gemv_rows)
};
// One launch of a product: its arguments, its instance (MT rows at most, RPW output rows per
// warp) and its blocks of KC_THREADS threads, with their dynamic shared memory.
struct GemvCall {
    GemvArgs args;
    int MT, RPW;
    unsigned grid;
    size_t smem;
    int threads; // of a block: KC_THREADS, or KC_GEMV_NARROW_THREADS
};

// Threads of a block of the M=1 one-row-a-warp products (out, down, attention out: 97 registers a
// thread). Blocks of two warps (6,656 registers) fit on an SM beside a k_gemv_glu block (45,056)
// or a k_deltanet_head block (36,864), so that they start, and load their weights, before the op
// before them ends; a 256-thread block (26,624) fits beside the head's, not the glu's
// (bench/kernel_fit.py).
#define KC_GEMV_NARROW_THREADS 64

// The FFN gate and up products of one row (M=1) with SwiGLU and its quantization as their
// epilogue: block c computes rows [32c, 32c + 32) of both (KC_GLU_THREADS: warps of KC_GLU_RPW
// rows, the gate's then the up's, each row's sum as the plain gemv's), then h = silu(g) * u for those
// 32 elements and their 32-block quantized into oq / od (k_actq mode 2's operations), so the
// down product reads them without a k_actq of its own. xq / xd: the input row, quantized.
// Grid: gate.n / 32 blocks (gate.n == up.n, a multiple of 32; both quantized).
// rows a warp: 4, 16 warps (512 threads, 45,056 registers a block: three of the down product's
// four residual blocks an SM fit beside it, bench/kernel_fit.py)
#define KC_GLU_RPW 4
#define KC_GLU_THREADS (2 * 32 / KC_GLU_RPW * 32)
struct GluArgs {
    MatvecJob gate, up;
    const int8_t *xq;
    const float *xd;
    int8_t *oq; // [gate.n]
    float *od;  // [gate.n / 32]
};
__global__ void k_gemv_glu(GluArgs a KC_TL_PARAMS);
// The same, scheduling the next kernel (the down product) at its start, not past its wait
__global__ void k_gemv_glu_early(GluArgs a KC_TL_PARAMS);

// The M=1 LM head streamed (lm_head_device.cuh): a resident grid whose warps loop over groups of
// KC_LM_ROWS rows with KC_LM_DEPTH groups' weights in flight, instead of k_gemv<1, 4>'s 1940
// blocks a piece. For quantized heads whose rows are at most 32 blocks (lm_head_fits).
#define KC_LM_ROWS 2
#define KC_LM_DEPTH 4
#ifndef KC_LM_CTAS_PER_SM
#define KC_LM_CTAS_PER_SM 2
#endif
#define KC_LM_THREADS 256
// The rows of one head piece: y[r] = W[r,:] . x for r < w.n; x quantized in global memory (xq:
// int8 [k], xd: f32 [k / 32]) by the op before. w: Q8_0 or Q4_0 with at most 32 blocks a row
// (lm_head_fits), so that lane l owns block l of every row.
struct LmHeadArgs {
    MatvecJob w;
    const int8_t *xq;
    const float *xd;
};
static inline bool lm_head_fits(int k) { return k % 32 == 0 && k / 32 <= 32; }
// Whether k_lm_head takes this job (m rows; activations quantized in global memory), and its grid.
bool lm_head_takes(const MatvecJob &w, int m, const Prologue &P, unsigned *grid);
cudaError_t lm_head_launch(const LmHeadArgs &a, unsigned grid);

// One matrix as a job writing y (row stride ldy), added to y when add is set.
MatvecJob job(const DeviceMatrix &w, float *y, int ldy, int add);
// Rows r0 .. r0 + n - 1 of w as a job of their own (its output y is row r0's).
MatvecJob job_rows(const DeviceMatrix &w, int r0, int n, float *y, int ldy);
Prologue prologue(int mode, const float *a, const float *b, int lda, const float *w, int hs, float eps);
// Opt the gemv instances with a prologue in to the device's dynamic shared memory (kcuda_init).
int32_t gemv_smem_optin(void);
// The launches of the product of js over m rows (one per 8 rows, or fewer rows when the
// prologue's shared memory is short), appended to calls. gq / gd / gf: activations in global
// memory (P.mode == -1: int8 quants, f32 block scales, f32 values, row stride ldx); otherwise
// the prologue builds them.
// wide: at M=1 with quantized activations, 8 rows a warp in k_gemv_wide (one block an SM, so that a
// DeltaNet head block fits beside it); elsewhere ignored.
int32_t gemv_plan(MatvecJobs js, int m, Prologue P, const int8_t *gq, const float *gd, const float *gf, int ldx,
                  std::vector<GemvCall> *calls, bool wide = false);
// The SM clock cycles of ns nanoseconds on this device (0 where no kernel overlaps another: no PDL).
int gemv_clock_cycles(int ns);
// One planned launch on g_stream.
cudaError_t gemv_launch(const GemvCall &c);
// The product planned and every launch of it made (a product outside a planned pass).
int32_t gemv_run(MatvecJobs js, int m, Prologue P, const int8_t *gq, const float *gd, const float *gf, int ldx);
