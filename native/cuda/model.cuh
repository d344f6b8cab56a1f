// model.cuh - the resident model: weights, state and scratch on the device, the output slots of
// its passes, the copy threads that bring outputs back, and the functions the module's files share.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "pass_ops.cuh"

struct Layer {
    int rec = 0;                      // a Gated DeltaNet layer (else gated full attention)
    int idx = 0;                      // index among the layers of its kind (state and caches)
    DeviceMatrix w[KCUDA_W_COUNT];    // the layer's matrices by role (KCUDA_W_*)
    float *v[KCUDA_W_COUNT] = {};     // its vectors by role, f32 on the device
};

// What one pass writes and the host reads back: the outputs on the device, the pinned staging
// they are copied into, the pass's inputs, the events of its copies, and the graphs that write
// this slot. A prompt call (kcuda_prompt) cycles through three: a pass runs in one while the
// copy threads copy the one before it out of another; a single pass uses slot 0.
#define KC_SLOTS 3
struct Slot {
    float *hout = nullptr, *logits = nullptr;         // device [max_m][E], [max_m][V]
    float *pin_hout = nullptr, *pin_logits = nullptr; // pinned staging, the same shapes
    int *h_in = nullptr;                              // pinned [1 + max_m]: [0] = pos, [1..m] tokens
    cudaEvent_t copied[KC_LM_PIECES] = {};            // the logits of piece p are in the staging
    cudaGraphExec_t graph_m1 = nullptr;               // the M=1 graph
    std::map<int, cudaGraphExec_t> graphs_m;          // per-M graphs, by M
    std::map<int, std::vector<PassOp>> plans;         // the ops of a pass of m rows, by m (planned once)
};

// E embedding width, V vocabulary, F feed-forward width; attention: H query heads, Hkv KV heads
// of D values; DeltaNet: Hk key heads of dk, Hv value heads of dv, C = 2 * Hk * dk + Hv * dv
// conv channels (q, k, v).
struct kcuda_model {
    int32_t hp[KCUDA_HP_COUNT];       // hyperparameters by KCUDA_HP_*
    float eps;
    int nl, nrec, nfull;              // layers: all, Gated DeltaNet, full attention
    std::vector<Layer> L;             // [nl]
    DeviceMatrix tok, out;            // embedding [V][E]; LM head [V][E] (absent: tied to tok)
    float *out_norm = nullptr;        // [E]
    float *cos_tab = nullptr, *sin_tab = nullptr; // [rope_max_pos][half_tab]
    int rope_max_pos = 0, half_tab = 0;
    int max_m = 0, prepared = 0;      // rows a pass may hold
    int opt_graph = 1, opt_graph_m = 0;
    // state
    float *k_cache = nullptr, *v_cache = nullptr; // [nfull][max_pos][Hkv * D]
    float *ring = nullptr;                        // [nrec][ring_rows][C]: conv inputs by position
    int ring_rows = 0;                            // K - 1 + max_m
    float *ssm = nullptr;                         // [nrec][Hv][dv][dk]
    // scratch of a pass (m <= max_m rows)
    int *d_in = nullptr;                          // [1 + max_m]: [0] = pos, [1..m] tokens
    float *x = nullptr;                           // [max_m][E]: the residual stream
    float *xf = nullptr;                          // [max_m][ldx]: a product's float input rows
    int8_t *xq = nullptr;                         // [max_m][ldx]: ... quantized per 32-block
    float *xd = nullptr;                          // [max_m][ldx / 32]: ... their block scales
    int ldx = 0;                                  // the widest product input, rounded up to 32
    int8_t *xq2 = nullptr;                        // [max_m][ldx]: a product's input quantized by the op
    float *xd2 = nullptr;                         // [max_m][ldx / 32]: before it (SwiGLU, attention output)
    float *qkv = nullptr;                         // [max_m][C]: DeltaNet q, k, v before the conv
    float *z = nullptr;                           // [max_m][Hv * dv]: DeltaNet output gate
    float *beta = nullptr, *alpha = nullptr;      // [max_m][Hv]: DeltaNet write strength, decay input
    float *ybuf = nullptr;                        // [max_m][Hv * dv]: DeltaNet output before its norm
    float *q_gate = nullptr;                      // [max_m][H][2][D]: each head's query, then its gate
    float *k_new = nullptr, *v_new = nullptr;     // [max_m][Hkv * D]: this pass's keys and values
    float *q_rope = nullptr;                      // [max_m][H * D]: queries normed and rotated
    float *attn_out = nullptr;                    // [max_m][H * D]: gated attention output
    float *scores = nullptr;                      // [max_m][H][max_pos]: attention probabilities
    float *split_max = nullptr;                   // [max_m][H][KC_ATT_SPLITS]: each split's largest score
    int *splits_done = nullptr;                   // [max_m][H]: splits of a head done (0 between passes)
    float *gate = nullptr, *up = nullptr;         // [max_m][F]
    Slot sl[KC_SLOTS];
    cudaStream_t copy_stream = nullptr;           // the copies back
    cudaEvent_t lm_piece_done[KC_LM_PIECES] = {}; // piece p of the LM head is done (recorded by the pass)
    // The pass records lm_piece_done on a branch of its own (piece_stream), forked after each
    // piece and joined at its end, so that no event node sits between two pieces' kernels.
    cudaStream_t piece_stream = nullptr;
    cudaEvent_t piece_fork[KC_LM_PIECES] = {}, piece_join = nullptr;
    // copy helpers: thread i (1..n) takes chunks c with c % (n + 1) == i and the caller the rest,
    // or, on their own (copy_alone), c % n == i - 1 (thread 1 also h_out)
    std::vector<std::thread> copy_threads;
    std::mutex copy_mutex;
    std::condition_variable copy_wake_cv, copy_done_cv;
    unsigned copy_generation = 0;
    int copy_busy = 0, copy_stop = 0;
    int32_t copy_error = 0;
    // the copy-out job (copy_job), set before copy_generation is bumped: slot copy_slot's outputs
    // of copy_rows rows to copy_hout_to [copy_rows][copy_embd] and copy_logits_to
    // [copy_rows][copy_vocab], in copy_chunks chunks of vocabulary columns, copy_chunks_per_piece
    // to an LM head piece; copy_alone: the copy threads do it all
    float *copy_logits_to = nullptr, *copy_hout_to = nullptr;
    int copy_chunks = 0, copy_chunks_per_piece = 1, copy_rows = 0, copy_vocab = 0, copy_embd = 0;
    int copy_slot = 0, copy_alone = 0;
    int copy_pending_rows = 0; // rows of the pass the copy threads are copying out on their own (0: none)
    int64_t counters[KCUDA_C_COUNT] = {};
    std::vector<void *> allocs;
#if KC_TIMELINE
    unsigned long long *tl_times = nullptr, *tl_host = nullptr; // timeline.cuh: KC_TL_WORDS, by KC_TL_AT
    long tl_steps = 0;                                           // M=1 steps appended so far
#endif
};

// The model's sizes by the names of the comment above kcuda_model, read once from its hyperparameters.
struct ModelDims {
    int E, V, F;             // embedding width, vocabulary, feed-forward width
    int H, Hkv, D, half_rot; // attention heads, KV heads, head size, RoPE dims / 2
    int K, dk, Hk, Hv, dv, C; // DeltaNet conv taps, key size, key heads, value heads, value size, conv channels
    int max_pos;             // positions the caches hold
};
ModelDims model_dims(const kcuda_model *md);

// model.cu
int32_t dalloc(kcuda_model *md, void **p, size_t bytes);
// forward.cu: one pass of m rows whose h_out and logits land in slot s (launches only), and its
// capture as a graph
int32_t forward(kcuda_model *md, int m, int s);
int32_t capture(kcuda_model *md, int m, int s, cudaGraphExec_t *out);
// copy_threads.cu
void lm_split(int m, int V, int *chunks, int *pieces);
int lm_piece_col(int p, int chunks, int pieces, int V);
int32_t copy_share(kcuda_model *md, int who, int nthr);
int32_t copy_hout(kcuda_model *md);
void copy_worker(kcuda_model *md, int who);
void copy_threads_stop(kcuda_model *md);
// timeline.cu (KC_TIMELINE only; otherwise these do nothing): the buffer when KITE_CUDA_TIMELINE
// is set, its reset before a pass, an M=1 step's times appended to the file, the launches of op i
// recording (timeline_op) or not (md null)
#if KC_TIMELINE
int32_t timeline_prepare(kcuda_model *md);
int32_t timeline_reset(kcuda_model *md);
int32_t timeline_append(kcuda_model *md);
void timeline_free(kcuda_model *md);
inline void timeline_op(const kcuda_model *md, int i) {
    g_tl_times = md ? md->tl_times : nullptr;
    g_tl_op = i;
}
#else
inline int32_t timeline_prepare(kcuda_model *) { return 0; }
inline int32_t timeline_reset(kcuda_model *) { return 0; }
inline int32_t timeline_append(kcuda_model *) { return 0; }
inline void timeline_free(kcuda_model *) {}
inline void timeline_op(const kcuda_model *, int) {}
#endif
