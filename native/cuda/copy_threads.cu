#include "model.cuh"

void copy_threads_stop(kcuda_model *md) {
    {
        std::lock_guard<std::mutex> lk(md->copy_mutex);
        md->copy_stop = 1;
    }
    md->copy_wake_cv.notify_all();
    for (auto &t : md->copy_threads)
        if (t.joinable()) t.join();
    md->copy_threads.clear();
}

// The logits are copied out of the pinned staging in `chunks` chunks of vocabulary columns (all
// m rows each): at least KC_CHUNK_MIN floats a chunk, KC_NCHUNK at most, shared among the copy
// threads. The LM head runs in `pieces` pieces of chunks / pieces whole chunks, each brought
// back to the staging in one copy; the pass and the copies back use the same split.
void lm_split(int m, int V, int *chunks, int *pieces) {
    int n = (int)(((size_t)m * V + KC_CHUNK_MIN - 1) / KC_CHUNK_MIN);
    if (n > KC_NCHUNK) n = KC_NCHUNK;
    if (n < 1) n = 1;
    const int p = n < KC_LM_PIECES ? n : KC_LM_PIECES;
    *chunks = n / p * p;
    *pieces = p;
}

// first vocabulary column of chunk c (c = chunks: V)
static int lm_col(int c, int chunks, int V) {
    const int64_t chunk_width = ((int64_t)V + chunks - 1) / chunks, v = chunk_width * c;
    return v < V ? (int)v : V;
}

// first vocabulary column of LM head piece p (p = pieces: V): whole chunks, the same split in the pass
// and in the copies back
int lm_piece_col(int p, int chunks, int pieces, int V) { return lm_col(p * (chunks / pieces), chunks, V); }

// chunks of this thread's share: wait for each, copy it out of the staging
int32_t copy_share(kcuda_model *md, int who, int nthr) {
    int32_t err = 0;
    for (int c = who; c < md->copy_chunks; c += nthr) {
        const Slot &s = md->sl[md->copy_slot];
        cudaError_t e = cudaEventSynchronize(s.copied[c / md->copy_chunks_per_piece]);
        if (e != cudaSuccess) {
            err = (int32_t)e;
            break;
        }
        const int v0 = lm_col(c, md->copy_chunks, md->copy_vocab), v1 = lm_col(c + 1, md->copy_chunks, md->copy_vocab);
        if (!md->copy_logits_to || v1 <= v0) continue;
        for (int mi = 0; mi < md->copy_rows; mi++) {
            const size_t o = (size_t)mi * md->copy_vocab + v0;
            memcpy(md->copy_logits_to + o, s.pin_logits + o, (size_t)(v1 - v0) * 4);
        }
    }
    return err;
}

// h_out of the job's pass, once it is in the staging
int32_t copy_hout(kcuda_model *md) {
    const Slot &s = md->sl[md->copy_slot];
    cudaError_t e = cudaEventSynchronize(s.copied[0]);
    if (e != cudaSuccess) return (int32_t)e;
    if (md->copy_hout_to) memcpy(md->copy_hout_to, s.pin_hout, (size_t)md->copy_rows * md->copy_embd * 4);
    return 0;
}

void copy_worker(kcuda_model *md, int who) {
    cudaSetDevice(g_device);
    unsigned seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(md->copy_mutex);
            md->copy_wake_cv.wait(lk, [&] { return md->copy_stop || md->copy_generation != seen; });
            if (md->copy_stop) return;
            seen = md->copy_generation;
        }
        // with the caller: share who of n + 1; alone (copy_alone): share who - 1 of n, and h_out
        const int n = (int)md->copy_threads.size();
        int32_t err = md->copy_alone && who == 1 ? copy_hout(md) : 0;
        if (!err) err = md->copy_alone ? copy_share(md, who - 1, n) : copy_share(md, who, n + 1);
        {
            std::lock_guard<std::mutex> lk(md->copy_mutex);
            if (err && !md->copy_error) md->copy_error = err;
            md->copy_busy--;
        }
        md->copy_done_cv.notify_one();
    }
}

