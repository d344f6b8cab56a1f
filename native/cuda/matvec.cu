#include "matvec_device.cuh"
#include "lm_head_device.cuh"


// smem layout: int8 xq[MT][k], float xd[MT][k/32], float sc[MT][heads]
static size_t prologue_smem(int MT, int k, int heads) {
    return (size_t)MT * k + (size_t)MT * (k / 32) * 4 + (size_t)MT * (heads > 0 ? heads : 1) * 4 + 16;
}

// k_gemv<2, 1, *> asks for two blocks per SM and k_gemv<8, 2 or 4, *> for one (without it
// ptxas stops at 128 registers and spills); 0 (the others) sets no minimum. PRO: the block
// builds its activations itself (gemv_block).
// Where it lets the next kernel be scheduled: a.trigger_after_wait, set by gemv_plan and the pass
// (forward.cu). A product that adds into the residual stream (js.j[0].add) is followed by the row
// norm, which has no weights of its own: it lets the norm and the product after it start at once,
// as a pass kernel, so that product's weights stream meanwhile; the M=1 out products do not.
template <int MT, int RPW, bool PRO>
__global__ void __launch_bounds__(KC_THREADS, MT == 2 && RPW == 1 ? 2 : (MT == 8 && RPW >= 2 ? 1 : 0))
k_gemv(GemvArgs a KC_TL_PARAMS) {
    KC_KERNEL_BODY(a.trigger_after_wait, a, gemv_block<MT, RPW, PRO>);
}

// The M=1 Q4_0 DeltaNet in-proj (gemv_plan's `wide`): 8 rows a warp, so 129 blocks, one an SM, at most
// 112 registers (28,672 a block): a k_deltanet_head block (36,864) fits beside it, and it schedules
// the head at its start, so that the head's blocks are placed and load their state during the
// in-proj, not after its last block ends (its 1 us past the wait did not place them: the head
// state's candidate, docs/PERFORMANCE.md).
__global__ void KC_MAX_REGISTERS(112, KC_THREADS) k_gemv_wide(GemvArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, gemv_block<1, 8, false>);
}

__global__ void __launch_bounds__(KC_GLU_THREADS) k_gemv_glu(GluArgs a KC_TL_PARAMS) {
    KC_PRODUCT_KERNEL(a, gemv_glu_block);
}

__global__ void __launch_bounds__(KC_GLU_THREADS) k_gemv_glu_early(GluArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, gemv_glu_block);
}

template <int QT>
__global__ void __launch_bounds__(KC_LM_THREADS) k_lm_head(LmHeadArgs a KC_TL_PARAMS) {
    KC_PRODUCT_KERNEL(a, lm_head_block<QT, KC_LM_ROWS, KC_LM_DEPTH>);
}

// Host side: launches on g_stream, no host synchronisation (capturable).
static int g_smem_max = 48 * 1024; // dynamic shared memory opted in for the gemv instances
static int g_sms = 132;            // multiprocessors of the device
static int g_clock_khz = 0;        // the SM clock (gemv_clock_cycles)

template <int MT, int RPW>
static cudaError_t gemv_launch_mt(const GemvCall &c) {
    if (c.args.P.mode >= 0) return klaunch(k_gemv<MT, RPW, true>, dim3(c.grid), dim3(c.threads), c.smem, c.args);
    return klaunch(k_gemv<MT, RPW, false>, dim3(c.grid), dim3(c.threads), c.smem, c.args);
}

template <int RPW>
static cudaError_t gemv_launch_rpw(const GemvCall &c) {
    if (c.MT == 1) return gemv_launch_mt<1, RPW>(c);
    if (c.MT == 2) return gemv_launch_mt<2, RPW>(c);
    if (c.MT == 4) return gemv_launch_mt<4, RPW>(c);
    return gemv_launch_mt<8, RPW>(c);
}

int gemv_clock_cycles(int ns) { return (int)((long long)ns * g_clock_khz / 1000000); }

cudaError_t gemv_launch(const GemvCall &c) {
    if (c.RPW == 8) return klaunch(k_gemv_wide, dim3(c.grid), dim3(c.threads), c.smem, c.args);
    if (c.RPW == 1) return gemv_launch_rpw<1>(c);
    if (c.RPW == 2) return gemv_launch_rpw<2>(c);
    return gemv_launch_rpw<4>(c);
}

int32_t gemv_smem_optin(void) {
    int dev = 0, mx = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&mx, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0) g_sms = sms;
#if KC_HAS_PDL
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) == cudaSuccess && khz > 0) g_clock_khz = khz;
#endif
    if (mx <= 48 * 1024) return 0;
    // only the instances with a prologue use dynamic shared memory
#define KC_OPT(MT, RPW) CK(cudaFuncSetAttribute(k_gemv<MT, RPW, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx))
    KC_OPT(1, 1); KC_OPT(2, 1); KC_OPT(4, 1); KC_OPT(8, 1);
    KC_OPT(1, 2); KC_OPT(2, 2); KC_OPT(4, 2); KC_OPT(8, 2);
    KC_OPT(1, 4); KC_OPT(2, 4); KC_OPT(4, 4); KC_OPT(8, 4);
#undef KC_OPT
    g_smem_max = mx;
    return 0;
}

// Rows per warp: each lane keeps up to 4 weight blocks in flight (blocks b, b+32, ... of RPW
// rows), and a matrix keeps at least 8 warps per SM (one row per warp leaves too few bytes in
// flight per warp on the wide matrices).
static int gemv_rpw(const MatvecJobs &js) {
    int rows = 0;
    for (int t = 0; t < js.nj; t++) rows += js.j[t].n;
    const int nb = js.j[0].k / 32;
    const int blocks_per_lane = nb > 96 ? 4 : (nb + 31) / 32; // 32-blocks of a row per lane
    int RPW = blocks_per_lane >= 3 ? 1 : 4 / blocks_per_lane;
    while (RPW > 1 && rows / RPW < g_sms * 8) RPW >>= 1;
    return RPW;
}

int32_t gemv_plan(MatvecJobs js, int m, Prologue P, const int8_t *gq, const float *gd, const float *gf, int ldx,
                  std::vector<GemvCall> *calls, bool wide) {
    const int RPW = wide && m == 1 && P.mode < 0 ? 8 : gemv_rpw(js);
    int rows = 0;
    for (int t = 0; t < js.nj; t++) {
        js.j[t].row0 = rows;
        rows += (js.j[t].n + RPW - 1) / RPW * RPW;
    }
    // M=1, one row a warp, no prologue: narrow blocks (KC_GEMV_NARROW_THREADS)
    const int threads = m == 1 && RPW == 1 && P.mode < 0 ? KC_GEMV_NARROW_THREADS : KC_THREADS;
    const int warps = rows / RPW, warps_per_block = threads / 32;
    js.nwarps = warps;
    unsigned grid = (unsigned)((warps + warps_per_block - 1) / warps_per_block);
    const unsigned resident_blocks = (unsigned)(g_sms * (2048 / KC_THREADS));
    // the prologue runs once per block: stay resident
    if (P.mode >= 0 && grid > resident_blocks) grid = resident_blocks;
    const int k = js.j[0].k;
    const int heads = P.mode == 3 ? k / P.hs : 1;
    int rows_per_call = 8;
    while (rows_per_call > 1 && P.mode >= 0 && prologue_smem(rows_per_call, k, heads) > (size_t)g_smem_max)
        rows_per_call >>= 1;
    if (P.mode >= 0 && prologue_smem(1, k, heads) > (size_t)g_smem_max) return KCUDA_E_UNSUPPORTED;
    for (int m0 = 0; m0 < m; m0 += rows_per_call) {
        const int call_rows = m - m0 < rows_per_call ? m - m0 : rows_per_call;
        GemvCall c = {};
        GemvArgs &ga = c.args;
        ga.js = js;
        for (int t = 0; t < js.nj; t++) ga.js.j[t].y = js.j[t].y + (size_t)m0 * js.j[t].ldy;
        ga.m = call_rows;
        ga.P = P;
        ga.ldx = ldx;
        ga.trigger_after_wait = !js.j[0].add; // a product, unless it adds into the residual stream
        if (P.mode >= 0) {
            ga.P.a = P.a + (size_t)m0 * P.lda;
            if (P.b) ga.P.b = P.b + (size_t)m0 * P.lda;
            if (P.out2) ga.P.out2 = P.out2 + (size_t)m0 * P.ld2;
        } else {
            if (gq) ga.xq = gq + (size_t)m0 * ldx;
            if (gd) ga.xd = gd + (size_t)m0 * (ldx / 32);
            if (gf) ga.xf = gf + (size_t)m0 * ldx;
        }
        c.MT = call_rows == 1 ? 1 : call_rows == 2 ? 2 : call_rows <= 4 ? 4 : 8;
        c.RPW = RPW;
        c.grid = grid;
        c.threads = threads;
        c.smem = P.mode >= 0 ? prologue_smem(c.MT, k, heads) : 0;
        calls->push_back(c);
    }
    return 0;
}

bool lm_head_takes(const MatvecJob &w, int m, const Prologue &P, unsigned *grid) {
    if (m != 1 || P.mode >= 0 || !lm_head_fits(w.k) || (w.type != KCUDA_T_Q8_0 && w.type != KCUDA_T_Q4_0))
        return false;
    *grid = (unsigned)(g_sms * KC_LM_CTAS_PER_SM);
    return true;
}

cudaError_t lm_head_launch(const LmHeadArgs &a, unsigned grid) {
    if (a.w.type == KCUDA_T_Q8_0) return klaunch(k_lm_head<1>, dim3(grid), dim3(KC_LM_THREADS), 0, a);
    return klaunch(k_lm_head<2>, dim3(grid), dim3(KC_LM_THREADS), 0, a);
}

int32_t gemv_run(MatvecJobs js, int m, Prologue P, const int8_t *gq, const float *gd, const float *gf, int ldx) {
    std::vector<GemvCall> calls;
    CKS(gemv_plan(js, m, P, gq, gd, gf, ldx, &calls));
    for (const GemvCall &c : calls) CK(gemv_launch(c));
    return 0;
}

MatvecJob job(const DeviceMatrix &w, float *y, int ldy, int add) {
    MatvecJob j;
    j.q = w.q;
    j.s = w.s;
    j.y = y;
    j.type = w.type;
    j.n = (int)w.ne1;
    j.k = (int)w.ne0;
    j.ldy = ldy;
    j.add = add;
    j.row0 = 0;
    return j;
}

// rows r0 .. r0 + n - 1 of w as a job of their own (its output y is row r0's)
MatvecJob job_rows(const DeviceMatrix &w, int r0, int n, float *y, int ldy) {
    MatvecJob j = job(w, y, ldy, 0);
    j.q = (const char *)w.q + (size_t)r0 * matrix_quant_row_bytes(w.type, w.ne0);
    if (w.s) j.s = w.s + (size_t)r0 * (w.ne0 / 32);
    j.n = n;
    return j;
}

Prologue prologue(int mode, const float *a, const float *b, int lda, const float *w, int hs, float eps) {
    Prologue P;
    P.mode = mode;
    P.a = a;
    P.b = b;
    P.lda = lda;
    P.w = w;
    P.hs = hs > 0 ? hs : 1;
    P.eps = eps;
    P.out2 = nullptr;
    P.ld2 = 0;
    return P;
}

