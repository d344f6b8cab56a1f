// gemv_tile.cuh - the tile engine of an M=1 product whose input is a row norm (issue 37): one CTA
// per SM owns a contiguous range of the product's output rows, and streams their weights (quants
// and f16 scales) through a ring of KC_TILE_STAGES shared-memory stages of KC_TILE_ROWS rows,
// filled by a producer warp with bulk copies: the first stages before the PDL wait, so that they
// overlap the ops before it, the next ones as the consumer warps free them. After the wait the
// CTA builds the input once, the RMSNorm of the row and its quantization (k_actq mode 1's
// operations), and each consumer warp dots two rows of every stage with k_gemv's lane -> 32-block
// map and sum32 tree (docs/NUMERICS.md). It replaces a k_actq and a gemv: one dependent op
// instead of two. A product of up to KC_TILE_STAGES * KC_TILE_ROWS rows a CTA is staged whole
// before the wait; the LM head (about 1900 rows a CTA) streams.
#pragma once
#include "matvec.cuh"

#define KC_TILE_ROWS 16     // rows a stage: 17 KB of Q8_0 at k = 1024 (P2's 16 KB pages)
#define KC_TILE_STAGES 4    // P2: 4 stages stream Q8_0 at 98 % of the copy
#define KC_TILE_CONSUMERS 8 // consumer warps, KC_TILE_ROWS / 8 rows each a stage
#define KC_TILE_THREADS ((KC_TILE_CONSUMERS + 1) * 32) // and the producer warp

// the jobs' rows back to back (row0: each job's first row in the product's row space)
struct TileArgs {
    MatvecJobs js;
    int rows;          // rows of all jobs
    int rows_per_cta;  // CTA c: rows [c * rows_per_cta, (c + 1) * rows_per_cta) of them
    const float *x;    // the input row [k] (the residual stream)
    const float *norm; // its RMSNorm weight [k], immutable
    float eps;
    float *out2;       // the normed row as floats [k] (CTA 0), or null
};

// grid: one CTA an SM (fewer for a small product), KC_TILE_THREADS threads, the shared memory of
// gemv_tile_plan (opted in by gemv_smem_optin)
__global__ void k_gemv_tile(TileArgs a KC_TL_PARAMS);
// The launch of the product of js over one row with the row-norm prologue P (mode 1); false (and
// nothing set) where the engine does not apply: no bulk copies (HIP, before sm_90), weights not
// all Q8_0 or all Q4_0 of one k, k % 256 != 0, or too little shared memory. The caller then
// keeps k_actq and k_gemv.
bool gemv_tile_plan(const MatvecJobs &js, const Prologue &P, TileArgs *out, int *grid, int *smem);
