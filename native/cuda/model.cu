#include "model.cuh"
#include "deltanet.cuh"

// Every model buffer starts zeroed: the warm-up passes in prepare read state and scratch before
// any step wrote them (compute-sanitizer initcheck flagged those reads), and zeros keep them defined.
ModelDims model_dims(const kcuda_model *md) {
    const int32_t *hp = md->hp;
    ModelDims d;
    d.E = hp[KCUDA_HP_N_EMBD], d.V = hp[KCUDA_HP_N_VOCAB], d.F = hp[KCUDA_HP_N_FF];
    d.H = hp[KCUDA_HP_N_HEAD], d.Hkv = hp[KCUDA_HP_N_HEAD_KV], d.D = hp[KCUDA_HP_HEAD_DIM];
    d.half_rot = hp[KCUDA_HP_N_ROT] / 2;
    d.K = hp[KCUDA_HP_SSM_CONV], d.dk = hp[KCUDA_HP_SSM_DK], d.Hk = hp[KCUDA_HP_SSM_HK];
    d.Hv = hp[KCUDA_HP_SSM_HV], d.dv = hp[KCUDA_HP_SSM_DV];
    d.C = 2 * d.Hk * d.dk + d.Hv * d.dv;
    d.max_pos = hp[KCUDA_HP_MAX_POS];
    return d;
}

int32_t dalloc(kcuda_model *md, void **p, size_t bytes) {
    CK(cudaMalloc(p, bytes ? bytes : 4));
    md->allocs.push_back(*p);
    CK(cudaMemset(*p, 0, bytes ? bytes : 4));
    return 0;
}

static void graphs_free(kcuda_model *md) {
    for (Slot &s : md->sl) {
        if (s.graph_m1) cudaGraphExecDestroy(s.graph_m1);
        s.graph_m1 = nullptr;
        for (auto &kv : s.graphs_m) cudaGraphExecDestroy(kv.second);
        s.graphs_m.clear();
    }
}

static void model_free(kcuda_model *md) {
    if (!md) return;
    copy_threads_stop(md);
    graphs_free(md);
    for (auto &l : md->L) {
        for (int r = 0; r < KCUDA_W_COUNT; r++) {
            matrix_free(l.w[r]);
            if (l.v[r]) cudaFree(l.v[r]);
        }
    }
    matrix_free(md->tok);
    matrix_free(md->out);
    if (md->out_norm) cudaFree(md->out_norm);
    if (md->cos_tab) cudaFree(md->cos_tab);
    if (md->sin_tab) cudaFree(md->sin_tab);
    for (void *p : md->allocs) cudaFree(p);
    for (Slot &s : md->sl) {
        if (s.h_in) cudaFreeHost(s.h_in);
        if (s.pin_hout) cudaFreeHost(s.pin_hout);
        if (s.pin_logits) cudaFreeHost(s.pin_logits);
        for (int i = 0; i < KC_LM_PIECES; i++)
            if (s.copied[i]) cudaEventDestroy(s.copied[i]);
    }
    if (md->copy_stream) cudaStreamDestroy(md->copy_stream);
    if (md->piece_stream) cudaStreamDestroy(md->piece_stream);
    for (int i = 0; i < KC_LM_PIECES; i++) {
        if (md->lm_piece_done[i]) cudaEventDestroy(md->lm_piece_done[i]);
        if (md->piece_fork[i]) cudaEventDestroy(md->piece_fork[i]);
    }
    if (md->piece_join) cudaEventDestroy(md->piece_join);
    timeline_free(md);
    delete md;
}

static int is_vec_role(int role) {
    switch (role) {
    case KCUDA_W_OUTPUT_NORM: case KCUDA_W_ATTN_NORM: case KCUDA_W_POST_ATTN_NORM:
    case KCUDA_W_ATTN_Q_NORM: case KCUDA_W_ATTN_K_NORM: case KCUDA_W_SSM_A:
    case KCUDA_W_SSM_DT_BIAS: case KCUDA_W_SSM_CONV1D: case KCUDA_W_SSM_NORM:
        return 1;
    default:
        return 0;
    }
}


extern "C" {

KCUDA_API kcuda_model *kcuda_model_create(const int32_t *hp, int32_t n_hp, const int32_t *layer_recurrent,
                                          float eps) {
    if (!g_ready || !hp || n_hp < KCUDA_HP_COUNT) return nullptr;
    for (int i = 0; i < KCUDA_HP_COUNT; i++)
        if (hp[i] < 0) return nullptr;
    if (hp[KCUDA_HP_N_LAYER] <= 0 || hp[KCUDA_HP_N_EMBD] <= 0 || hp[KCUDA_HP_N_VOCAB] <= 0) return nullptr;
    if (hp[KCUDA_HP_SSM_CONV] > 9 || hp[KCUDA_HP_SSM_DK] > KC_DK_MAX) return nullptr;
    if (hp[KCUDA_HP_N_HEAD_KV] > 0 && hp[KCUDA_HP_N_HEAD] % hp[KCUDA_HP_N_HEAD_KV]) return nullptr;
    if (hp[KCUDA_HP_SSM_HK] > 0 && hp[KCUDA_HP_SSM_HV] % hp[KCUDA_HP_SSM_HK]) return nullptr;
    kcuda_model *md = new (std::nothrow) kcuda_model();
    if (!md) return nullptr;
    memcpy(md->hp, hp, sizeof md->hp);
    md->eps = eps;
    md->nl = hp[KCUDA_HP_N_LAYER];
    md->L.resize((size_t)md->nl);
    md->nrec = md->nfull = 0;
    for (int il = 0; il < md->nl; il++) {
        md->L[il].rec = layer_recurrent ? layer_recurrent[il] != 0 : 0;
        md->L[il].idx = md->L[il].rec ? md->nrec++ : md->nfull++;
    }
    return md;
}

KCUDA_API int32_t kcuda_model_set_tensor(kcuda_model *md, int32_t layer, int32_t role, int32_t type,
                                         const void *data, int64_t ne0, int64_t ne1, int64_t nbytes) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (role < 0 || role >= KCUDA_W_COUNT || !data) return KCUDA_E_ARG;
    if (layer < -1 || layer >= md->nl) return KCUDA_E_ARG;
    if (md->prepared) return KCUDA_E_STATE;
    if (is_vec_role(role)) {
        float **dst = layer < 0 ? (role == KCUDA_W_OUTPUT_NORM ? &md->out_norm : nullptr) : &md->L[layer].v[role];
        if (!dst) return KCUDA_E_ARG;
        return vec_upload(dst, type, data, ne0 * ne1, nbytes);
    }
    DeviceMatrix *dst;
    if (layer < 0) {
        if (role == KCUDA_W_TOKEN_EMBD) dst = &md->tok;
        else if (role == KCUDA_W_OUTPUT) dst = &md->out;
        else return KCUDA_E_ARG;
    } else {
        dst = &md->L[layer].w[role];
    }
    return matrix_upload(*dst, type, data, ne0, ne1, nbytes);
}

KCUDA_API int32_t kcuda_model_set_rope(kcuda_model *md, const float *cos_tab, const float *sin_tab,
                                       int32_t max_pos, int32_t half_rot) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (!cos_tab || !sin_tab || max_pos <= 0 || half_rot < 0) return KCUDA_E_ARG;
    size_t n = (size_t)max_pos * (half_rot > 0 ? half_rot : 1);
    if (md->cos_tab) cudaFree(md->cos_tab);
    if (md->sin_tab) cudaFree(md->sin_tab);
    md->cos_tab = md->sin_tab = nullptr;
    CK(cudaMalloc((void **)&md->cos_tab, n * 4));
    CK(cudaMalloc((void **)&md->sin_tab, n * 4));
    if (half_rot > 0) {
        CK(cudaMemcpy(md->cos_tab, cos_tab, (size_t)max_pos * half_rot * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(md->sin_tab, sin_tab, (size_t)max_pos * half_rot * 4, cudaMemcpyHostToDevice));
    }
    md->rope_max_pos = max_pos;
    md->half_tab = half_rot;
    return 0;
}

static int matrix_has_shape(const DeviceMatrix &w, int64_t ne0, int64_t ne1) {
    return w.type >= 0 && w.ne0 == ne0 && w.ne1 == ne1;
}

KCUDA_API int32_t kcuda_model_prepare(kcuda_model *md, int32_t max_m) {
    if (!md || !g_ready) return KCUDA_E_STATE;
    if (md->prepared) return KCUDA_E_STATE;
    if (max_m < 1) max_m = 1;
    const ModelDims dm = model_dims(md);
    const int E = dm.E, V = dm.V, F = dm.F, H = dm.H, Hkv = dm.Hkv, D = dm.D;
    const int K = dm.K, dk = dm.dk, Hk = dm.Hk, Hv = dm.Hv, dv = dm.dv, C = dm.C, max_pos = dm.max_pos;
    // required tensors and shapes
    if (!matrix_has_shape(md->tok, E, V) || !md->out_norm) return KCUDA_E_STATE;
    if (md->out.type >= 0 && !matrix_has_shape(md->out, E, V)) return KCUDA_E_STATE;
    if (md->nfull > 0) {
        if (!md->cos_tab || md->rope_max_pos < max_pos || md->half_tab < dm.half_rot) return KCUDA_E_STATE;
        if (D > 1024 || H <= 0 || Hkv <= 0 || md->hp[KCUDA_HP_N_ROT] > D) return KCUDA_E_UNSUPPORTED;
    }
    if (md->nrec > 0 && (K < 1 || dk <= 0 || dv <= 0 || Hk <= 0 || Hv <= 0)) return KCUDA_E_UNSUPPORTED;
    for (int il = 0; il < md->nl; il++) {
        Layer &l = md->L[il];
        if (!l.v[KCUDA_W_ATTN_NORM] || !l.v[KCUDA_W_POST_ATTN_NORM]) return KCUDA_E_STATE;
        if (!matrix_has_shape(l.w[KCUDA_W_FFN_GATE], E, F) || !matrix_has_shape(l.w[KCUDA_W_FFN_UP], E, F) ||
            !matrix_has_shape(l.w[KCUDA_W_FFN_DOWN], F, E))
            return KCUDA_E_STATE;
        if (l.rec) {
            if (!matrix_has_shape(l.w[KCUDA_W_SSM_QKV], E, C) || !matrix_has_shape(l.w[KCUDA_W_SSM_GATE], E, (int64_t)Hv * dv) ||
                !matrix_has_shape(l.w[KCUDA_W_SSM_BETA], E, Hv) || !matrix_has_shape(l.w[KCUDA_W_SSM_ALPHA], E, Hv) ||
                !matrix_has_shape(l.w[KCUDA_W_SSM_OUT], (int64_t)Hv * dv, E) || !l.v[KCUDA_W_SSM_A] ||
                !l.v[KCUDA_W_SSM_DT_BIAS] || !l.v[KCUDA_W_SSM_CONV1D] || !l.v[KCUDA_W_SSM_NORM])
                return KCUDA_E_STATE;
        } else {
            if (!matrix_has_shape(l.w[KCUDA_W_ATTN_Q], E, (int64_t)2 * H * D) || !matrix_has_shape(l.w[KCUDA_W_ATTN_K], E, (int64_t)Hkv * D) ||
                !matrix_has_shape(l.w[KCUDA_W_ATTN_V], E, (int64_t)Hkv * D) || !matrix_has_shape(l.w[KCUDA_W_ATTN_OUTPUT], (int64_t)H * D, E) ||
                !l.v[KCUDA_W_ATTN_Q_NORM] || !l.v[KCUDA_W_ATTN_K_NORM])
                return KCUDA_E_STATE;
        }
    }
    md->max_m = max_m;
    int maxk = E;
    if (F > maxk) maxk = F;
    if (H * D > maxk) maxk = H * D;
    if (Hv * dv > maxk) maxk = Hv * dv;
    md->ldx = (maxk + 31) / 32 * 32;
    size_t M = (size_t)max_m;
    void *p;
#define AL(field, bytes) do { CKS(dalloc(md, &p, (bytes))); md->field = (decltype(md->field))p; } while (0)
    AL(d_in, (M + 1) * 4);
    AL(x, M * E * 4);
    AL(xf, M * md->ldx * 4);
    AL(xq, M * md->ldx);
    AL(xd, M * (md->ldx / 32) * 4);
    AL(xq2, M * md->ldx);
    AL(xd2, M * (md->ldx / 32) * 4);
    AL(gate, M * F * 4);
    AL(up, M * F * 4);
    for (int s = 0; s < KC_SLOTS; s++) {
        AL(sl[s].hout, M * E * 4);
        AL(sl[s].logits, M * (size_t)V * 4);
    }
    if (md->nrec) {
        AL(qkv, M * C * 4);
        AL(z, M * Hv * dv * 4);
        AL(beta, M * Hv * 4);
        AL(alpha, M * Hv * 4);
        AL(ybuf, M * Hv * dv * 4);
        md->ring_rows = K - 1 + max_m;
        AL(ring, (size_t)md->nrec * md->ring_rows * C * 4);
        AL(ssm, (size_t)md->nrec * Hv * dv * dk * 4);
        const size_t dsm = dn_smem(max_m, dk);
        if (dsm > 48 * 1024) {
            CK(cudaFuncSetAttribute(k_deltanet, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dsm));
        }
    }
    if (md->nfull) {
        AL(q_gate, M * 2 * H * D * 4);
        AL(k_new, M * Hkv * D * 4);
        AL(v_new, M * Hkv * D * 4);
        AL(q_rope, M * H * D * 4);
        AL(attn_out, M * H * D * 4);
        AL(scores, M * H * (size_t)max_pos * 4);
        AL(split_max, M * H * KC_ATT_SPLITS * 4);
        AL(splits_done, M * H * 4);
        AL(k_cache, (size_t)md->nfull * max_pos * Hkv * D * 4);
        AL(v_cache, (size_t)md->nfull * max_pos * Hkv * D * 4);
    }
#undef AL
    for (Slot &s : md->sl) {
        CK(cudaMallocHost((void **)&s.h_in, (M + 1) * 4));
        CK(cudaMallocHost((void **)&s.pin_hout, M * E * 4));
        CK(cudaMallocHost((void **)&s.pin_logits, M * (size_t)V * 4));
        for (int i = 0; i < KC_LM_PIECES; i++) CK(cudaEventCreateWithFlags(&s.copied[i], cudaEventDisableTiming));
    }
    for (int i = 0; i < KC_LM_PIECES; i++) {
        CK(cudaEventCreateWithFlags(&md->lm_piece_done[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&md->piece_fork[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&md->piece_join, cudaEventDisableTiming));
    if (!md->piece_stream) CK(cudaStreamCreateWithFlags(&md->piece_stream, cudaStreamNonBlocking));
    if (!md->copy_stream) CK(cudaStreamCreateWithFlags(&md->copy_stream, cudaStreamNonBlocking));
    if (KC_COPY_THREADS > 0 && md->copy_threads.empty()) {
        try {
            for (int i = 1; i <= KC_COPY_THREADS; i++) md->copy_threads.emplace_back(copy_worker, md, i);
        } catch (...) {
            copy_threads_stop(md); // run with the caller's thread alone
            md->copy_stop = 0;
        }
    }
    md->opt_graph = g_opt_graph;
    md->opt_graph_m = g_opt_graph_m;
    // Warm-up, outside any request window: one pass for each kernel instance the steps use
    // (gemv row tiles 1, 2, 4, 8), so that lazy module loading and first-launch costs do not
    // land in the first request. kcuda_seq_reset zeroes the state these passes leave behind.
    memset(md->sl[0].h_in, 0, (M + 1) * 4);
    CK(cudaMemcpyAsync(md->d_in, md->sl[0].h_in, (M + 1) * 4, cudaMemcpyHostToDevice, g_stream));
    const int wm[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        int m = wm[i] <= max_m ? wm[i] : (i > 0 && wm[i - 1] < max_m ? max_m : 0);
        if (m > 0) CKS(forward(md, m, 0));
    }
    CK(cudaStreamSynchronize(g_stream));
    CKS(timeline_prepare(md));
    md->prepared = 1;
    return 0;
}

KCUDA_API int32_t kcuda_seq_reset(kcuda_model *md) {
    if (!md || !md->prepared || !g_ready) return KCUDA_E_STATE;
    const ModelDims dm = model_dims(md);
    const int Hkv = dm.Hkv, D = dm.D, max_pos = dm.max_pos, dk = dm.dk, Hv = dm.Hv, dv = dm.dv, C = dm.C;
    if (md->nfull) {
        CK(cudaMemsetAsync(md->k_cache, 0, (size_t)md->nfull * max_pos * Hkv * D * 4, g_stream));
        CK(cudaMemsetAsync(md->v_cache, 0, (size_t)md->nfull * max_pos * Hkv * D * 4, g_stream));
    }
    if (md->nrec) {
        CK(cudaMemsetAsync(md->ring, 0, (size_t)md->nrec * md->ring_rows * C * 4, g_stream));
        CK(cudaMemsetAsync(md->ssm, 0, (size_t)md->nrec * Hv * dv * dk * 4, g_stream));
    }
    CK(cudaStreamSynchronize(g_stream));
    // graphs: captured here (never in a step), each behind its own gate
    md->opt_graph = g_opt_graph;
    md->opt_graph_m = g_opt_graph_m;
    for (int s = 0; s < KC_SLOTS; s++) {
        Slot &sl = md->sl[s];
        if (md->opt_graph && !sl.graph_m1) CKS(capture(md, 1, s, &sl.graph_m1));
        if (md->opt_graph_m) {
            for (int m = 2; m <= md->max_m; m++)
                if (!sl.graphs_m.count(m)) {
                    cudaGraphExec_t ge = nullptr;
                    CKS(capture(md, m, s, &ge));
                    sl.graphs_m[m] = ge;
                }
        }
    }
    return 0;
}


KCUDA_API int32_t kcuda_model_counters(kcuda_model *md, int64_t *out, int32_t n) {
    if (!md || !out) return KCUDA_E_ARG;
    for (int i = 0; i < n; i++) out[i] = i < KCUDA_C_COUNT ? md->counters[i] : 0;
    return 0;
}

KCUDA_API void kcuda_model_free(kcuda_model *md) {
    if (!md) return;
    if (g_ready) {
        cudaStreamSynchronize(g_stream);
        if (md->copy_stream) cudaStreamSynchronize(md->copy_stream);
    }
    model_free(md);
}

} // extern "C"
