#include "model.cuh"

// Arguments of a call of m rows at positions pos.. (the model prepared for them)
static int32_t rows_check(const kcuda_model *md, const int32_t *tokens, int32_t n, int32_t m, int32_t pos) {
    if (!md || !md->prepared || !g_ready) return KCUDA_E_STATE;
    const int V = md->hp[KCUDA_HP_N_VOCAB];
    if (!tokens || n < 1 || m < 1 || m > md->max_m || pos < 0 || pos > md->hp[KCUDA_HP_MAX_POS] - n)
        return KCUDA_E_ARG;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) return KCUDA_E_ARG;
    return 0;
}

// Queue one pass of m rows at positions pos.. writing slot s, and the copies of its outputs
// back to the slot's pinned staging on the copy stream: h_out once the LM head's first piece is
// done (the final norm ran before it), then the logits of each piece in one copy once the piece
// is (fewer copies trail the pass's last kernel less), each piece followed by an event that the
// host waits for.
// Returns at once: nothing here waits for the device.
static int32_t pass_queue(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, int s) {
    Slot &sl = md->sl[s];
    const int E = md->hp[KCUDA_HP_N_EMBD], V = md->hp[KCUDA_HP_N_VOCAB];
    sl.h_in[0] = pos;
    for (int i = 0; i < m; i++) sl.h_in[1 + i] = tokens[i];
    CKS(timeline_reset(md));
    CK(cudaMemcpyAsync(md->d_in, sl.h_in, (size_t)(m + 1) * 4, cudaMemcpyHostToDevice, g_stream));
    if (m == 1) {
        if (md->opt_graph && sl.graph_m1) {
            CK(cudaGraphLaunch(sl.graph_m1, g_stream));
            md->counters[KCUDA_C_GRAPH_REPLAYS]++;
        } else {
            CKS(forward(md, 1, s));
            md->counters[KCUDA_C_STREAM_STEPS]++;
        }
    } else {
        auto it = md->opt_graph_m ? sl.graphs_m.find(m) : sl.graphs_m.end();
        if (it != sl.graphs_m.end()) {
            CK(cudaGraphLaunch(it->second, g_stream));
            md->counters[KCUDA_C_MROW_GRAPH_REPLAYS]++;
        } else {
            CKS(forward(md, m, s));
        }
    }
    int chunks = 1, pieces = 1;
    lm_split(m, V, &chunks, &pieces);
    for (int p = 0; p < pieces; p++) {
        CK(cudaStreamWaitEvent(md->copy_stream, md->lm_piece_done[p], 0));
        if (p == 0) CK(cudaMemcpyAsync(sl.pin_hout, sl.hout, (size_t)m * E * 4, cudaMemcpyDeviceToHost, md->copy_stream));
        const int v0 = lm_piece_col(p, chunks, pieces, V), v1 = lm_piece_col(p + 1, chunks, pieces, V);
        if (v1 > v0 && !ablate_copy_back())
            CK(cudaMemcpy2DAsync(sl.pin_logits + v0, (size_t)V * 4, sl.logits + v0, (size_t)V * 4,
                                 (size_t)(v1 - v0) * 4, (size_t)m, cudaMemcpyDeviceToHost, md->copy_stream));
        CK(cudaEventRecord(sl.copied[p], md->copy_stream));
    }
    return 0;
}

// The copy-out of the pass queued into slot s (m rows) to the caller's h_out[m][E] and
// logits[m][V] (either may be NULL), as the copy threads' next job; returns its chunks.
static int copy_job(kcuda_model *md, int32_t m, int s, float *h_out, float *logits, int async) {
    const int V = md->hp[KCUDA_HP_N_VOCAB];
    int chunks = 1, pieces = 1;
    lm_split(m, V, &chunks, &pieces);
    md->copy_logits_to = logits;
    md->copy_hout_to = h_out;
    md->copy_chunks = chunks;
    md->copy_chunks_per_piece = chunks / pieces;
    md->copy_rows = m;
    md->copy_vocab = V;
    md->copy_embd = md->hp[KCUDA_HP_N_EMBD];
    md->copy_slot = s;
    md->copy_alone = async;
    return chunks;
}

static void copy_wake(kcuda_model *md, int nthreads) {
    {
        std::lock_guard<std::mutex> lk(md->copy_mutex);
        md->copy_error = 0;
        md->copy_busy = nthreads;
        md->copy_generation++;
    }
    md->copy_wake_cv.notify_all();
}

static int32_t copy_wait(kcuda_model *md) {
    std::unique_lock<std::mutex> lk(md->copy_mutex);
    md->copy_done_cv.wait(lk, [&] { return md->copy_busy == 0; });
    return md->copy_error;
}

static void count_pass(kcuda_model *md, int32_t m) {
    if (m == 1) md->counters[KCUDA_C_STEPS]++;
    else md->counters[KCUDA_C_MROW_CALLS]++;
}

// Wait for the pass queued into slot s and copy its outputs out of the staging: the host copies
// the chunks of a piece out while the pieces after it are still in flight, with the copy threads
// for M rows.
static int32_t pass_collect(kcuda_model *md, int32_t m, int s, float *h_out, float *logits) {
    const int chunks = copy_job(md, m, s, h_out, logits, 0);
    // helpers for M rows only: at M=1 the caller reads the logits next (greedy pick), and a
    // copy by this thread leaves them in its own cache
    const int threads = (chunks > 1 && m > 1) ? (int)md->copy_threads.size() + 1 : 1;
    if (threads > 1) copy_wake(md, threads - 1);
    int32_t err = copy_hout(md);
    if (!err) err = copy_share(md, 0, threads);
    if (threads > 1) {
        const int32_t e = copy_wait(md);
        if (!err) err = e;
    }
    if (err) return err;
    count_pass(md, m);
    return 0;
}

// The same copy-out done by the copy threads alone while this thread queues the next pass
// (kcuda_prompt); collect_end waits for it. Without copy threads, this thread does it now.
static int32_t collect_begin(kcuda_model *md, int32_t m, int s, float *h_out, float *logits) {
    if (md->copy_threads.empty()) return pass_collect(md, m, s, h_out, logits);
    copy_job(md, m, s, h_out, logits, 1);
    md->copy_pending_rows = m;
    copy_wake(md, (int)md->copy_threads.size());
    return 0;
}

static int32_t collect_end(kcuda_model *md) {
    const int32_t m = md->copy_pending_rows;
    if (!m) return 0;
    md->copy_pending_rows = 0;
    CKS(copy_wait(md));
    count_pass(md, m);
    return 0;
}

static int32_t run_rows(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, float *h_out,
                        float *logits) {
    CKS(rows_check(md, tokens, m, m, pos));
    CKS(pass_queue(md, tokens, m, pos, 0));
    CKS(pass_collect(md, m, 0, h_out, logits));
    return m == 1 ? timeline_append(md) : 0;
}

extern "C" {

KCUDA_API int32_t kcuda_step(kcuda_model *md, int32_t token, int32_t pos, float *h_out, float *logits) {
    if (!md) return KCUDA_E_STATE;
    return run_rows(md, &token, 1, pos, h_out, logits);
}

// n rows in passes of m queued back to back. Pass i + 1 is queued before pass i is copied out,
// and the copy threads copy pass i out while this thread queues pass i + 2: the device does not
// idle between passes for the copy back and the return to the caller, nor (in stream mode)
// for this thread's copying. Passes cycle through three slots; before
// pass i + 3 reuses a slot, pass i has been copied out, so no pass overwrites outputs still on
// their way back. Row r's outputs go to row r % ring of h_out / logits.
KCUDA_API int32_t kcuda_prompt(kcuda_model *md, const int32_t *tokens, int32_t n, int32_t m, int32_t pos,
                               float *h_out, float *logits, int32_t ring) {
    CKS(rows_check(md, tokens, n, m, pos));
    if (ring < n && (ring < m || ring % m != 0)) return KCUDA_E_ARG;
    const int E = md->hp[KCUDA_HP_N_EMBD], V = md->hp[KCUDA_HP_N_VOCAB];
    int32_t err = 0;
    int prev = -1, prev_m = 0; // first row and rows of the pass queued and not yet copied out
    for (int r = 0; !err && (r < n || prev >= 0); r += m) {
        const int mi = r >= n ? 0 : n - r < m ? n - r : m;
        if (mi > 0) err = pass_queue(md, tokens + r, mi, pos + r, (r / m) % KC_SLOTS);
        const int32_t e = collect_end(md); // the pass before prev: its slot is free again
        if (!err) err = e;
        if (!err && prev >= 0) {
            const size_t o = (size_t)(prev % ring);
            err = collect_begin(md, prev_m, (prev / m) % KC_SLOTS, h_out ? h_out + o * E : nullptr,
                                logits ? logits + o * V : nullptr);
        }
        prev = mi > 0 ? r : -1;
        prev_m = mi;
    }
    const int32_t e = collect_end(md); // the last pass; never leave a copy into the caller's rows behind
    return err ? err : e;
}

} // extern "C"

// Not exported by itself: exports.cu wraps it as kcuda_step_m (the loader test module omits it).
int32_t kcuda_impl_step_m(kcuda_model *md, const int32_t *tokens, int32_t m, int32_t pos, float *h_out,
                          float *logits) {
    if (!md) return KCUDA_E_STATE;
    return run_rows(md, tokens, m, pos, h_out, logits);
}
