#include "model.cuh"
#include "activation.cuh"
#include "attention.cuh"
#include "deltanet.cuh"

// The activations of a matrix product. All matrices quantized: k_actq (once per pass, parallel
// over rows and 32-blocks) into xq / xd, which the gemv reads; the gemv's own prologue remains
// for m < KC_ACTQ_MIN_M and gated norms with hs % 32 != 0. Float weights: k_act into xf first.
struct ActIn {
    Prologue P; // the gemv's prologue (mode -1: activations in q / d / f)
    const int8_t *q;
    const float *d, *f;
    int ldx;
};

static int32_t act_prepare(kcuda_model *md, const MatvecJobs &js, int m, const Prologue &P, ActIn *a) {
    int allq = 1;
    for (int t = 0; t < js.nj; t++)
        if (js.j[t].type != KCUDA_T_Q8_0 && js.j[t].type != KCUDA_T_Q4_0) allq = 0;
    const int k = js.j[0].k;
    const Prologue none = prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f);
    // Quantize the activations once instead of in the prologue of every gemv block, whose
    // latency would sit in front of every weight load and whose cost grows with m.
    if (allq && m >= KC_ACTQ_MIN_M && (P.mode != 3 || P.hs % 32 == 0)) {
        dim3 g((unsigned)((k / 32 + KC_WARPS - 1) / KC_WARPS), (unsigned)m);
        CK(klaunch(k_actq, g, dim3(KC_THREADS), 0, P.mode, P.a, P.b, P.lda, P.w, P.hs, k, P.eps, md->xq, md->xd,
                   md->ldx, P.out2, P.ld2));
        *a = ActIn{none, md->xq, md->xd, nullptr, md->ldx};
        return 0;
    }
    if (allq) {
        *a = ActIn{P, nullptr, nullptr, nullptr, 0};
        return 0;
    }
    CK(klaunch(k_act, dim3(m), dim3(KC_THREADS), 0, P.mode, P.a, P.b, P.lda, P.w, P.hs, k, P.eps, md->xf, md->xq,
               md->xd, md->ldx, P.out2, P.ld2));
    *a = ActIn{none, md->xq, md->xd, md->xf, md->ldx};
    return 0;
}

// One matrix product with its activation preparation.
static int32_t gemv_in(kcuda_model *md, const MatvecJobs &js, int m, const Prologue &P) {
    ActIn a;
    CKS(act_prepare(md, js, m, P, &a));
    return launch_gemv(js, m, a.P, a.q, a.d, a.f, a.ldx);
}

// The forward pass for m rows at positions in[0] .. in[0]+m-1 (tokens in[1..m]), device-side
// inputs only: the same launches serve the graph and the stream mode.
static int32_t forward_impl(kcuda_model *md, int m, const Slot &out);
// one pass of m rows whose h_out and logits land in slot s
int32_t forward(kcuda_model *md, int m, int s) {
    int32_t st = forward_impl(md, m, md->sl[s]);
    g_pdl = 0;
    return st;
}

static int32_t forward_impl(kcuda_model *md, int m, const Slot &out) {
    const ModelDims dm = model_dims(md);
    const int E = dm.E, V = dm.V, F = dm.F, H = dm.H, Hkv = dm.Hkv, D = dm.D;
    const int K = dm.K, dk = dm.dk, Hk = dm.Hk, Hv = dm.Hv, dv = dm.dv, C = dm.C, max_pos = dm.max_pos;
    const int half = dm.half_rot;
    const float eps = md->eps;
    g_pdl = 0; // the first kernel follows a copy: plain stream order
    k_embed<<<m, KC_THREADS, 0, g_stream>>>(md->tok, md->d_in, E, md->x);
    CK(cudaGetLastError());
    g_pdl = KC_PDL && g_cc_major >= 9;
    for (int il = 0; il < md->nl; il++) {
        Layer &l = md->L[il];
        Prologue pn = prologue(1, md->x, nullptr, E, l.v[KCUDA_W_ATTN_NORM], 1, eps);
        if (l.rec) {
            MatvecJobs js = {};
            js.nj = 4;
            js.j[0] = job(l.w[KCUDA_W_SSM_QKV], md->qkv, C, 0);
            js.j[1] = job(l.w[KCUDA_W_SSM_GATE], md->z, Hv * dv, 0);
            js.j[2] = job(l.w[KCUDA_W_SSM_BETA], md->beta, Hv, 0);
            js.j[3] = job(l.w[KCUDA_W_SSM_ALPHA], md->alpha, Hv, 0);
            CKS(gemv_in(md, js, m, pn));
            float *ring = md->ring + (size_t)l.idx * md->ring_rows * C;
            float *S = md->ssm + (size_t)l.idx * Hv * dv * dk;
            const int nw = dn_warps(dk);
            dim3 g(Hv, (dv + nw - 1) / nw);
            CK(klaunch(k_deltanet, g, dim3(32 * nw), dn_smem(m, dk), (const float *)md->qkv, C,
                       (const float *)l.v[KCUDA_W_SSM_CONV1D], K, ring, md->ring_rows, (const int *)md->d_in,
                       (const float *)md->beta, (const float *)md->alpha, Hv, (const float *)l.v[KCUDA_W_SSM_A],
                       (const float *)l.v[KCUDA_W_SSM_DT_BIAS], S, Hk, Hv, dk, dv, eps, md->ybuf, Hv * dv, m));
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_SSM_OUT], md->x, E, 1);
            CKS(gemv_in(md, js, m, prologue(3, md->ybuf, md->z, Hv * dv, l.v[KCUDA_W_SSM_NORM], dv, eps)));
        } else {
            MatvecJobs js = {};
            js.nj = 3;
            js.j[0] = job(l.w[KCUDA_W_ATTN_Q], md->q_gate, 2 * H * D, 0);
            js.j[1] = job(l.w[KCUDA_W_ATTN_K], md->k_new, Hkv * D, 0);
            js.j[2] = job(l.w[KCUDA_W_ATTN_V], md->v_new, Hkv * D, 0);
            CKS(gemv_in(md, js, m, pn));
            float *k_cache = md->k_cache + (size_t)l.idx * max_pos * Hkv * D;
            float *v_cache = md->v_cache + (size_t)l.idx * max_pos * Hkv * D;
            dim3 g1(H + 2 * Hkv, m);
            int th = D < KC_THREADS ? ((D + 31) / 32 * 32) : KC_THREADS;
            CK(klaunch(k_qkprep, g1, dim3(th), D * sizeof(float), (const float *)md->q_gate, 2 * H * D,
                       (const float *)md->k_new, (const float *)md->v_new, Hkv * D, (const float *)l.v[KCUDA_W_ATTN_Q_NORM],
                       (const float *)l.v[KCUDA_W_ATTN_K_NORM], (const float *)md->cos_tab,
                       (const float *)md->sin_tab, md->half_tab, half, (const int *)md->d_in, H, Hkv, D, eps, md->q_rope,
                       k_cache, v_cache, max_pos));
            CK(klaunch(k_attn_scores, dim3(H, m, KC_ATT_SPLITS), dim3(KC_THREADS), 0, (const float *)md->q_rope,
                       (const float *)k_cache, (const int *)md->d_in, H, Hkv, D, md->scores, max_pos, md->split_max,
                       md->splits_done));
            CK(klaunch(k_attn_values, dim3(H, m, (D + KC_ATT_COLS - 1) / KC_ATT_COLS), dim3(KC_THREADS), 0,
                       (const float *)md->scores, (const float *)v_cache, (const float *)md->q_gate, 2 * H * D,
                       (const int *)md->d_in, H, Hkv, D, max_pos, md->attn_out, H * D));
            js.nj = 1;
            js.j[0] = job(l.w[KCUDA_W_ATTN_OUTPUT], md->x, E, 1);
            CKS(gemv_in(md, js, m, prologue(0, md->attn_out, nullptr, H * D, nullptr, 1, eps)));
        }
        MatvecJobs js = {};
        js.nj = 2;
        js.j[0] = job(l.w[KCUDA_W_FFN_GATE], md->gate, F, 0);
        js.j[1] = job(l.w[KCUDA_W_FFN_UP], md->up, F, 0);
        CKS(gemv_in(md, js, m, prologue(1, md->x, nullptr, E, l.v[KCUDA_W_POST_ATTN_NORM], 1, eps)));
        js.nj = 1;
        js.j[0] = job(l.w[KCUDA_W_FFN_DOWN], md->x, E, 1);
        CKS(gemv_in(md, js, m, prologue(2, md->gate, md->up, F, nullptr, 1, eps)));
    }
    // The LM head in pieces of vocabulary rows, each followed by an event that the copy back
    // waits for (pass_queue): the logits of piece p travel to the host while p + 1 is computed.
    const DeviceMatrix &W = md->out.type >= 0 ? md->out : md->tok;
    MatvecJobs js = {};
    js.nj = 1;
    js.j[0] = job(W, out.logits, V, 0);
    Prologue pf = prologue(1, md->x, nullptr, E, md->out_norm, 1, eps);
    pf.out2 = out.hout;
    pf.ld2 = E;
    ActIn a;
    CKS(act_prepare(md, js, m, pf, &a));
    int nch = 1, np = 1;
    lm_split(m, V, &nch, &np);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(g_stream, &cs));
    for (int p = 0; p < np; p++) {
        const int r0 = lm_piece_col(p, nch, np, V), r1 = lm_piece_col(p + 1, nch, np, V);
        if (r1 > r0) {
            js.j[0] = job_rows(W, r0, r1 - r0, out.logits + r0, V);
            CKS(launch_gemv(js, m, a.P, a.q, a.d, a.f, a.ldx));
            a.P.out2 = nullptr; // h_out: written once (by a prologue of the first piece, if any)
        }
        // in a graph: an event record node that work outside the graph can wait for
        CK(cudaEventRecordWithFlags(md->lm_piece_done[p], g_stream,
                                    cs == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault));
    }
    return 0;
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

