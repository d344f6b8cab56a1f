#include "gemv_tile_device.cuh"

__global__ void __launch_bounds__(KC_TILE_THREADS, 1) k_gemv_tile(TileArgs a KC_TL_PARAMS) {
    KC_PASS_KERNEL(a, gemv_tile_block);
}

bool gemv_tile_plan(const MatvecJobs &in, const Prologue &P, TileArgs *out, int *grid, int *smem) {
    if (KC_HIP || g_cc_major < 9) return false; // no bulk copies
    if (P.mode != 1 || !P.w) return false;
    const int type = in.j[0].type, k = in.j[0].k;
    if ((type != KCUDA_T_Q8_0 && type != KCUDA_T_Q4_0) || k % 256 != 0) return false;
    TileArgs a = {};
    a.js = in;
    int rows = 0;
    for (int t = 0; t < in.nj; t++) {
        if (in.j[t].type != type || in.j[t].k != k) return false;
        a.js.j[t].row0 = rows;
        rows += in.j[t].n;
    }
    a.js.nwarps = 0; // not used by the tile engine
    const TileLayout L = tile_layout(k, type == KCUDA_T_Q4_0);
    if (L.total > (size_t)gemv_tile_smem_max()) return false;
    const int sms = gemv_sms();
    a.rows = rows;
    a.rows_per_cta = (rows + sms - 1) / sms;
    a.x = P.a;
    a.norm = P.w;
    a.eps = P.eps;
    a.out2 = P.out2;
    *out = a;
    *grid = (rows + a.rows_per_cta - 1) / a.rows_per_cta;
    *smem = (int)L.total;
    return true;
}
