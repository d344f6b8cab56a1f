/* selftest.c - `kite selftest`: the reader on built-in byte strings (good and bad), half and
 * bfloat16 conversion, quant round trips, the math header against libm, every kernel against
 * its scalar reference byte for byte, thread-count independence, and the forward pass of a
 * small random in-memory model (M rows vs one row, threads, scalar vs SIMD).
 * Prints "PASS name" / "FAIL name: why" per check and closes with "N passed, M failed". */
#include "selftest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "gemm.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "kernels.h"
#include "kite_math.h"
#include "model.h"
#include "platform.h"
#include "session.h"
#include "threads.h"
#include "vec_math.h"

static int n_pass, n_fail;

static void check(int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("PASS %s\n", name);
        n_pass++;
        return;
    }
    char why[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("FAIL %s: ", name);
    kt_fputs_one_line(why, stdout); /* a --model path may hold a newline */
    printf("\n");
    n_fail++;
}

/* ---- deterministic random numbers ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_uniform(float lo, float hi) { /* [lo, hi) */
    return lo + (hi - lo) * (float)(rng_u32() >> 8) * (1.0f / 16777216.0f);
}

/* A tensor [ne0, ne1] of random values in [lo, hi), drawn row by row. */
static void tensor(gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1, float lo,
                   float hi) {
    float *values = malloc((size_t)(ne0 * ne1) * sizeof(float));
    if (!values) {
        fprintf(stderr, "kite: error: out of memory in selftest\n");
        exit(1);
    }
    for (int64_t i = 0; i < ne0 * ne1; i++)
        values[i] = rng_uniform(lo, hi);
    gguf_writer_tensor(w, name, type, ne0, ne1, values);
    free(values);
}

/* ---- the reader ------------------------------------------------------------------------------- */

/* A small GGUF: two key-values, one tensor [32, 2] F32 (256 bytes). Field offsets reported. */
typedef struct small_gguf {
    kt_buf b;
    size_t off_kv_count, off_kv_type, off_str_len, off_n_dims, off_dim0, off_ttype, off_toff;
} small_gguf;

static void make_small(small_gguf *s) {
    memset(s, 0, sizeof *s);
    kt_buf *b = &s->b;
    buf_put(b, "GGUF", 4);
    buf_put_u32(b, 3);
    buf_put_u64(b, 1);                        /* tensors */
    s->off_kv_count = b->n;
    buf_put_u64(b, 2);                        /* key-values */
    s->off_str_len = b->n;
    buf_put_str(b, "general.architecture");
    s->off_kv_type = b->n;
    buf_put_u32(b, GGUF_V_STRING);
    buf_put_str(b, "test");
    buf_put_str(b, "test.list");
    buf_put_u32(b, GGUF_V_ARRAY);
    buf_put_u32(b, GGUF_V_I32);
    buf_put_u64(b, 3);
    buf_put_u32(b, 7); buf_put_u32(b, (uint32_t)-8); buf_put_u32(b, 9);
    buf_put_str(b, "w");
    s->off_n_dims = b->n;
    buf_put_u32(b, 2);
    s->off_dim0 = b->n;
    buf_put_u64(b, 32);
    buf_put_u64(b, 2);
    s->off_ttype = b->n;
    buf_put_u32(b, GGUF_T_F32);
    s->off_toff = b->n;
    buf_put_u64(b, 0);
    static const uint8_t zeros[32] = {0};
    buf_put(b, zeros, (32 - b->n % 32) % 32);
    for (int i = 0; i < 64; i++)
        buf_put_u32(b, kite_f32_bits((float)i));
}

/* Open a copy of exactly n bytes (so that ASan sees any read past the end). */
static int try_open(const uint8_t *p, size_t n, char *err, size_t errlen) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    gguf_file g;
    int rc = gguf_open_memory(&g, copy, n, err, errlen);
    if (rc == 0)
        gguf_close(&g);
    free(copy);
    return rc;
}

static void test_reader(void) {
    small_gguf s;
    make_small(&s);
    char err[512];
    gguf_file g;
    int rc = gguf_open_memory(&g, s.b.p, s.b.n, err, sizeof err);
    int ok = rc == 0;
    if (ok) {
        char arch[32];
        const gguf_tensor *t = gguf_find_tensor(&g, "w");
        const gguf_kv *lst = gguf_find_kv(&g, "test.list");
        int64_t v1 = 0;
        ok = gguf_get_str(&g, "general.architecture", arch, sizeof arch) == 0 &&
             strcmp(arch, "test") == 0 && t && t->ne[0] == 32 && t->ne[1] == 2 &&
             t->nbytes == 256 && ((const float *)t->data)[5] == 5.0f && lst &&
             gguf_get_arr_int(&g, lst, 1, &v1) == 0 && v1 == -8;
        gguf_close(&g);
    }
    check(ok, "gguf_good", "%s", rc ? err : "values read back wrong");

    /* truncated at several points: each must fail cleanly */
    size_t cuts[] = {0, 3, 4, 7, 12, 20, 23, s.off_str_len + 10, s.off_kv_type + 2,
                     s.off_n_dims + 2, s.off_toff + 4, s.b.n - 200, s.b.n - 1};
    int all = 1;
    char first[512] = "";
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        if (try_open(s.b.p, cuts[i], err, sizeof err) == 0) {
            all = 0;
            snprintf(first, sizeof first, "cut at %zu accepted", cuts[i]);
        }
    }
    check(all, "gguf_truncated", "%s", first);

    struct {
        const char *name;
        size_t off;
        int is64;
        uint64_t val;
        const char *expect; /* substring of the message */
    } bad[] = {
        {"gguf_bad_magic", 0, 0, 0x46554746u, "magic"},
        {"gguf_bad_version", 4, 0, 99, "version"},
        {"gguf_huge_tensor_count", 8, 1, 1ull << 60, "tensor count"},
        {"gguf_huge_kv_count", s.off_kv_count, 1, 1ull << 62, "metadata count"},
        {"gguf_huge_string", s.off_str_len, 1, 1ull << 40, "string length"},
        {"gguf_unknown_kv_type", s.off_kv_type, 0, 99, "unknown value type"},
        {"gguf_unknown_tensor_type", s.off_ttype, 0, 99, "unsupported tensor type"},
        {"gguf_too_many_dims", s.off_n_dims, 0, 5, "dimensions"},
        {"gguf_zero_dim", s.off_dim0, 1, 0, "zero"},
        {"gguf_overflow_dims", s.off_dim0, 1, 1ull << 62, "overflow"},
        {"gguf_offset_past_end", s.off_toff, 1, 1ull << 20, "outside the file"},
        {"gguf_offset_unaligned", s.off_toff, 1, 4, "alignment"},
        {"gguf_offset_huge", s.off_toff, 1, ~0ull - 31, "outside the file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kt_buf c = {0};
        buf_put(&c, s.b.p, s.b.n);
        if (bad[i].is64)
            buf_set_u64(&c, bad[i].off, bad[i].val);
        else
            buf_set_u32(&c, bad[i].off, (uint32_t)bad[i].val);
        err[0] = '\0';
        rc = try_open(c.p, c.n, err, sizeof err);
        check(rc != 0 && strstr(err, bad[i].expect) != NULL, bad[i].name,
              "rc %d, message '%s' (expected '%s')", rc, err, bad[i].expect);
        free(c.p);
    }
    free(s.b.p);
}

/* ---- conversions, quantization, math -------------------------------------------------------- */

static void test_half(void) {
    int bad = -1;
    for (uint32_t h = 0; h < 65536 && bad < 0; h++) {
        float f = kite_f16_to_f32((uint16_t)h);
        if (f != f)
            continue;
        if (kite_f32_to_f16(f) != h || kernels_f16((uint16_t)h) != f)
            bad = (int)h;
    }
    int ok = bad < 0 && kite_f16_to_f32(0x3c00) == 1.0f && kite_f16_to_f32(0x7bff) == 65504.0f &&
             kite_f16_to_f32(0x0001) == 5.9604644775390625e-8f &&
             kite_f32_to_f16(65520.0f) == 0x7c00 && kite_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00 &&
             kite_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02 && kite_f32_to_f16(2.98e-8f) == 0x0000 &&
             kite_f32_to_f16(2.99e-8f) == 0x0001;
    check(ok, "f16_conversion", "first bad half 0x%04x", bad);
    bad = -1;
    for (uint32_t h = 0; h < 65536 && bad < 0; h++) {
        float f = kite_bf16_to_f32((uint16_t)h);
        if (f != f)
            continue;
        if (kite_f32_to_bf16(f) != h)
            bad = (int)h;
    }
    ok = bad < 0 && kite_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80 &&
         kite_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82;
    check(ok, "bf16_conversion", "first bad bfloat16 0x%04x", bad);
}

static void test_quant(void) {
    float x[256], y[256];
    int8_t q[256];
    float d[8];
    for (int i = 0; i < 256; i++)
        x[i] = rng_uniform(-3.0f, 3.0f);
    x[7] = 0.0f;
    for (int i = 32; i < 64; i++)
        x[i] = 0.0f; /* an all-zero block: d = 0, q = 0 */
    quantize_row_act(x, 256, q, d);
    float worst = 0.0f;
    int ok = d[1] == 0.0f;
    for (int b = 0; b < 8; b++) {
        /* q rounds x to steps of amax / 127; d is that step rounded to f16 */
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
        const float step = amax / 127.0f;
        if (d[b] != kite_f16_to_f32(kite_f32_to_f16(step)))
            ok = 0;
        for (int i = 0; i < 32; i++) {
            float e = fabsf(x[b * 32 + i] - (float)q[b * 32 + i] * step);
            if (e > 0.5f * step * 1.0001f)
                ok = 0;
            worst = e > worst ? e : worst;
        }
    }
    check(ok, "quant_act_round_trip", "error %g above step/2, or d not the step in f16", worst);

    /* weight blocks written by the selftest's quantizers dequantize within one step */
    for (int t = 0; t < 2; t++) {
        int type = t ? GGUF_T_Q4_0 : GGUF_T_Q8_0;
        kt_buf b = {0};
        gguf_put_row(&b, type, x, 256);
        dequant_row(type, b.p, 256, y);
        ok = 1;
        worst = 0.0f;
        for (int i = 0; i < 256; i++) {
            int blk = i / 32;
            float dd = fabsf(kernels_f16((uint16_t)(b.p[blk * (t ? 18 : 34)] |
                                                  (b.p[blk * (t ? 18 : 34) + 1] << 8))));
            float e = fabsf(x[i] - y[i]);
            worst = e > worst ? e : worst;
            /* Q8_0: half a step; Q4_0: a full step (the far end of a block clamps at 15) */
            if (e > dd * (t ? 1.0f : 0.5f) + 1e-3f * fabsf(x[i]) + 1e-6f)
                ok = 0;
        }
        check(ok, t ? "quant_q4_0_round_trip" : "quant_q8_0_round_trip", "error %g", worst);
        free(b.p);
    }
}

static double ulp_err(float got, double ref) {
    if (ref == 0.0)
        return got == 0.0f ? 0.0 : 1e9;
    int e;
    frexp(ref, &e);
    double ulp = ldexp(1.0, e - 24);
    if (fabs(ref) < 1.17549435e-38)
        ulp = ldexp(1.0, -149);
    return fabs((double)got - ref) / ulp;
}

static void test_math(void) {
    double w = 0.0, wx = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double e = ulp_err(kite_expf(x), exp((double)x));
        if (e > w) { w = e; wx = x; }
    }
    check(w <= 2.0, "math_expf", "%.2f ulp at %g (bound 2)", w, wx);
    w = 0.0;
    for (int i = 0; i < 200000; i++) {
        float x = kite_bits_f32(0x00800000u + (uint32_t)((uint64_t)i * (0x7f000000u / 200000u)));
        double e = ulp_err(kite_logf(x), log((double)x));
        if (e > w) { w = e; wx = x; }
    }
    check(w <= 2.0, "math_logf", "%.2f ulp at %g (bound 2)", w, wx);
    w = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -0.99f + 40.0f * (float)i / 200000.0f;
        if (i % 2)
            x = x * 1e-3f;
        double e = ulp_err(kite_log1pf(x), log1p((double)x));
        if (e > w) { w = e; wx = x; }
    }
    check(w <= 4.0, "math_log1pf", "%.2f ulp at %g (bound 4)", w, wx);
    int ok = kite_expf(-200.0f) == 0.0f && isinf(kite_expf(100.0f)) && kite_expf(0.0f) == 1.0f &&
             kite_logf(1.0f) == 0.0f && kite_sigmoidf(0.0f) == 0.5f &&
             kite_softplusf(30.0f) == 30.0f && kite_rsqrtf(4.0f) == 0.5f;
    check(ok, "math_special_values", "a special value is off");
    w = 0.0;
    for (int i = 0; i <= 100000; i++) {
        double x = -1.0e4 + 2.0e4 * (double)i / 100000.0;
        double e1 = fabs(kite_sin(x) - sin(x)), e2 = fabs(kite_cos(x) - cos(x));
        if (e1 > w) { w = e1; wx = x; }
        if (e2 > w) { w = e2; wx = x; }
    }
    check(w <= 1e-15 * 8, "math_sin_cos", "%.3g absolute at %g (bound 8e-15)", w, wx);
    w = 0.0;
    for (int i = 0; i < 64; i++) {
        double bases[3] = {10000.0, 1.0e7, 500000.0};
        for (int k = 0; k < 3; k++) {
            double ref = pow(bases[k], -2.0 * i / 128.0);
            double e = fabs(kite_pow(bases[k], -2.0 * i / 128.0) - ref) / ref;
            if (e > w) { w = e; wx = i; }
        }
    }
    check(w <= 1e-14, "math_pow", "%.3g relative at i=%g (bound 1e-14)", w, wx);
}

/* ---- kernels ---------------------------------------------------------------------------------- */

/* The dispatched quantized dots at one SIMD level against the scalar kernels (bytes) and a
 * double reference; the activations are prepared under that level. */
static void test_kernels_quant(int level, const float *x, const float *wf, int n) {
    int8_t xq[32 * 72], xp[32 * 72];
    float xd[72], y2[2];
    int32_t xs[72];
    kernels_use_simd(level);
    quantize_row_act(x, n, xq, xd);
    act_prep_q4(xq, n / 32, xs, xp);
    const char *lname = level >= KT_SIMD_AVX512 ? "avx512" : level ? "avx2" : "dispatch";
    for (int t = 0; t < 2; t++) {
        const int type = t ? GGUF_T_Q4_0 : GGUF_T_Q8_0;
        kt_buf b = {0};
        gguf_put_row(&b, type, wf, n);
        gguf_put_row(&b, type, x, n); /* a second row for the two-row kernels */
        const size_t rb = (size_t)gguf_row_bytes(type, n);
        float *wd = malloc(sizeof(float) * (size_t)n);
        dequant_row(type, b.p, n, wd);
        int lens[5] = {n, 37 * 32, 31 * 32, 8 * 32, 32};
        int same = 1;
        double rel = 0.0;
        for (int li = 0; li < 5; li++) {
            int nb = lens[li] / 32;
            float a = type == GGUF_T_Q8_0 ? dot_q8_0(b.p, xq, xd, nb) : dot_q4_0(b.p, xq, xd, xs, xp, nb);
            float s = type == GGUF_T_Q8_0 ? dot_q8_0_scalar(b.p, xq, xd, nb) : dot_q4_0_scalar(b.p, xq, xd, nb);
            float s2 = type == GGUF_T_Q8_0 ? dot_q8_0_scalar(b.p + rb, xq, xd, nb)
                                          : dot_q4_0_scalar(b.p + rb, xq, xd, nb);
            if (type == GGUF_T_Q8_0)
                dot_q8_0_rows(b.p, rb, 2, xq, xd, nb, y2);
            else
                dot_q4_0_rows(b.p, rb, 2, xq, xd, xs, xp, nb, y2);
            same &= kite_f32_bits(a) == kite_f32_bits(s) && kite_f32_bits(y2[0]) == kite_f32_bits(s) &&
                    kite_f32_bits(y2[1]) == kite_f32_bits(s2);
            double ref = 0.0, mag = 0.0;
            for (int i = 0; i < lens[li]; i++) {
                ref += (double)wd[i] * (double)xq[i] * (double)xd[i / 32];
                mag += fabs((double)wd[i] * (double)xq[i] * (double)xd[i / 32]);
            }
            double r = fabs((double)s - ref) / (mag > 0 ? mag : 1.0);
            rel = r > rel ? r : rel;
        }
        char name[64];
        snprintf(name, sizeof name, "dot_%s_%s_vs_scalar", t ? "q4_0" : "q8_0", lname);
        check(same, name, "bytes differ");
        if (level == kernels_simd_max()) {
            snprintf(name, sizeof name, "dot_%s_vs_double", t ? "q4_0" : "q8_0");
            check(rel < 1e-5, name, "relative error %.3g", rel);
        }
        free(wd);
        free(b.p);
    }
    kernels_use_simd(KT_SIMD_BEST);
}

/* Element-wise SIMD steps against their scalar forms: activation quantization and SiLU, over
 * values that reach every range check of kite_expf (and NaN, inf, zero). */
static void test_elementwise(const float *x, int n) {
    enum { N = 32 * 9 };
    float v[N], a[N], y1[N], y2[N], d1[9], d2[9];
    int8_t q1[N], q2[N];
    for (int i = 0; i < N; i++) {
        v[i] = i < 64 ? rng_uniform(-120.0f, 120.0f) : x[i % n] * (float)(1 + i % 7);
        a[i] = rng_uniform(-2.0f, 2.0f);
    }
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, 88.8f, -103.9f, -104.0f, 1e30f, -1e30f};
    for (int i = 0; i < (int)(sizeof special / sizeof special[0]); i++)
        v[64 + i] = special[i];
    v[80] = kite_bits_f32(0x7f800000u);
    v[81] = kite_bits_f32(0xff800000u);
    v[82] = kite_bits_f32(0x7fc00000u);
    for (int i = 96; i < 128; i++) /* one block of zeros: d = 0 */
        v[i] = 0.0f;
    v[130] = kite_bits_f32(0x7fc00000u); /* a NaN inside a block: its q is 0 */
    kernels_use_simd(KT_SIMD_BEST);
    quantize_row_act(v, N, q1, d1);
    quantize_row_act_scalar(v, N, q2, d2);
    check(memcmp(q1, q2, N) == 0 && memcmp(d1, d2, sizeof d1) == 0, "quantize_act_vs_scalar",
          "bytes differ");
    int ok = 1;
    for (int mode = 0; mode < 3; mode++) {
        for (int len = N - 3; len <= N; len += 3) {
            if (mode == 0)
                vec_silu(y1, v, len);
            else if (mode == 1)
                vec_silu_mul(y1, v, a, len);
            else
                vec_mul_silu(y1, a, v, len);
            for (int i = 0; i < len; i++) {
                y2[i] = mode == 0 ? kite_siluf(v[i]) : mode == 1 ? kite_siluf(v[i]) * a[i] : a[i] * kite_siluf(v[i]);
                /* a NaN's sign and payload follow the compiler's operand order: NaN is all we ask */
                ok &= kite_f32_bits(y1[i]) == kite_f32_bits(y2[i]) || (y1[i] != y1[i] && y2[i] != y2[i]);
            }
        }
    }
    check(ok, "silu_vs_scalar", "bytes differ");
}

/* The greedy pick at every SIMD level against the plain loop `if (v[i] > v[best]) best = i`:
 * ties, NaN (also at index 0), infinities and signed zeros, lengths around the vector widths. */
static void test_argmax(void) {
    enum { N = 4099 };
    float *v = malloc(sizeof(float) * N);
    const int lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, N};
    const float nan = kite_bits_f32(0x7fc00000u), inf = kite_bits_f32(0x7f800000u);
    int ok = 1;
    for (int trial = 0; trial < 40 && ok; trial++) {
        for (int i = 0; i < N; i++)
            v[i] = trial % 4 == 3 ? -0.0f : rng_uniform(-4.0f, 4.0f);
        if (trial % 4 == 3)
            v[(trial * 131) % N] = 0.0f;
        if (trial % 5 == 1)
            v[(trial * 977) % N] = nan;
        if (trial % 5 == 2)
            v[0] = nan;
        if (trial % 7 == 3)
            v[(trial * 613) % N] = inf, v[(trial * 389) % N] = inf;
        if (trial % 7 == 4)
            for (int i = 0; i < N; i++)
                v[i] = -inf;
        if (trial % 3 == 0) /* ties at the maximum */
            v[(trial * 37) % N] = v[(trial * 53) % N] = 4.5f;
        for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
            const int n = lens[li];
            int best = 0;
            for (int i = 1; i < n; i++)
                if (v[i] > v[best])
                    best = i;
            for (int level = 0; level <= kernels_simd_max(); level++) {
                kernels_use_simd(level);
                ok &= vec_argmax(v, n) == best;
            }
        }
    }
    kernels_use_simd(KT_SIMD_BEST);
    check(ok, "argmax_vs_loop", "a level picks another index");
    free(v);
}

static void test_kernels(void) {
    const int n = 32 * 72; /* 72 blocks: 2 x 32 + 8, no tail; shorter lengths below have tails */
    float *x = malloc(sizeof(float) * n), *wf = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        x[i] = rng_uniform(-2.0f, 2.0f);
        wf[i] = rng_uniform(-1.0f, 1.0f);
    }
    for (int level = kernels_simd_max() ? KT_SIMD_AVX2 : 0; level <= kernels_simd_max(); level++)
        test_kernels_quant(level, x, wf, n);
    test_elementwise(x, n);
    test_argmax();
    int have = (kernels_simd_max() >= KT_SIMD_AVX2);
    const char *types[3] = {"f32", "f16", "bf16"};
    int tids[3] = {GGUF_T_F32, GGUF_T_F16, GGUF_T_BF16};
    for (int t = 0; t < 3; t++) {
        kt_buf b = {0};
        gguf_put_row(&b, tids[t], wf, n);
        int lens[5] = {n, n - 3, 31 * 32, 8 * 32, 7};
        int same = 1;
        double rel = 0.0;
        for (int li = 0; li < 5; li++) {
            int len = lens[li];
            float a = 0, s = 0;
            double ref = 0.0, mag = 0.0;
            float *wd = malloc(sizeof(float) * (size_t)n);
            dequant_row(tids[t], b.p, n, wd);
            a = tids[t] == GGUF_T_F32 ? dot_f32((const float *)b.p, x, len)
                : tids[t] == GGUF_T_F16 ? dot_f16((const uint16_t *)b.p, x, len)
                                        : dot_bf16((const uint16_t *)b.p, x, len);
            s = tids[t] == GGUF_T_F32 ? dot_f32_scalar((const float *)b.p, x, len)
                : tids[t] == GGUF_T_F16 ? dot_f16_scalar((const uint16_t *)b.p, x, len)
                                        : dot_bf16_scalar((const uint16_t *)b.p, x, len);
            for (int i = 0; i < len; i++) {
                ref += (double)wd[i] * (double)x[i];
                mag += fabs((double)wd[i] * (double)x[i]);
            }
            free(wd);
            if (kite_f32_bits(a) != kite_f32_bits(s))
                same = 0;
            double r = fabs((double)s - ref) / (mag > 0 ? mag : 1.0);
            rel = r > rel ? r : rel;
        }
        char name[64];
        snprintf(name, sizeof name, "dot_%s_%s_vs_scalar", types[t], have ? "avx2" : "dispatch");
        check(same, name, "bytes differ");
        snprintf(name, sizeof name, "dot_%s_vs_double", types[t]);
        check(rel < 1e-5, name, "relative error %.3g", rel);
        free(b.p);
    }
    /* the fused delta-rule passes: SIMD against scalar, state and result */
    int same = 1;
    for (int len = 5; len <= 133; len += 64) {
        float s1[133], s2[133];
        for (int i = 0; i < len; i++)
            s1[i] = s2[i] = rng_uniform(-1.0f, 1.0f);
        float r1 = dot_scale_f32(s1, 0.75f, x, len), r2 = dot_scale_f32_scalar(s2, 0.75f, x, len);
        float r3 = dot_axpy_f32(s1, x, -0.3f, wf, len);
        float r4 = dot_axpy_f32_scalar(s2, x, -0.3f, wf, len);
        same &= kite_f32_bits(r1) == kite_f32_bits(r2) && kite_f32_bits(r3) == kite_f32_bits(r4) &&
                memcmp(s1, s2, sizeof(float) * (size_t)len) == 0;
    }
    check(same, "dot_delta_rule_vs_scalar", "bytes differ");
    kernels_use_simd(KT_SIMD_BEST);
    free(x);
    free(wf);
}

static void test_gemm(void) {
    const int k = 256, n_out = 301, m = 5;
    float *x = malloc(sizeof(float) * k * m);
    float *y1 = malloc(sizeof(float) * n_out * m), *y3 = malloc(sizeof(float) * n_out * m);
    float *yr = malloc(sizeof(float) * n_out * m);
    for (int i = 0; i < k * m; i++)
        x[i] = rng_uniform(-1.0f, 1.0f);
    kt_pool *p1 = kt_pool_create(1), *p3 = kt_pool_create(3);
    int tids[5] = {GGUF_T_F32, GGUF_T_F16, GGUF_T_BF16, GGUF_T_Q8_0, GGUF_T_Q4_0};
    int ok = 1, ok_ref = 1;
    for (int t = 0; t < 5; t++) {
        kt_buf b = {0};
        float *row = malloc(sizeof(float) * k);
        for (int r = 0; r < n_out; r++) {
            for (int i = 0; i < k; i++)
                row[i] = rng_uniform(-1.0f, 1.0f);
            gguf_put_row(&b, tids[t], row, k);
        }
        free(row);
        kt_weight w = {tids[t], k, n_out, (size_t)gguf_row_bytes(tids[t], k), b.p, b.n};
        kt_gemm_ctx c1 = {p1, NULL, NULL, 0, NULL, NULL}, c3 = {p3, NULL, NULL, 0, NULL, NULL};
        gemm_gw(&c1, &w, x, m, y1);
        gemm_gw(&c3, &w, x, m, y3);
        gemm_gw_ref(&w, x, m, yr);
        if (memcmp(y1, y3, sizeof(float) * n_out * m) != 0)
            ok = 0;
        if (memcmp(y1, yr, sizeof(float) * n_out * m) != 0)
            ok_ref = 0;
        /* M rows at once == one row at a time */
        for (int i = 0; i < m; i++) {
            gemm_gw(&c3, &w, x + i * k, 1, yr);
            if (memcmp(yr, y1 + i * n_out, sizeof(float) * n_out) != 0)
                ok = 0;
        }
        gemm_ctx_free(&c1);
        gemm_ctx_free(&c3);
        free(b.p);
    }
    check(ok, "gemm_threads_1_vs_3_and_rows", "bytes differ");
    check(ok_ref, "gemm_vs_scalar_reference", "bytes differ");
    kt_pool_free(p1);
    kt_pool_free(p3);
    free(x); free(y1); free(y3); free(yr);
}

/* Several weights in one dispatch (gemm_gw_n) and the fused SwiGLU (gemm_gw_glu) against single
 * gemm_gw calls on one thread and the element-wise step in scalar C, for M = 1 and M = 5. */
static void test_gemm_fused(void) {
    enum { K = 256, M = 5 };
    const int n_out[3] = {301, 64, 7};
    float *x = malloc(sizeof(float) * K * M), *y[3], *r[3], *t = malloc(sizeof(float) * 301 * M);
    for (int i = 0; i < K * M; i++)
        x[i] = rng_uniform(-1.0f, 1.0f);
    for (int q = 0; q < 3; q++) {
        y[q] = malloc(sizeof(float) * 301 * M); /* the largest n_out: the SwiGLU reuses them */
        r[q] = malloc(sizeof(float) * 301 * M);
    }
    kt_pool *p1 = kt_pool_create(1), *p3 = kt_pool_create(3);
    int tids[3] = {GGUF_T_F16, GGUF_T_Q8_0, GGUF_T_Q4_0};
    int ok_n = 1, ok_glu = 1;
    for (int ti = 0; ti < 3; ti++) {
        kt_buf b[3] = {{0}};
        kt_weight w[3];
        const kt_weight *wp[3];
        float row[K];
        for (int q = 0; q < 3; q++) {
            for (int o = 0; o < n_out[q]; o++) {
                for (int i = 0; i < K; i++)
                    row[i] = rng_uniform(-1.0f, 1.0f);
                gguf_put_row(&b[q], tids[ti], row, K);
            }
            w[q] = (kt_weight){tids[ti], K, n_out[q], (size_t)gguf_row_bytes(tids[ti], K), b[q].p, b[q].n};
            wp[q] = &w[q];
        }
        kt_gemm_ctx c1 = {p1, NULL, NULL, 0, NULL, NULL}, c3 = {p3, NULL, NULL, 0, NULL, NULL};
        for (int m = 1; m <= M; m += M - 1) {
            for (int q = 0; q < 3; q++)
                gemm_gw(&c1, &w[q], x, m, r[q]);
            gemm_gw_n(&c3, 3, wp, y, x, m);
            for (int q = 0; q < 3; q++)
                ok_n &= memcmp(y[q], r[q], sizeof(float) * (size_t)n_out[q] * m) == 0;
            /* SwiGLU with w[0] as the gate and a copy of it shifted by one row as up */
            kt_weight up = w[0];
            up.data = (const uint8_t *)w[0].data + w[0].row_bytes;
            up.n_out = 300;
            kt_weight gate = w[0];
            gate.n_out = 300;
            gemm_gw(&c1, &gate, x, m, r[1]);
            gemm_gw(&c1, &up, x, m, r[2]);
            gemm_gw_glu(&c3, &gate, &up, x, m, y[0], t);
            for (int i = 0; i < 300 * m; i++)
                ok_glu &= kite_f32_bits(y[0][i]) == kite_f32_bits(kite_siluf(r[1][i]) * r[2][i]);
        }
        gemm_ctx_free(&c1);
        gemm_ctx_free(&c3);
        for (int q = 0; q < 3; q++)
            free(b[q].p);
    }
    check(ok_n, "gemm_n_vs_single", "bytes differ");
    check(ok_glu, "gemm_glu_vs_separate", "bytes differ");
    kt_pool_free(p1);
    kt_pool_free(p3);
    for (int q = 0; q < 3; q++) {
        free(y[q]);
        free(r[q]);
    }
    free(x);
    free(t);
}

/* ---- a small random qwen35 model ------------------------------------------------------------ */

static void make_model(kt_buf *out) {
    enum { E = 64, H = 2, HKV = 1, D = 32, F = 96, HK = 2, HV = 4, DK = 16, DV = 16, K = 4, V = 520,
           NL = 4 };
    const int C = 2 * HK * DK + HV * DV;
    int rec[NL] = {1, 0, 1, 1};
    int types[NL] = {GGUF_T_Q8_0, GGUF_T_Q4_0, GGUF_T_F16, GGUF_T_BF16};
    static gguf_writer w;
    memset(&w, 0, sizeof w);
    gguf_writer_str(&w, "general.architecture", "qwen35");
    gguf_writer_u32(&w, "qwen35.block_count", NL);
    gguf_writer_u32(&w, "qwen35.context_length", 64);
    gguf_writer_u32(&w, "qwen35.embedding_length", E);
    gguf_writer_u32(&w, "qwen35.feed_forward_length", F);
    gguf_writer_u32(&w, "qwen35.attention.head_count", H);
    gguf_writer_u32(&w, "qwen35.attention.head_count_kv", HKV);
    gguf_writer_u32(&w, "qwen35.attention.key_length", D);
    gguf_writer_u32(&w, "qwen35.attention.value_length", D);
    gguf_writer_u32(&w, "qwen35.rope.dimension_count", 8);
    gguf_writer_f32(&w, "qwen35.rope.freq_base", 1.0e7f);
    gguf_writer_f32(&w, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_writer_u32(&w, "qwen35.ssm.conv_kernel", K);
    gguf_writer_u32(&w, "qwen35.ssm.state_size", DK);
    gguf_writer_u32(&w, "qwen35.ssm.group_count", HK);
    gguf_writer_u32(&w, "qwen35.ssm.time_step_rank", HV);
    gguf_writer_u32(&w, "qwen35.ssm.inner_size", HV * DV);
    gguf_writer_bools(&w, "qwen35.attention.recurrent_layers", rec, NL);
    tensor(&w, "token_embd.weight", GGUF_T_F32, E, V, -1.0f, 1.0f);
    tensor(&w, "output_norm.weight", GGUF_T_F32, E, 1, 0.8f, 1.2f);
    tensor(&w, "output.weight", GGUF_T_Q8_0, E, V, -0.3f, 0.3f);
    for (int l = 0; l < NL; l++) {
        char nm[96];
        int ty = types[l];
#define T(name, type, a, b, lo, hi) \
    (snprintf(nm, sizeof nm, "blk.%d.%s", l, name), tensor(&w, nm, type, a, b, lo, hi))
        T("attn_norm.weight", GGUF_T_F32, E, 1, 0.8f, 1.2f);
        T("post_attention_norm.weight", GGUF_T_F32, E, 1, 0.8f, 1.2f);
        T("ffn_gate.weight", ty, E, F, -0.3f, 0.3f);
        T("ffn_up.weight", ty, E, F, -0.3f, 0.3f);
        T("ffn_down.weight", ty, F, E, -0.3f, 0.3f);
        if (rec[l]) {
            T("attn_qkv.weight", ty, E, C, -0.3f, 0.3f);
            T("attn_gate.weight", ty, E, HV * DV, -0.3f, 0.3f);
            T("ssm_beta.weight", ty, E, HV, -0.3f, 0.3f);
            T("ssm_alpha.weight", ty, E, HV, -0.3f, 0.3f);
            T("ssm_a", GGUF_T_F32, HV, 1, -2.0f, -0.1f);
            T("ssm_dt.bias", GGUF_T_F32, HV, 1, -0.5f, 0.5f);
            T("ssm_conv1d.weight", GGUF_T_F32, K, C, -0.5f, 0.5f);
            T("ssm_norm.weight", GGUF_T_F32, DV, 1, 0.5f, 1.5f);
            T("ssm_out.weight", ty, HV * DV, E, -0.3f, 0.3f);
        } else {
            T("attn_q.weight", ty, E, 2 * H * D, -0.3f, 0.3f);
            T("attn_k.weight", ty, E, HKV * D, -0.3f, 0.3f);
            T("attn_v.weight", ty, E, HKV * D, -0.3f, 0.3f);
            T("attn_output.weight", ty, H * D, E, -0.3f, 0.3f);
            T("attn_q_norm.weight", GGUF_T_F32, D, 1, 0.8f, 1.2f);
            T("attn_k_norm.weight", GGUF_T_F32, D, 1, 0.8f, 1.2f);
        }
#undef T
    }
    gguf_writer_finish(&w, out);
}

/* Run the tokens through a loaded model in passes of m rows; outputs [n][E], [n][V]. */
static int run_model(kt_model *md, int threads, int max_m, const int32_t *tok, int n, int m,
                     float *h, float *l, char *err, size_t errlen) {
    kt_pool_free(md->pool);
    md->pool = NULL;
    if (kt_session_prepare(md, threads, max_m, err, errlen))
        return -1;
    kt_state st;
    if (kt_state_init(&st, md, err, errlen))
        return -1;
    kt_session_reset(&st, md);
    int rc = 0;
    for (int p = 0; p < n && rc == 0; p += m) {
        int mm = n - p < m ? n - p : m;
        rc = kt_forward_rows(md, &st, tok + p, mm, p, h + (size_t)p * md->hp.n_embd,
                             l + (size_t)p * md->hp.n_vocab);
        st.pos += mm;
    }
    kt_state_free(&st);
    return rc;
}

static void test_model_memory(const uint8_t *data, size_t size, const char *tag) {
    kt_model md;
    char err[512], name[96];
    snprintf(name, sizeof name, "%s_load", tag);
    if (kt_model_load_memory(&md, data, size, 0, err, sizeof err)) {
        check(0, name, "%s", err);
        return;
    }
    check(1, name, "");
    const int n = 11, E = md.hp.n_embd, V = md.hp.n_vocab;
    int32_t tok[11];
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)(rng_u32() % (uint32_t)V);
    float *h1 = calloc((size_t)n * E, 4), *l1 = calloc((size_t)n * V, 4);
    float *h2 = calloc((size_t)n * E, 4), *l2 = calloc((size_t)n * V, 4);
    int finite = 1;
    int rc = run_model(&md, 1, 1, tok, n, 1, h1, l1, err, sizeof err);
    for (int i = 0; i < n * V; i++)
        finite &= isfinite(l1[i]) != 0;
    snprintf(name, sizeof name, "%s_forward_finite", tag);
    check(rc == 0 && finite, name, "rc %d", rc);
    struct { int threads, max_m, m, simd; const char *what; } v[] = {
        {1, 4, 4, KT_SIMD_BEST, "rows_m4_vs_m1"}, {2, 5, 5, KT_SIMD_BEST, "rows_m5_vs_m1"},
        {3, 1, 1, KT_SIMD_BEST, "threads_3_vs_1"}, {2, 3, 3, 0, "scalar_vs_simd"},
        {2, 1, 1, KT_SIMD_AVX2, "avx2_vs_best"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        kernels_use_simd(v[i].simd);
        memset(h2, 0, (size_t)n * E * 4);
        memset(l2, 0, (size_t)n * V * 4);
        rc = run_model(&md, v[i].threads, v[i].max_m, tok, n, v[i].m, h2, l2, err, sizeof err);
        kernels_use_simd(KT_SIMD_BEST);
        snprintf(name, sizeof name, "%s_%s", tag, v[i].what);
        check(rc == 0 && memcmp(h1, h2, (size_t)n * E * 4) == 0 &&
                  memcmp(l1, l2, (size_t)n * V * 4) == 0,
              name, "bytes differ");
    }
    free(h1); free(l1); free(h2); free(l2);
    kt_model_free(&md);
}

/* ---- the device, when one is available: its bytes against the CPU's ------------------------ */

static uint32_t ulp_dist(float a, float b) {
    int32_t ia = (int32_t)kite_f32_bits(a), ib = (int32_t)kite_f32_bits(b);
    if (ia < 0) ia = (int32_t)0x80000000 - ia;
    if (ib < 0) ib = (int32_t)0x80000000 - ib;
    int64_t d = (int64_t)ia - (int64_t)ib;
    return (uint32_t)(d < 0 ? -d : d);
}

static uint32_t max_ulp(const float *a, const float *b, size_t n) {
    uint32_t w = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t d = ulp_dist(a[i], b[i]);
        w = d > w ? d : w;
    }
    return w;
}

static void test_device_gemm(void) {
    const int k = 1024, n_out = 2048;
    float *x = malloc(sizeof(float) * k * 4), *yc = malloc(sizeof(float) * n_out * 4);
    float *yd = malloc(sizeof(float) * n_out * 4), *row = malloc(sizeof(float) * k);
    int8_t *xq = malloc((size_t)k * 4);
    float *xd = malloc(sizeof(float) * k / 32 * 4);
    for (int i = 0; i < k * 4; i++)
        x[i] = rng_uniform(-1.0f, 1.0f);
    for (int t = 0; t < 2; t++) {
        int type = t ? GGUF_T_Q4_0 : GGUF_T_Q8_0;
        kt_buf b = {0};
        for (int r = 0; r < n_out; r++) {
            for (int i = 0; i < k; i++)
                row[i] = rng_uniform(-1.0f, 1.0f);
            gguf_put_row(&b, type, row, k);
        }
        kt_weight w = {type, k, n_out, (size_t)gguf_row_bytes(type, k), b.p, b.n};
        for (int m = 1; m <= 4; m += 3) {
            for (int i = 0; i < m; i++)
                quantize_row_act(x + i * k, k, xq + i * k, xd + i * (k / 32));
            gemm_gw_ref(&w, x, m, yc);
            int done = kc_gemm_gw(type, b.p, (int64_t)b.n, n_out, k, xq, xd, m, yd);
            char name[64];
            snprintf(name, sizeof name, "device_gemm_%s_m%d", t ? "q4_0" : "q8_0", m);
            if (!done)
                check(0, name, "the device refused the offload");
            else
                check(memcmp(yc, yd, sizeof(float) * n_out * m) == 0, name,
                      "bytes differ from the CPU, max %u ulp", max_ulp(yc, yd, (size_t)n_out * m));
        }
        free(b.p);
    }
    free(x); free(yc); free(yd); free(row); free(xq); free(xd);
}

/* The whole model on the device against the CPU forward pass: pass by pass (kt_process_rows)
 * with 1 and 4 rows, and as one prompt call (kt_process_prompt, passes queued back to back)
 * with 1, 2 and 4 rows, the last of 2 and 4 into a ring of one pass's rows. */
static void test_device_model(const uint8_t *data, size_t size, const char *tag) {
    kt_model md;
    char err[512], name[96];
    if (kt_model_load_memory(&md, data, size, 0, err, sizeof err)) {
        snprintf(name, sizeof name, "%s_device_load", tag);
        check(0, name, "%s", err);
        return;
    }
    const int n = 11, E = md.hp.n_embd, V = md.hp.n_vocab;
    int32_t tok[11];
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)(rng_u32() % (uint32_t)V);
    float *hc = calloc((size_t)n * E, 4), *lc = calloc((size_t)n * V, 4);
    float *hd = calloc((size_t)n * E, 4), *ld = calloc((size_t)n * V, 4);
    int rc = run_model(&md, 2, 4, tok, n, 1, hc, lc, err, sizeof err); /* CPU reference */
    static const int variants[][3] = {{1, 0, 11}, {4, 0, 11}, {1, 1, 11}, {2, 1, 11}, {4, 1, 11},
                                      {2, 1, 2}, {4, 1, 4}}; /* rows, prompt call, ring */
    for (int vi = 0; vi < (int)(sizeof variants / sizeof variants[0]) && rc == 0; vi++) {
        const int m = variants[vi][0], prompt = variants[vi][1], ring = variants[vi][2];
        kt_state st;
        if (prompt)
            snprintf(name, sizeof name, "%s_device_prompt_m%d_ring%d", tag, m, ring);
        else
            snprintf(name, sizeof name, "%s_device_m%d", tag, m);
        if (!md.resident || kt_state_init(&st, &md, err, sizeof err)) {
            check(0, name, md.resident ? err : "the model was not uploaded");
            continue;
        }
        kt_session_reset(&st, &md);
        kt_counters before = md.counters;
        int ok = 1;
        memset(hd, 0, (size_t)n * E * 4);
        memset(ld, 0, (size_t)n * V * 4);
        if (prompt)
            ok = kt_process_prompt(&md, &st, tok, n, m, hd, ld, ring, err, sizeof err) == 0;
        for (int p = 0; p < n && ok && !prompt; p += m) {
            int mm = n - p < m ? n - p : m;
            ok = kt_process_rows(&md, &st, tok + p, mm, hd + (size_t)p * E, ld + (size_t)p * V, err,
                                 sizeof err) == 0;
        }
        /* a ring of one pass holds the last pass from its row 0 (its first row is a multiple of m) */
        const size_t r0 = ring < n ? (size_t)(n - 1) / ring * ring : 0, nr = (size_t)n - r0;
        int on_device = md.counters.cpu_steps == before.cpu_steps;
        kt_state_free(&st);
        if (!ok)
            check(0, name, "%s", err);
        else if (!on_device)
            check(0, name, "the device refused rows (%lld ran on the CPU)",
                  (long long)(md.counters.cpu_steps - before.cpu_steps));
        else
            check(memcmp(hc + r0 * E, hd, nr * E * 4) == 0 && memcmp(lc + r0 * V, ld, nr * V * 4) == 0,
                  name, "bytes differ from the CPU: h_out max %u ulp, logits max %u ulp",
                  max_ulp(hc + r0 * E, hd, nr * E), max_ulp(lc + r0 * V, ld, nr * V));
    }
    free(hc); free(lc); free(hd); free(ld);
    kt_model_free(&md);
}

int kt_selftest(const char *model_path) {
    n_pass = n_fail = 0;
    test_reader();
    test_half();
    test_quant();
    test_math();
    test_kernels();
    test_gemm();
    test_gemm_fused();
    kt_buf m = {0};
    make_model(&m);
    test_model_memory(m.p, m.n, "model_random");
    /* the random model's file, cut short, must be refused without a crash */
    {
        kt_model md;
        char err[512];
        uint8_t *copy = malloc(m.n / 2);
        memcpy(copy, m.p, m.n / 2);
        int rc = kt_model_load_memory(&md, copy, m.n / 2, 0, err, sizeof err);
        if (rc == 0)
            kt_model_free(&md);
        check(rc != 0, "model_truncated_refused", "accepted");
        free(copy);
    }
    kc_info ci;
    kc_get_info(&ci);
    int device = kc_available() && !ci.force_cpu;
    if (device) {
        test_device_gemm();
        test_device_model(m.p, m.n, "model_random");
    }
    free(m.p);
    if (model_path) {
        kt_mapped_file mf;
        char err[512];
        if (kt_map_file(&mf, model_path, err, sizeof err))
            check(0, "model_file_map", "%s", err);
        else {
            test_model_memory(mf.data, mf.size, "model_file");
            if (device)
                test_device_model(mf.data, mf.size, "model_file");
            kt_unmap_file(&mf);
        }
    }
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail;
}
