// model.cuh - the resident model: weights, state and scratch on the device, the output slots of
// its passes, the copy threads that bring outputs back, and the functions the module's files share.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "matvec.cuh"

struct Layer {
    int rec = 0;
    int idx = 0; // index among layers of its kind
    DW w[KCUDA_W_COUNT];
    float *v[KCUDA_W_COUNT] = {};
};

// What one pass writes and the host reads back: the outputs on the device, the pinned staging
// they are copied into, the pass's inputs, the events of its copies, and the graphs that write
// this slot. A prompt call (kcuda_prompt) cycles through three: a pass runs in one while the
// copy threads copy the one before it out of another; a single pass uses slot 0.
#define KC_SLOTS 3
struct Slot {
    float *hout = nullptr, *logits = nullptr;         // device [max_m][E], [max_m][V]
    float *pin_hout = nullptr, *pin_logits = nullptr; // pinned staging, the same shapes
    int *h_in = nullptr;                              // pinned: [0] = pos, [1..m] tokens
    cudaEvent_t ev[KC_LM_PIECES] = {};                // the logits of piece p are in the staging
    cudaGraphExec_t g1 = nullptr;                     // the M=1 graph
    std::map<int, cudaGraphExec_t> gm;                // per-M graphs
};

struct kcuda_model {
    int32_t hp[KCUDA_HP_COUNT];
    float eps;
    int nl, nrec, nfull;
    std::vector<Layer> L;
    DW tok, out;
    float *out_norm = nullptr;
    float *cos_tab = nullptr, *sin_tab = nullptr;
    int rope_max_pos = 0, half_tab = 0;
    int max_m = 0, prepared = 0;
    int opt_graph = 1, opt_graph_m = 0;
    // state
    float *kc = nullptr, *vc = nullptr;      // [nfull][max_pos][Hkv*D]
    float *ring = nullptr;                   // [nrec][ring_rows][C]: conv inputs by position
    int ring_rows = 0;
    float *ssm = nullptr;                    // [nrec][Hv][dv][dk]
    // scratch
    int *d_in = nullptr;                     // [0] = pos, [1..m] tokens
    float *x = nullptr;                      // [max_m][E]
    float *xf = nullptr; int8_t *xq = nullptr; float *xd = nullptr; int ldx = 0;
    float *qkv = nullptr, *z = nullptr, *beta = nullptr, *alpha = nullptr, *ybuf = nullptr;
    float *qg = nullptr, *kb = nullptr, *vb = nullptr, *qr = nullptr, *att = nullptr, *scr = nullptr;
    float *gate = nullptr, *up = nullptr;
    Slot sl[KC_SLOTS];
    cudaStream_t cps = nullptr;          // the copies back
    cudaEvent_t lmev[KC_LM_PIECES] = {}; // piece p of the LM head is done (recorded by the pass)
    // copy helpers: thread i (1..n) takes chunks c with c % (n + 1) == i and the caller the rest,
    // or, on their own (cp_async), c % n == i - 1 (thread 1 also h_out)
    std::vector<std::thread> cp_th;
    std::mutex cp_mu;
    std::condition_variable cp_cv, cp_done;
    unsigned cp_gen = 0;
    int cp_busy = 0, cp_stop = 0;
    int32_t cp_err = 0;
    // the copy-out job (copy_job), set before cp_gen is bumped: slot cp_slot's outputs of cp_m
    // rows to cp_hdst [m][cp_e] and cp_dst [m][cp_v]; cp_async: the copy threads do it all
    float *cp_dst = nullptr, *cp_hdst = nullptr;
    int cp_nch = 0, cp_per = 1, cp_m = 0, cp_v = 0, cp_e = 0; // cp_per: chunks per LM head piece
    int cp_slot = 0, cp_async = 0;
    int cp_pending = 0; // rows of the pass the copy threads are copying out on their own (0: none)
    int64_t cnt[KCUDA_C_COUNT] = {};
    std::vector<void *> allocs;
};

// model.cu
int32_t dalloc(kcuda_model *md, void **p, size_t bytes);
// forward.cu: one pass of m rows whose h_out and logits land in slot s (launches only), and its
// capture as a graph
int32_t forward(kcuda_model *md, int m, int s);
int32_t capture(kcuda_model *md, int m, int s, cudaGraphExec_t *out);
// copy_threads.cu
void lm_split(int m, int V, int *nch, int *np);
int lm_piece_col(int p, int nch, int np, int V);
int32_t copy_share(kcuda_model *md, int who, int nthr);
int32_t copy_hout(kcuda_model *md);
void copy_worker(kcuda_model *md, int who);
void copy_threads_stop(kcuda_model *md);
