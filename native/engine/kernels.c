/* kernels.c - the tier each kernel runs at: the best the CPU has (kernels_init), or a lower one
 * that selftest asks for; plus the steps that are the same at every tier. */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_tier.h"
#include "kite_math.h"

#if KITE_HAVE_AVX2_CODE
#  include <cpuid.h>
#endif

float kt_f16_table[65536];
static int cpu_level;  /* the best KT_SIMD_* this CPU runs */
static int simd_on;    /* the KT_SIMD_* in use */

/* Test builds only (CMake option KITE_TEST_HOOKS): KITE_TEST_PLANT_ULP=avx2 or avx512 moves
 * that tier's quantized block dots one ULP up, a planted wrong kernel that selftest must catch. */
#if defined(KITE_TEST_HOOKS)
static int planted_tier = -1;

static void plant_read(void) {
    const char *s = getenv("KITE_TEST_PLANT_ULP");
    planted_tier = !s ? -1 : strcmp(s, "avx2") == 0 ? KT_SIMD_AVX2
                 : strcmp(s, "avx512") == 0 ? KT_SIMD_AVX512 : -1;
}

static float planted(float v, int tier) {
    return tier == planted_tier ? nextafterf(v, INFINITY) : v;
}
#else
#define plant_read() ((void)0)
#define planted(v, tier) (v)
#endif

float kernels_f16(uint16_t h) {
    return kt_f16_table[h];
}

/* ---- the tier ----------------------------------------------------------------------------------- */

void kernels_init(void) {
    for (uint32_t h = 0; h < 65536; h++)
        kt_f16_table[h] = kite_f16_to_f32((uint16_t)h);
#if KITE_HAVE_AVX2_CODE
    __builtin_cpu_init();
    {
        /* f16c through cpuid: clang 14 rejects __builtin_cpu_supports("f16c") */
        unsigned a = 0, b = 0, c = 0, d = 0;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        if (__builtin_cpu_supports("avx2") && f16c)
            cpu_level = KT_SIMD_AVX2;
    }
#endif
#if KITE_HAVE_AVX512_CODE
    /* these report 0 unless the OS saves the zmm state too */
    if (cpu_level == KT_SIMD_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni")) {
        kernels_avx512_init();
        cpu_level = KT_SIMD_AVX512;
    }
#endif
    simd_on = cpu_level;
    plant_read();
}

int kernels_simd_max(void) { return cpu_level; }
void kernels_use_simd(int level) { simd_on = level < 0 ? 0 : level < cpu_level ? level : cpu_level; }
int kernels_simd_active(void) { return simd_on; }
const char *kernels_simd_name(void) {
    return simd_on >= KT_SIMD_AVX512 ? "avx512vnni" : simd_on ? "avx2" : "scalar";
}


/* ---- the same at every tier --------------------------------------------------------------------- */

void act_prep_q4(const int8_t *q, int nb, int32_t *s, int8_t *p) {
    for (int b = 0; b < nb; b++) {
        int32_t t = 0;
        for (int i = 0; i < QK; i++)
            t += q[b * QK + i];
        s[b] = t;
    }
    for (int g = 0; g + 8 <= nb; g += 8) {
        int8_t *o = p + (size_t)g * QK;
        if (simd_on >= KT_SIMD_AVX512) /* blocks 0-3 then 4-7: 64 bytes of low halves, 64 of high */
            for (int j = 0; j < 8; j++) {
                const int8_t *a = q + (size_t)(g + j) * QK;
                memcpy(o + 128 * (j / 4) + 16 * (j % 4), a, 16);
                memcpy(o + 128 * (j / 4) + 64 + 16 * (j % 4), a + 16, 16);
            }
        else /* per j < 4: low halves of blocks j and j + 4, then their high halves */
            for (int j = 0; j < 4; j++) {
                const int8_t *a = q + (size_t)(g + j) * QK, *c = q + (size_t)(g + j + 4) * QK;
                memcpy(o + 64 * j, a, 16);
                memcpy(o + 64 * j + 16, c, 16);
                memcpy(o + 64 * j + 32, a + 16, 16);
                memcpy(o + 64 * j + 48, c + 16, 16);
            }
    }
}


void quantize_row_act(const float *x, int k, int8_t *q, float *d) {
#if KITE_HAVE_AVX2_CODE
    if (simd_on) {
        quantize_row_act_avx2(x, k, q, d);
        return;
    }
#endif
    quantize_row_act_scalar(x, k, q, d);
}

/* ---- dot products --------------------------------------------------------------------------------- */

float dot_q8_0(const void *w, const int8_t *xq, const float *xd, int nb) {
#if KITE_HAVE_AVX2_CODE
    if (simd_on)
        return planted(dot_q8_0_avx2(w, xq, xd, nb), KT_SIMD_AVX2);
#endif
    return dot_q8_0_scalar(w, xq, xd, nb);
}

float dot_q4_0(const void *w, const int8_t *xq, const float *xd, const int32_t *xs,
               const int8_t *xp, int nb) {
#if KITE_HAVE_AVX512_CODE
    if (simd_on >= KT_SIMD_AVX512)
        return planted(dot_q4_0_avx512(w, xq, xd, xs, xp, nb), KT_SIMD_AVX512);
#endif
#if KITE_HAVE_AVX2_CODE
    if (simd_on)
        return planted(dot_q4_0_avx2(w, xq, xd, xs, xp, nb), KT_SIMD_AVX2);
#endif
    (void)xs;
    (void)xp;
    return dot_q4_0_scalar(w, xq, xd, nb);
}

#ifndef KT_STREAMS
#  define KT_STREAMS 2
#endif
/* Rows i, h + i, 2 h + i, ... go together (h = n / KT_STREAMS): several streams through memory
 * keep more lines in flight than one (the hardware prefetch alone does not), and each row is
 * computed as alone. */
void dot_q4_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   const int32_t *xs, const int8_t *xp, int nb, float *y) {
    const uint8_t *p = (const uint8_t *)w;
    const int h = n / KT_STREAMS;
    const size_t gap = (size_t)h * row_bytes;
    for (int i = 0; i < h; i++)
        for (int k = 0; k < KT_STREAMS; k += 2) {
            const uint8_t *a = p + (size_t)(k * h + i) * row_bytes;
#if KITE_HAVE_AVX512_CODE
            if (simd_on >= KT_SIMD_AVX512) {
                float o[2];
                dot2_q4_0_avx512(a, gap, xq, xd, xs, xp, nb, o);
                y[k * h + i] = planted(o[0], KT_SIMD_AVX512);
                y[(k + 1) * h + i] = planted(o[1], KT_SIMD_AVX512);
                continue;
            }
#endif
            y[k * h + i] = dot_q4_0(a, xq, xd, xs, xp, nb);
            y[(k + 1) * h + i] = dot_q4_0(a + gap, xq, xd, xs, xp, nb);
        }
    for (int r = KT_STREAMS * h; r < n; r++)
        y[r] = dot_q4_0(p + (size_t)r * row_bytes, xq, xd, xs, xp, nb);
}

void dot_q8_0_rows(const void *w, size_t row_bytes, int n, const int8_t *xq, const float *xd,
                   int nb, float *y) {
    const uint8_t *p = (const uint8_t *)w;
    const int h = n / KT_STREAMS;
    for (int i = 0; i < h; i++)
        for (int k = 0; k < KT_STREAMS; k++)
            y[k * h + i] = dot_q8_0(p + (size_t)(k * h + i) * row_bytes, xq, xd, nb);
    for (int r = KT_STREAMS * h; r < n; r++)
        y[r] = dot_q8_0(p + (size_t)r * row_bytes, xq, xd, nb);
}

/* The AVX2 kernel when it is compiled in and enabled, else the scalar one: the same bytes. */
#if KITE_HAVE_AVX2_CODE
#define AVX2_OR(avx2_call, scalar_call) (simd_on ? (avx2_call) : (scalar_call))
#else
#define AVX2_OR(avx2_call, scalar_call) (scalar_call)
#endif

float dot_f32(const float *w, const float *x, int n) {
    return AVX2_OR(dot_f32_avx2(w, x, n), dot_f32_scalar(w, x, n));
}

float dot_f16(const uint16_t *w, const float *x, int n) {
    return AVX2_OR(dot_f16_avx2(w, x, n), dot_f16_scalar(w, x, n));
}

float dot_bf16(const uint16_t *w, const float *x, int n) {
    return AVX2_OR(dot_bf16_avx2(w, x, n), dot_bf16_scalar(w, x, n));
}

float dot_scale_f32(float *s, float a, const float *x, int n) {
    return AVX2_OR(dot_update_avx2(s, NULL, a, x, n, 0), dot_scale_f32_scalar(s, a, x, n));
}

float dot_axpy_f32(float *s, const float *x, float a, const float *y, int n) {
    return AVX2_OR(dot_update_avx2(s, x, a, y, n, 1), dot_axpy_f32_scalar(s, x, a, y, n));
}

