// kcuda_probe.cpp - a developer probe of the module alone (no engine, no model file): builds a
// random-weight model of a given shape, then checks graph == stream, M-row == M=1 sequential,
// per-M graphs == stream, the prompt call (kcuda_prompt: passes back to back, M=1 and M rows,
// stream and graphs) == M=1, gemm_gw against a scalar CPU reference (bitwise), and times the M=1
// step (graph on / off) and M-row prefill. Not shipped; links the module directly.
//
//   kcuda_probe [--shape tiny|0.8b] [--type q8_0|q4_0] [--steps N] [--mt M] [--iters K]
#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include "kite_cuda.h"
#include "kite_math.h"

extern "C" {
#define KP_DECL(ret, name, params) ret name params;
KCUDA_ENTRY_POINTS(KP_DECL)
#undef KP_DECL
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}
static float frand(float a) { return ((float)(rnd() & 0xffffff) / 16777216.0f * 2.0f - 1.0f) * a; }

static std::vector<uint8_t> qmat(int type, int64_t k, int64_t n, float scale) {
    int64_t nb = k / 32 * n;
    std::vector<uint8_t> v((size_t)nb * (type == KCUDA_T_Q8_0 ? 34 : 18));
    uint8_t *p = v.data();
    for (int64_t b = 0; b < nb; b++) {
        uint16_t d = kite_f32_to_f16(scale * (0.5f + 0.5f * (float)(rnd() & 255) / 255.0f));
        p[0] = (uint8_t)d;
        p[1] = (uint8_t)(d >> 8);
        if (type == KCUDA_T_Q8_0) {
            for (int i = 0; i < 32; i++) p[2 + i] = (uint8_t)(int8_t)((int)(rnd() % 255) - 127);
            p += 34;
        } else {
            for (int i = 0; i < 16; i++) p[2 + i] = (uint8_t)rnd();
            p += 18;
        }
    }
    return v;
}

static double now_ms(void) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static int fails = 0;
static void check(const char *what, const std::vector<float> &a, const std::vector<float> &b) {
    int same = a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * 4) == 0;
    if (!same) {
        size_t n = 0;
        int64_t maxulp = 0;
        for (size_t i = 0; i < a.size() && i < b.size(); i++) {
            int32_t ia, ib;
            memcpy(&ia, &a[i], 4);
            memcpy(&ib, &b[i], 4);
            if (ia != ib) {
                n++;
                int64_t d = (int64_t)ia - (int64_t)ib;
                if (d < 0) d = -d;
                if (d > maxulp) maxulp = d;
            }
        }
        printf("FAIL %s: %zu of %zu differ, max ulp %lld\n", what, n, a.size(), (long long)maxulp);
        fails++;
    } else {
        printf("PASS %s (%zu floats identical)\n", what, a.size());
    }
}

int main(int argc, char **argv) {
    std::string shape = "tiny", tname = "q8_0";
    int steps = 16, mt = 4, iters = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
        else if (!strcmp(argv[i], "--type")) tname = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mt")) mt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    }
    int type = tname == "q4_0" ? KCUDA_T_Q4_0 : KCUDA_T_Q8_0;
    char note[512];
    int st = kcuda_init(note, sizeof note);
    printf("init %d: %s\n", st, note);
    if (st) return 2;
    int32_t hp[KCUDA_HP_COUNT];
    if (shape == "0.8b") {
        int v[] = {24, 1024, 248320, 3584, 8, 2, 256, 64, 4, 128, 16, 16, 128, 4096};
        memcpy(hp, v, sizeof hp);
    } else {
        int v[] = {4, 64, 512, 128, 4, 2, 32, 8, 4, 32, 2, 4, 32, 256};
        memcpy(hp, v, sizeof hp);
    }
    const int nl = hp[0], E = hp[1], V = hp[2], F = hp[3], H = hp[4], Hkv = hp[5], D = hp[6];
    const int K = hp[8], dk = hp[9], Hk = hp[10], Hv = hp[11], dv = hp[12], maxp = hp[13];
    const int C = 2 * Hk * dk + Hv * dv;
    std::vector<int32_t> rec(nl);
    for (int i = 0; i < nl; i++) rec[i] = (i + 1) % 4 != 0;
    kcuda_model *md = kcuda_model_create(hp, KCUDA_HP_COUNT, rec.data(), 1e-6f);
    if (!md) { printf("create failed\n"); return 2; }
    int64_t wbytes = 0;
    auto setm = [&](int layer, int role, int64_t k, int64_t n, float sc) {
        auto w = qmat(type, k, n, sc);
        wbytes += (int64_t)w.size();
        int s = kcuda_model_set_tensor(md, layer, role, type, w.data(), k, n, (int64_t)w.size());
        if (s) { printf("set_tensor %d %d: %d\n", layer, role, s); exit(2); }
    };
    auto setv = [&](int layer, int role, int64_t n0, int64_t n1, float base, float a) {
        std::vector<float> v((size_t)(n0 * n1));
        for (auto &x : v) x = base + frand(a);
        int s = kcuda_model_set_tensor(md, layer, role, KCUDA_T_F32, v.data(), n0, n1, (int64_t)v.size() * 4);
        if (s) { printf("set_tensor %d %d: %d\n", layer, role, s); exit(2); }
    };
    setm(-1, KCUDA_W_TOKEN_EMBD, E, V, 0.02f / 127);
    setv(-1, KCUDA_W_OUTPUT_NORM, E, 1, 1.0f, 0.1f);
    for (int il = 0; il < nl; il++) {
        setv(il, KCUDA_W_ATTN_NORM, E, 1, 1.0f, 0.1f);
        setv(il, KCUDA_W_POST_ATTN_NORM, E, 1, 1.0f, 0.1f);
        setm(il, KCUDA_W_FFN_GATE, E, F, 0.05f / 127);
        setm(il, KCUDA_W_FFN_UP, E, F, 0.05f / 127);
        setm(il, KCUDA_W_FFN_DOWN, F, E, 0.05f / 127);
        if (rec[il]) {
            setm(il, KCUDA_W_SSM_QKV, E, C, 0.05f / 127);
            setm(il, KCUDA_W_SSM_GATE, E, (int64_t)Hv * dv, 0.05f / 127);
            setm(il, KCUDA_W_SSM_BETA, E, Hv, 0.05f / 127);
            setm(il, KCUDA_W_SSM_ALPHA, E, Hv, 0.05f / 127);
            setm(il, KCUDA_W_SSM_OUT, (int64_t)Hv * dv, E, 0.05f / 127);
            setv(il, KCUDA_W_SSM_A, Hv, 1, -1.0f, 0.5f);
            setv(il, KCUDA_W_SSM_DT_BIAS, Hv, 1, 0.0f, 0.5f);
            setv(il, KCUDA_W_SSM_CONV1D, K, C, 0.0f, 0.5f);
            setv(il, KCUDA_W_SSM_NORM, dv, 1, 1.0f, 0.1f);
        } else {
            setm(il, KCUDA_W_ATTN_Q, E, (int64_t)2 * H * D, 0.05f / 127);
            setm(il, KCUDA_W_ATTN_K, E, (int64_t)Hkv * D, 0.05f / 127);
            setm(il, KCUDA_W_ATTN_V, E, (int64_t)Hkv * D, 0.05f / 127);
            setm(il, KCUDA_W_ATTN_OUTPUT, (int64_t)H * D, E, 0.05f / 127);
            setv(il, KCUDA_W_ATTN_Q_NORM, D, 1, 1.0f, 0.1f);
            setv(il, KCUDA_W_ATTN_K_NORM, D, 1, 1.0f, 0.1f);
        }
    }
    int half = hp[7] / 2;
    std::vector<float> ct((size_t)maxp * half), stb((size_t)maxp * half);
    for (int p = 0; p < maxp; p++)
        for (int i = 0; i < half; i++) {
            double f = kite_pow(1e7, -2.0 * i / hp[7]);
            ct[(size_t)p * half + i] = (float)kite_cos(p * f);
            stb[(size_t)p * half + i] = (float)kite_sin(p * f);
        }
    if (kcuda_model_set_rope(md, ct.data(), stb.data(), maxp, half)) { printf("rope failed\n"); return 2; }
    int maxm = mt > 8 ? mt : 8;
    if ((st = kcuda_model_prepare(md, maxm))) { printf("prepare %d\n", st); return 2; }
    printf("model %s %s: weight bytes %.1f MB\n", shape.c_str(), tname.c_str(), wbytes / 1e6);

    int P = steps;
    std::vector<int32_t> toks(P);
    for (auto &t : toks) t = (int32_t)(rnd() % (uint32_t)V);
    // every run: outputs for the P rows, zeroed, and a new sequence
    auto fresh = [&](std::vector<float> &h, std::vector<float> &lg) {
        h.assign((size_t)P * E, 0.f);
        lg.assign((size_t)P * V, 0.f);
        if (kcuda_seq_reset(md)) { printf("reset failed\n"); exit(2); }
    };
    auto run1 = [&](std::vector<float> &h, std::vector<float> &lg, double *ms) {
        fresh(h, lg);
        double t0 = now_ms();
        for (int p = 0; p < P; p++) {
            int s = kcuda_step(md, toks[p], p, &h[(size_t)p * E], &lg[(size_t)p * V]);
            if (s) { printf("step failed %d\n", s); exit(2); }
        }
        if (ms) *ms = (now_ms() - t0) / P;
    };
    auto runm = [&](int m, std::vector<float> &h, std::vector<float> &lg, double *ms) {
        fresh(h, lg);
        double t0 = now_ms();
        for (int p = 0; p < P; p += m) {
            int mm = P - p < m ? P - p : m;
            int s = kcuda_step_m(md, &toks[p], mm, p, &h[(size_t)p * E], &lg[(size_t)p * V]);
            if (s) { printf("step_m failed %d\n", s); exit(2); }
        }
        if (ms) *ms = (now_ms() - t0) / P;
    };
    // the whole prompt in one call, passes of m rows back to back
    auto runp = [&](int m, std::vector<float> &h, std::vector<float> &lg) {
        fresh(h, lg);
        int s = kcuda_prompt(md, toks.data(), P, m, 0, h.data(), lg.data(), P);
        if (s) { printf("prompt failed %d\n", s); exit(2); }
    };
    std::vector<float> hg, lgg, hs, lgs, hm, lgm, hmg, lgmg;
    double tg = 1e30, ts = 1e30, tm = 1e30, t1 = 1e30, x;
    kcuda_set_option(KCUDA_OPT_GRAPH, 1);
    kcuda_set_option(KCUDA_OPT_GRAPH_M, 0);
    for (int it = 0; it < iters; it++) { run1(hg, lgg, &x); if (x < tg) tg = x; }
    kcuda_set_option(KCUDA_OPT_GRAPH, 0);
    for (int it = 0; it < iters; it++) { run1(hs, lgs, &x); if (x < ts) ts = x; }
    // h_out and logits of a run against those of another
    auto check2 = [&](const std::string &what, const std::vector<float> &h, const std::vector<float> &lg,
                      const std::vector<float> &h0, const std::vector<float> &lg0) {
        check((what + " h_out").c_str(), h, h0);
        check((what + " logits").c_str(), lg, lg0);
    };
    check2("graph == stream", hg, lgg, hs, lgs);
    kcuda_set_option(KCUDA_OPT_GRAPH, 1); // M=1 gate on must not refuse the M-row entry
    for (int it = 0; it < iters; it++) { runm(mt, hm, lgm, &x); if (x < tm) tm = x; }
    check2("M-row == M=1", hm, lgm, hs, lgs);
    kcuda_set_option(KCUDA_OPT_GRAPH_M, 1);
    runm(mt, hmg, lgmg, nullptr);
    check2("M-row graph == M=1", hmg, lgmg, hs, lgs);
    runp(mt, hmg, lgmg);
    check2("prompt, M rows, per-M graphs == M=1", hmg, lgmg, hs, lgs);
    kcuda_set_option(KCUDA_OPT_GRAPH_M, 0);
    runp(mt, hmg, lgmg);
    check2("prompt, M rows == M=1", hmg, lgmg, hs, lgs);
    runp(1, hmg, lgmg);
    check2("prompt, M=1 graph == M=1", hmg, lgmg, hs, lgs);
    for (int it = 0; it < iters; it++) { runm(1, hm, lgm, &x); if (x < t1) t1 = x; }
    int64_t c[KCUDA_C_COUNT];
    kcuda_model_counters(md, c, KCUDA_C_COUNT);
    printf("counters: steps %lld captures %lld replays %lld stream %lld mrow %lld mrow_graph %lld\n",
           (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3], (long long)c[4], (long long)c[5]);

    // gemm_gw vs scalar CPU reference (bitwise)
    {
        int n = 300, k = 1024, m = 3;
        auto w = qmat(type, k, n, 0.01f);
        std::vector<float> xv((size_t)m * k);
        for (auto &a : xv) a = frand(2.0f);
        std::vector<int8_t> q((size_t)m * k);
        std::vector<float> d((size_t)m * k / 32);
        for (int r = 0; r < m; r++)
            for (int b = 0; b < k / 32; b++) {
                const float *xb = &xv[(size_t)r * k + b * 32];
                float amax = 0;
                for (int i = 0; i < 32; i++) amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
                float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
                for (int i = 0; i < 32; i++) {
                    float v = rintf(xb[i] * id);
                    v = v > 127.f ? 127.f : (v < -127.f ? -127.f : v);
                    q[(size_t)r * k + b * 32 + i] = (int8_t)v;
                }
                d[(size_t)r * k / 32 + b] = db;
            }
        std::vector<float> yg((size_t)m * n), yc((size_t)m * n);
        int bs = type == KCUDA_T_Q8_0 ? 34 : 18;
        for (int r = 0; r < m; r++)
            for (int o = 0; o < n; o++) {
                float s[32] = {0};
                for (int b = 0; b < k / 32; b++) {
                    const uint8_t *blk = &w[((size_t)o * (k / 32) + b) * bs];
                    const int8_t *qb = &q[(size_t)r * k + b * 32];
                    int32_t is = 0;
                    if (type == KCUDA_T_Q8_0)
                        for (int i = 0; i < 32; i++) is += (int8_t)blk[2 + i] * qb[i];
                    else
                        for (int j = 0; j < 16; j++)
                            is += ((blk[2 + j] & 15) - 8) * qb[j] + ((blk[2 + j] >> 4) - 8) * qb[j + 16];
                    float scale = kite_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * d[(size_t)r * k / 32 + b];
                    s[b & 31] = s[b & 31] + (float)is * scale;
                }
                yc[(size_t)r * n + o] = kite_sum32_finish(s);
            }
        st = kcuda_gemm_gw(type, w.data(), (int64_t)w.size(), n, k, q.data(), d.data(), m, yg.data());
        if (st) { printf("FAIL gemm_gw status %d\n", st); fails++; }
        else check("gemm_gw == CPU scalar", yg, yc);
    }
    double gb = wbytes / 1e9;
    printf("TIMING shape=%s type=%s steps=%d: M=1 graph %.4f ms/token (%.1f tok/s, %.1f GB/s weights), "
           "stream %.4f ms/token (%.1f tok/s); prefill M=%d %.4f ms/row (%.1f rows/s) vs M=1 %.4f ms/row "
           "(%.1f rows/s): x%.2f\n",
           shape.c_str(), tname.c_str(), P, tg, 1000 / tg, gb / (tg / 1000), ts, 1000 / ts, mt, tm, 1000 / tm, t1,
           1000 / t1, t1 / tm);
    kcuda_model_free(md);
    kcuda_shutdown();
    printf("%d failed\n", fails);
    return fails ? 1 : 0;
}
