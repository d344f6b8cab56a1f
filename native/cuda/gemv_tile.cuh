// gemv_tile.cuh - the tile engine of an M=1 product whose input is a row norm (issue 37): one
// CTA per SM owns a contiguous range of the launch's output rows. Before the PDL wait it stages
// its rows' weights (quants and f16 scales) into shared memory by bulk copies; after it, it
// builds the RMSNorm of the input row and its quantization once (k_actq mode 1's operations),
// then the dots of its rows from shared memory with k_gemv's lane -> 32-block map and sum32
// tree (docs/NUMERICS.md). It replaces a k_actq and a gemv: one dependent op instead of two.
#pragma once
#include "matvec.cuh"

// Shared memory a CTA may take: P3 (docs/PERFORMANCE.md) found 2-3 kernels of 70 KB a CTA
// resident ahead of their turn under PDL, fewer as it grows; beyond it the product keeps k_actq.
#define KC_TILE_SMEM_MAX (100 * 1024)

// jobs' rows back to back (row0: the first row of each job in the launch's row space)
struct TileArgs {
    MatvecJobs js;
    int rows;          // rows of all jobs
    int rows_per_cta;  // CTA c: rows [c * rows_per_cta, (c + 1) * rows_per_cta) of them
    const float *x;    // the input row [k] (the residual stream)
    const float *norm; // RMSNorm weight [k], immutable
    float eps;
    float *out2;       // the normed row as floats [k] (CTA 0), or null
};

// grid: ceil(rows / rows_per_cta) CTAs of KC_THREADS threads, gemv_tile_smem(...) bytes of
// dynamic shared memory (opted in by gemv_smem_optin)
__global__ void k_gemv_tile(TileArgs a KC_TL_PARAMS);
// The launch of the product of js over one row with the row-norm prologue P (mode 1): false
// (and nothing set) when it does not fit the engine (weights not all Q8_0 or all Q4_0, k % 256,
// or more shared memory than KC_TILE_SMEM_MAX a CTA), so that the caller keeps k_actq and k_gemv.
bool gemv_tile_plan(const MatvecJobs &js, const Prologue &P, TileArgs *out, int *grid, int *smem);
