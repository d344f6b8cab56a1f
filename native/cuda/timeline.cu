// timeline.cu - the host side of the per-op timeline (timeline.cuh): the buffer, its reset before
// each pass and the file that kcuda_step appends an M=1 step's times to. Empty unless KC_TIMELINE.
#include "model.cuh"

#if KC_TIMELINE
unsigned long long *g_tl_times = nullptr;
int g_tl_op = 0;

static const char *op_name(int kind) {
    switch (kind) {
    case OP_EMBED: return "embed";
    case OP_ACT: return "act";
    case OP_ACTQ: return "actq";
    case OP_GEMV: return "gemv";
    case OP_GEMV_GLU: return "gemv_glu";
    case OP_LM_HEAD: return "lm_head";
    case OP_DELTANET: return "deltanet";
    case OP_DELTANET_HEAD: return "deltanet_head";
    case OP_QKPREP: return "qkprep";
    case OP_ATTN_SCORES: return "scores";
    case OP_ATTN_VALUES: return "values";
    default: return "other";
    }
}

int32_t timeline_prepare(kcuda_model *md) {
    if (!getenv("KITE_CUDA_TIMELINE") || md->tl_times) return 0;
    CK(cudaMalloc(&md->tl_times, KC_TL_WORDS * sizeof(unsigned long long)));
    md->tl_host = (unsigned long long *)malloc(KC_TL_WORDS * sizeof(unsigned long long));
    return md->tl_host ? 0 : KCUDA_E_STATE;
}

int32_t timeline_reset(kcuda_model *md) {
    if (!md->tl_times) return 0;
    // earliest start and wait: all ones; latest end: zero (every slot)
    const size_t field = KC_TL_AT(1, 0, 0);
    CK(cudaMemsetAsync(md->tl_times + KC_TL_AT(TL_START, 0, 0), 0xff, 2 * field * sizeof(unsigned long long), g_stream));
    CK(cudaMemsetAsync(md->tl_times + KC_TL_AT(TL_END, 0, 0), 0, field * sizeof(unsigned long long), g_stream));
    return 0;
}

// The earliest (TL_START, TL_WAIT) or latest (TL_END) of op's slots in the host copy.
static unsigned long long slots_reduced(const unsigned long long *h, int field, size_t op) {
    unsigned long long v = h[KC_TL_AT(field, op, 0)];
    for (int s = 1; s < KC_TL_SLOTS; s++) {
        const unsigned long long x = h[KC_TL_AT(field, op, s)];
        v = field == TL_END ? (x > v ? x : v) : (x < v ? x : v);
    }
    return v;
}

// One line per op: step, op, kind, blocks (x y z), threads, MT and RPW (gemv), then the earliest
// start, the earliest wait release (all ones: no thread 0 waited) and the latest end, in ns.
int32_t timeline_append(kcuda_model *md) {
    if (!md->tl_times) return 0;
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(md->tl_host, md->tl_times, KC_TL_WORDS * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    FILE *f = fopen(getenv("KITE_CUDA_TIMELINE"), "a");
    if (!f) return KCUDA_E_ARG;
    const std::vector<PassOp> &ops = md->sl[0].plans[1];
    for (size_t i = 0; i < ops.size() && i < KC_TL_OPS; i++) {
        const PassOp &o = ops[i];
        if (o.kind == OP_PIECE_DONE) continue;
        fprintf(f, "%ld %zu %s %d %d %d %d %d %d %llu %llu %llu\n", md->tl_steps, i, op_name(o.kind), o.gx, o.gy, o.gz,
                o.threads, o.MT, o.RPW, slots_reduced(md->tl_host, TL_START, i), slots_reduced(md->tl_host, TL_WAIT, i),
                slots_reduced(md->tl_host, TL_END, i));
    }
    fclose(f);
    md->tl_steps++;
    return 0;
}

void timeline_free(kcuda_model *md) {
    if (md->tl_times) cudaFree(md->tl_times);
    free(md->tl_host);
}
#endif
