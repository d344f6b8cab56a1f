#include "model.cuh"
#include "pass_ops.cuh"

// The activations of a matrix product. All matrices quantized: k_actq (once per pass, parallel
// over rows and 32-blocks) into xq / xd, which the gemv reads; the gemv's own prologue remains
// for m < KC_ACTQ_MIN_M and gated norms with hs % 32 != 0. Float weights: k_act into xf first.
struct ActIn {
    Prologue P; // the gemv's prologue (mode -1: activations in q / d / f)
    const int8_t *q;
    const float *d, *f;
    int ldx;
};

static PassOp pass_op(int kind, int gx, int gy, int gz, int threads, int smem) {
    PassOp o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.gx = gx;
    o.gy = gy;
    o.gz = gz;
    o.threads = threads;
    o.smem = smem;
    return o;
}

// The role of the ops from index `from` on that have none yet (the activation ops have theirs).
static void tag(std::vector<PassOp> *ops, size_t from, int role) {
    for (size_t i = from; i < ops->size(); i++)
        if ((*ops)[i].role == ROLE_NONE) (*ops)[i].role = role;
}

// M=1: the out products (after the DeltaNet head or the attention) let the FFN's row norm, and
// the glu after it, be scheduled only once past their wait, so that the glu's weights do not
// stream beside the head's or the attention's dependent loads (P9); the down product keeps
// starting the next layer's norm and in-proj at its start.
static void out_trigger_after_wait(std::vector<PassOp> *ops, size_t from, int m) {
    if (m != 1) return; // the M-row passes keep gemv_plan's choice
    for (size_t i = from; i < ops->size(); i++)
        if ((*ops)[i].kind == OP_GEMV) (*ops)[i].gemv.trigger_after_wait = true;
}

// M=1: the out product (ops from .. to) asks L2 for the glu's gate and up quants, then for those of
// the next layer's first product (the in-proj's qkv and z, or the attention's q, k and v), before
// its wait, delay_ns after its blocks start (L2Ahead): they stream during the head's body, after
// its round trip at its release, so that the glu and the next layer's first product read them
// from L2. After the attention, whose scores op loads while the out product's blocks wait, it
// asks for the glu's alone and later (KC_AHEAD_ATT_DELAY_NS), so that less streams beside it.
#define KC_AHEAD_DELAY_NS 500
#define KC_AHEAD_ATT_DELAY_NS 1500
static void weights_ahead(std::vector<PassOp> *ops, size_t from, size_t to, const DeviceMatrix *const (&w)[KC_AHEAD],
                          int delay_ns) {
    for (size_t i = from; i < to; i++) {
        if ((*ops)[i].kind != OP_GEMV) continue;
        for (int t = 0; t < KC_AHEAD; t++) {
            if (!w[t] || w[t]->type < 0) continue;
            const size_t bytes = (size_t)w[t]->ne1 * (size_t)matrix_quant_row_bytes(w[t]->type, w[t]->ne0);
            (*ops)[i].gemv.ahead.p[t] = (const char *)w[t]->q;
            (*ops)[i].gemv.ahead.lines[t] = (unsigned)((bytes + 127) / 128);
        }
        (*ops)[i].gemv.ahead.delay = gemv_clock_cycles(delay_ns);
    }
}

static int32_t add_gemv(std::vector<PassOp> *ops, const MatvecJobs &js, int m, const ActIn &a, bool wide = false) {
    std::vector<GemvCall> calls;
    CKS(gemv_plan(js, m, a.P, a.q, a.d, a.f, a.ldx, &calls, wide));
    for (const GemvCall &c : calls) {
        PassOp o = pass_op(OP_GEMV, (int)c.grid, 1, 1, c.threads, (int)c.smem);
        o.MT = c.MT;
        o.RPW = c.RPW;
        o.gemv = c.args;
        ops->push_back(o);
    }
    return 0;
}

static int32_t act_prepare(kcuda_model *md, std::vector<PassOp> *ops, const MatvecJobs &js, int m, const Prologue &P,
                           ActIn *a) {
    int allq = 1;
    for (int t = 0; t < js.nj; t++)
        if (js.j[t].type != KCUDA_T_Q8_0 && js.j[t].type != KCUDA_T_Q4_0) allq = 0;
    const int k = js.j[0].k;
    const Prologue none = prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f);
    const ActArgs aa = {P.mode, P.a, P.b, P.lda, P.w, P.hs, k, P.eps, md->xf, md->xq, md->xd, md->ldx, P.out2, P.ld2};
    // Quantize the activations once instead of in the prologue of every gemv block, whose
    // latency would sit in front of every weight load and whose cost grows with m.
    if (allq && m >= KC_ACTQ_MIN_M && (P.mode != 3 || P.hs % 32 == 0)) {
        PassOp o = pass_op(OP_ACTQ, (k / 32 + KC_WARPS - 1) / KC_WARPS, m, 1, KC_THREADS, 0);
        o.role = ROLE_NORM;
        o.act = aa;
        ops->push_back(o);
        *a = ActIn{none, md->xq, md->xd, nullptr, md->ldx};
        return 0;
    }
    if (allq) {
        *a = ActIn{P, nullptr, nullptr, nullptr, 0};
        return 0;
    }
    PassOp o = pass_op(OP_ACT, m, 1, 1, KC_THREADS, 0);
    o.role = ROLE_NORM;
    o.act = aa;
    ops->push_back(o);
    *a = ActIn{none, md->xq, md->xd, md->xf, md->ldx};
    return 0;
}

static bool quantized(const DeviceMatrix &w) { return w.type == KCUDA_T_Q8_0 || w.type == KCUDA_T_Q4_0; }

// Activations already quantized into xq2 / xd2 by the op before the product.
static ActIn act_from_op(kcuda_model *md) {
    return ActIn{prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f), md->xq2, md->xd2, nullptr, md->ldx};
}

// One matrix product with its activation preparation.
static int32_t gemv_in(kcuda_model *md, std::vector<PassOp> *ops, const MatvecJobs &js, int m, const Prologue &P,
                       bool wide = false) {
    ActIn a;
    CKS(act_prepare(md, ops, js, m, P, &a));
    return add_gemv(ops, js, m, a, wide);
}

// The forward pass for m rows at positions in[0] .. in[0]+m-1 (tokens in[1..m]), device-side
// inputs only: the same ops serve the graph and the stream mode.
int32_t plan_pass(kcuda_model *md, int m, int s, std::vector<PassOp> *ops) {
    const Slot &out = md->sl[s];
    const ModelDims dm = model_dims(md);
    const int E = dm.E, V = dm.V, F = dm.F, H = dm.H, Hkv = dm.Hkv, D = dm.D;
    const int K = dm.K, dk = dm.dk, Hk = dm.Hk, Hv = dm.Hv, dv = dm.dv, C = dm.C, max_pos = dm.max_pos;
    const float eps = md->eps;
    ops->clear();
    PassOp embed = pass_op(OP_EMBED, m, 1, 1, KC_THREADS, 0);
    embed.embed = EmbedArgs{md->tok.type, md->tok.q, md->tok.s, md->d_in, E, md->x};
    embed.role = ROLE_EMBED;
    ops->push_back(embed);
    for (int il = 0; il < md->nl; il++) {
        Layer &l = md->L[il];
        size_t out_from = 0, out_to = 0; // the layer's out product (DeltaNet or attention)
        Prologue attn_norm = prologue(1, md->x, nullptr, E, l.v[KCUDA_W_ATTN_NORM], 1, eps);
        if (l.rec) {
            MatvecJobs js = {};
            js.nj = 4;
            js.j[0] = job(l.w[KCUDA_W_SSM_QKV], md->qkv, C, 0);
            js.j[1] = job(l.w[KCUDA_W_SSM_GATE], md->z, Hv * dv, 0);
            js.j[2] = job(l.w[KCUDA_W_SSM_BETA], md->beta, Hv, 0);
            js.j[3] = job(l.w[KCUDA_W_SSM_ALPHA], md->alpha, Hv, 0);
            // M=1: one block a head, the gated norm and its quantization as its tail (no k_actq)
            const bool head = m == 1 && m >= KC_ACTQ_MIN_M && deltanet_head_fits(dk, dv, K) &&
                              quantized(l.w[KCUDA_W_SSM_OUT]);
            size_t from = ops->size();
            // Q4_0: the in-proj in one block an SM (k_gemv_wide), the head beside it from its start
            // (Q4_0 1.020, faster in 6 of 6 rounds); Q8_0 keeps k_gemv<1, 4>, where it lost (0.976):
            // its products stream twice the bytes beside the early blocks (docs/PERFORMANCE.md)
            const bool wide = head && l.w[KCUDA_W_SSM_QKV].type == KCUDA_T_Q4_0;
            CKS(gemv_in(md, ops, js, m, attn_norm, wide));
            tag(ops, from, ROLE_DN_IN);
            const DeltanetArgs da = {md->qkv, C, l.v[KCUDA_W_SSM_CONV1D], K,
                                     md->ring + (size_t)l.idx * md->ring_rows * C, md->ring_rows, md->d_in,
                                     md->beta, md->alpha, Hv, l.v[KCUDA_W_SSM_A], l.v[KCUDA_W_SSM_DT_BIAS],
                                     md->ssm + (size_t)l.idx * Hv * dv * dk, Hk, Hv, dk, dv, eps, md->ybuf, Hv * dv, m,
                                     l.v[KCUDA_W_SSM_NORM], md->z, md->xq2, md->xd2};
            if (head) {
                PassOp o = pass_op(OP_DELTANET_HEAD, Hv, 1, 1, KC_DNH_WARPS * 32, 0);
                o.role = ROLE_DN_HEAD;
                o.deltanet = da;
                ops->push_back(o);
            } else {
                const int nw = dn_warps(dk);
                PassOp o = pass_op(OP_DELTANET, Hv, (dv + nw - 1) / nw, 1, 32 * nw, (int)dn_smem(m, dk));
                o.role = ROLE_DN_HEAD;
                o.deltanet = da;
                ops->push_back(o);
            }
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_SSM_OUT], md->x, E, 1);
            from = ops->size();
            if (head) CKS(add_gemv(ops, js, m, act_from_op(md)));
            else CKS(gemv_in(md, ops, js, m, prologue(3, md->ybuf, md->z, Hv * dv, l.v[KCUDA_W_SSM_NORM], dv, eps)));
            tag(ops, from, ROLE_DN_OUT);
            out_trigger_after_wait(ops, from, m);
            out_from = from, out_to = ops->size();
        } else {
            MatvecJobs js = {};
            js.nj = 3;
            js.j[0] = job(l.w[KCUDA_W_ATTN_Q], md->q_gate, 2 * H * D, 0);
            js.j[1] = job(l.w[KCUDA_W_ATTN_K], md->k_new, Hkv * D, 0);
            js.j[2] = job(l.w[KCUDA_W_ATTN_V], md->v_new, Hkv * D, 0);
            size_t from = ops->size();
            CKS(gemv_in(md, ops, js, m, attn_norm));
            tag(ops, from, ROLE_ATT_QKV);
            float *k_cache = md->k_cache + (size_t)l.idx * max_pos * Hkv * D;
            float *v_cache = md->v_cache + (size_t)l.idx * max_pos * Hkv * D;
            const int qk_threads = D < KC_THREADS ? ((D + 31) / 32 * 32) : KC_THREADS;
            PassOp o = pass_op(OP_QKPREP, H + 2 * Hkv, m, 1, qk_threads, D * (int)sizeof(float));
            o.qkprep = QkprepArgs{md->q_gate, 2 * H * D, md->k_new, md->v_new, Hkv * D, l.v[KCUDA_W_ATTN_Q_NORM],
                                  l.v[KCUDA_W_ATTN_K_NORM], md->cos_tab, md->sin_tab, md->half_tab, dm.half_rot,
                                  md->d_in, H, Hkv, D, eps, md->q_rope, k_cache, v_cache, max_pos};
            o.role = ROLE_ATT_PREP;
            ops->push_back(o);
            // the output product's activations quantized by the values op (no k_actq)
            const bool vq = quantized(l.w[KCUDA_W_ATTN_OUTPUT]) && D % 32 == 0 && m >= KC_ACTQ_MIN_M;
            const ValuesArgs values = {md->scores, v_cache, md->q_gate, 2 * H * D, md->d_in, H, Hkv, D, max_pos,
                                       md->attn_out, H * D, vq ? md->xq2 : nullptr, vq ? md->xd2 : nullptr, md->ldx};
            // a short context's weighted sum is the scores op's (attn_short), long ones the values op's
            o = pass_op(OP_ATTN_SCORES, H, m, KC_ATT_SPLITS, KC_THREADS, 0);
            o.role = ROLE_ATT_SCORES;
            o.scores = ScoresArgs{md->q_rope, k_cache, md->d_in, H, Hkv, D, md->scores, max_pos, md->split_max,
                                  md->splits_done, values};
            ops->push_back(o);
            o = pass_op(OP_ATTN_VALUES, H, m, (D + 31) / 32, KC_VAL_THREADS, 0);
            o.role = ROLE_ATT_VALUES;
            o.values = values;
            ops->push_back(o);
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_ATTN_OUTPUT], md->x, E, 1);
            from = ops->size();
            if (vq) CKS(add_gemv(ops, js, m, act_from_op(md)));
            else CKS(gemv_in(md, ops, js, m, prologue(0, md->attn_out, nullptr, H * D, nullptr, 1, eps)));
            tag(ops, from, ROLE_ATT_OUT);
            out_trigger_after_wait(ops, from, m);
            out_from = from, out_to = ops->size();
        }
        MatvecJobs js = {};
        js.nj = 2;
        js.j[0] = job(l.w[KCUDA_W_FFN_GATE], md->gate, F, 0);
        js.j[1] = job(l.w[KCUDA_W_FFN_UP], md->up, F, 0);
        // M=1: SwiGLU and its quantization as the epilogue of gate / up (no k_actq before down)
        const bool glu = m == 1 && m >= KC_ACTQ_MIN_M && F % 32 == 0 && quantized(l.w[KCUDA_W_FFN_GATE]) &&
                         quantized(l.w[KCUDA_W_FFN_UP]) && quantized(l.w[KCUDA_W_FFN_DOWN]);
        const Prologue post_norm = prologue(1, md->x, nullptr, E, l.v[KCUDA_W_POST_ATTN_NORM], 1, eps);
        size_t from = ops->size();
        if (glu) {
            const DeviceMatrix *w[KC_AHEAD] = {&l.w[KCUDA_W_FFN_GATE], &l.w[KCUDA_W_FFN_UP]};
            if (l.rec && il + 1 < md->nl) {
                const Layer &nx = md->L[il + 1];
                if (nx.rec) w[2] = &nx.w[KCUDA_W_SSM_QKV], w[3] = &nx.w[KCUDA_W_SSM_GATE];
                else w[2] = &nx.w[KCUDA_W_ATTN_Q], w[3] = &nx.w[KCUDA_W_ATTN_K], w[4] = &nx.w[KCUDA_W_ATTN_V];
            }
            weights_ahead(ops, out_from, out_to, w, l.rec ? KC_AHEAD_DELAY_NS : KC_AHEAD_ATT_DELAY_NS);
            ActIn a;
            CKS(act_prepare(md, ops, js, m, post_norm, &a));
            PassOp o = pass_op(OP_GEMV_GLU, F / 32, 1, 1, KC_GLU_THREADS, 0);
            o.glu = GluArgs{js.j[0], js.j[1], a.q, a.d, md->xq2, md->xd2};
            // after a DeltaNet layer, the down product's blocks start and load their weights
            // during the glu's body, not after it
            o.early = l.rec != 0;
            ops->push_back(o);
        } else {
            CKS(gemv_in(md, ops, js, m, post_norm));
        }
        tag(ops, from, ROLE_FFN_UP);
        js.nj = 1;
        js.j[0] = job(l.w[KCUDA_W_FFN_DOWN], md->x, E, 1);
        from = ops->size();
        if (glu) CKS(add_gemv(ops, js, m, act_from_op(md)));
        else CKS(gemv_in(md, ops, js, m, prologue(2, md->gate, md->up, F, nullptr, 1, eps)));
        tag(ops, from, ROLE_FFN_DOWN);
    }
    // The LM head in pieces of vocabulary rows, each followed by an event that the copy back
    // waits for (pass_queue): the logits of piece p travel to the host while p + 1 is computed.
    const DeviceMatrix &W = md->out.type >= 0 ? md->out : md->tok;
    MatvecJobs js = {};
    js.nj = 1;
    js.j[0] = job(W, out.logits, V, 0);
    Prologue final_norm = prologue(1, md->x, nullptr, E, md->out_norm, 1, eps);
    final_norm.out2 = out.hout;
    final_norm.ld2 = E;
    ActIn a;
    CKS(act_prepare(md, ops, js, m, final_norm, &a));
    int chunks = 1, pieces = 1;
    lm_split(m, V, &chunks, &pieces);
    for (int p = 0; p < pieces; p++) {
        const int col0 = lm_piece_col(p, chunks, pieces, V), col1 = lm_piece_col(p + 1, chunks, pieces, V);
        const size_t from = ops->size();
        if (col1 > col0) {
            js.j[0] = job_rows(W, col0, col1 - col0, out.logits + col0, V);
            unsigned grid = 0;
            if (lm_head_takes(js.j[0], m, a.P, &grid)) {
                PassOp o = pass_op(OP_LM_HEAD, (int)grid, 1, 1, KC_LM_THREADS, 0);
                o.lm = LmHeadArgs{js.j[0], a.q, a.d};
                ops->push_back(o);
            } else {
                CKS(add_gemv(ops, js, m, a));
            }
            a.P.out2 = nullptr; // h_out: written once (by a prologue of the first piece, if any)
        }
        tag(ops, from, ROLE_LM_HEAD);
        PassOp done = pass_op(OP_PIECE_DONE, 0, 0, 0, 0, 0);
        done.piece = p;
        ops->push_back(done);
    }
    return ablate_pass(m, s, ops);
}

// One op as a kernel of its own on g_stream (OP_PIECE_DONE: its event, on the piece branch).
static int32_t run_op(kcuda_model *md, const PassOp &o, cudaStreamCaptureStatus cs) {
    const dim3 g((unsigned)o.gx, (unsigned)o.gy, (unsigned)o.gz), b((unsigned)o.threads);
    switch (o.kind) {
    case OP_EMBED: CK(klaunch(k_embed, g, b, o.smem, o.embed)); break;
    case OP_ACT: CK(klaunch(k_act, g, b, o.smem, o.act)); break;
    case OP_ACTQ: CK(klaunch(k_actq, g, b, o.smem, o.act)); break;
    case OP_GEMV: CK(gemv_launch(GemvCall{o.gemv, o.MT, o.RPW, (unsigned)o.gx, (size_t)o.smem, o.threads})); break;
    case OP_GEMV_GLU: CK(klaunch(o.early ? k_gemv_glu_early : k_gemv_glu, g, b, o.smem, o.glu)); break;
    case OP_LM_HEAD: CK(lm_head_launch(o.lm, (unsigned)o.gx)); break;
    case OP_DELTANET: CK(klaunch(k_deltanet, g, b, o.smem, o.deltanet)); break;
    case OP_DELTANET_HEAD: CK(klaunch(k_deltanet_head, g, b, o.smem, o.deltanet)); break;
    case OP_QKPREP: CK(klaunch(k_qkprep, g, b, o.smem, o.qkprep)); break;
    case OP_ATTN_SCORES: CK(klaunch(k_attn_scores, g, b, o.smem, o.scores)); break;
    case OP_ATTN_VALUES: CK(klaunch(k_attn_values, g, b, o.smem, o.values)); break;
    case OP_PIECE_DONE:
        // in a graph: an event record node that work outside the graph can wait for, on a branch
        // forked after the piece's kernel, so that the next piece follows that kernel directly
        // (PDL) instead of an event node
        CK(cudaEventRecord(md->piece_fork[o.piece], g_stream));
        CK(cudaStreamWaitEvent(md->piece_stream, md->piece_fork[o.piece], 0));
        CK(cudaEventRecordWithFlags(md->lm_piece_done[o.piece], md->piece_stream,
                                    cs == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault));
        break;
    default: return KCUDA_E_STATE;
    }
    return 0;
}

static int32_t run_ops(kcuda_model *md, const std::vector<PassOp> &ops) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(g_stream, &cs));
    for (size_t i = 0; i < ops.size(); i++) {
        g_pdl = i > 0 && KC_PDL && g_cc_major >= 9; // the first kernel follows a copy: plain stream order
        timeline_op(md, (int)i);
        CKS(run_op(md, ops[i], cs));
    }
    timeline_op(nullptr, 0);
    // the piece branch joins the pass (a capture ends with every branch joined)
    CK(cudaEventRecord(md->piece_join, md->piece_stream));
    CK(cudaStreamWaitEvent(g_stream, md->piece_join, 0));
    return 0;
}

// One pass of m rows whose h_out and logits land in slot s, kernel by kernel (planned at the
// first pass of m rows into the slot: the plan depends on nothing else).
int32_t forward(kcuda_model *md, int m, int s) {
    std::vector<PassOp> &ops = md->sl[s].plans[m];
    int32_t st = ops.empty() ? plan_pass(md, m, s, &ops) : 0;
    if (st) ops.clear();
    if (!st) st = run_ops(md, ops);
    g_pdl = 0;
    return st;
}

int32_t capture(kcuda_model *md, int m, int s, cudaGraphExec_t *out) {
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    int32_t st = forward(md, m, s);
    cudaError_t e = cudaStreamEndCapture(g_stream, &g);
    if (st) {
        if (g) cudaGraphDestroy(g);
        return st;
    }
    CK(e);
    e = cudaGraphInstantiate(out, g, 0);
    cudaGraphDestroy(g);
    CK(e);
    // upload now (outside the request window), not at the first launch
    CK(cudaGraphUpload(*out, g_stream));
    md->counters[KCUDA_C_GRAPH_CAPTURES]++;
    return 0;
}

