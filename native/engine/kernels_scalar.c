/* kernels_scalar.c - the scalar kernels: the reference every SIMD tier matches byte for byte,
 * and the only form of dequantization. */
#include <math.h>
#include <string.h>

#include "gguf.h"
#include "kernels_tier.h"
#include "kite_math.h"

/* ---- activation quantization and dequantization ------------------------------------------ */

/* Per block of 32: q = rint(x * (127 / amax)) clamped to +-127 (NaN -> 0), d = amax / 127 rounded
 * to f16 (kite_math.h's kite_q8_act_*: llama.cpp's x86 rule, docs/NUMERICS.md). */
void quantize_row_act_scalar(const float *x, int k, int8_t *q, float *d) {
    for (int b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int i = 0; i < QK; i++) {
            float a = fabsf(xb[i]);
            if (a > amax)
                amax = a;
        }
        float db = kite_q8_act_scale(amax);
        float id = kite_q8_act_inverse(amax);
        for (int i = 0; i < QK; i++) {
            float v = rintf(xb[i] * id);
            v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
            if (v != v)
                v = 0.0f;
            q[b * QK + i] = (int8_t)v;
        }
        d[b] = db;
    }
}


void dequant_row(int type, const void *row, int n, float *out) {
    const uint8_t *p = (const uint8_t *)row;
    switch (type) {
    case GGUF_T_F32:
        memcpy(out, row, (size_t)n * sizeof(float));
        break;
    case GGUF_T_F16:
        for (int i = 0; i < n; i++)
            out[i] = kt_f16_table[rd16(p + 2 * i)];
        break;
    case GGUF_T_BF16:
        for (int i = 0; i < n; i++)
            out[i] = kite_bf16_to_f32(rd16(p + 2 * i));
        break;
    case GGUF_T_Q8_0:
        for (int b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + (size_t)b * Q8_0_BYTES;
            float wd = kt_f16_table[rd16(blk)];
            for (int i = 0; i < QK; i++)
                out[b * QK + i] = wd * (float)(int8_t)blk[2 + i];
        }
        break;
    case GGUF_T_Q4_0:
        for (int b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + (size_t)b * Q4_0_BYTES;
            float wd = kt_f16_table[rd16(blk)];
            for (int j = 0; j < 16; j++) {
                out[b * QK + j] = wd * (float)((blk[2 + j] & 15) - 8);
                out[b * QK + j + 16] = wd * (float)((blk[2 + j] >> 4) - 8);
            }
        }
        break;
    default:
        memset(out, 0, (size_t)n * sizeof(float));
    }
}


/* ---- dot products: 32 lanes, then the butterfly ------------------------------------------- */

static void lanes_zero(float *s) {
    for (int l = 0; l < 32; l++)
        s[l] = 0.0f;
}


float dot_q8_0_lanes_scalar(const uint8_t *w, const int8_t *xq, const float *xd, float *lanes,
                            int b, int nb) {
    for (; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * Q8_0_BYTES;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int i = 0; i < QK; i++)
            isum += (int32_t)(int8_t)blk[2 + i] * (int32_t)qb[i];
        float scale = kt_f16_table[rd16(blk)] * xd[b];
        lanes[b & 31] = lanes[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(lanes);
}

float dot_q4_0_lanes_scalar(const uint8_t *w, const int8_t *xq, const float *xd, float *lanes,
                            int b, int nb) {
    for (; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * Q4_0_BYTES;
        const int8_t *qb = xq + b * QK;
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (int32_t)((blk[2 + j] & 15) - 8) * (int32_t)qb[j];
            isum += (int32_t)((blk[2 + j] >> 4) - 8) * (int32_t)qb[j + 16];
        }
        float scale = kt_f16_table[rd16(blk)] * xd[b];
        lanes[b & 31] = lanes[b & 31] + (float)isum * scale;
    }
    return kite_sum32_finish(lanes);
}

float dot_q8_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb) {
    float s[32];
    lanes_zero(s);
    return dot_q8_0_lanes_scalar((const uint8_t *)w, xq, xd, s, 0, nb);
}

float dot_q4_0_scalar(const void *w, const int8_t *xq, const float *xd, int nb) {
    float s[32];
    lanes_zero(s);
    return dot_q4_0_lanes_scalar((const uint8_t *)w, xq, xd, s, 0, nb);
}

float dot_f32_scalar(const float *w, const float *x, int n) {
    return kite_dot_ref(w, x, n);
}

float dot_f16_scalar(const uint16_t *w, const float *x, int n) {
    float s[32];
    lanes_zero(s);
    for (int i = 0; i < n; i++)
        s[i & 31] = s[i & 31] + kt_f16_table[w[i]] * x[i];
    return kite_sum32_finish(s);
}

float dot_bf16_scalar(const uint16_t *w, const float *x, int n) {
    float s[32];
    lanes_zero(s);
    for (int i = 0; i < n; i++)
        s[i & 31] = s[i & 31] + kite_bf16_to_f32(w[i]) * x[i];
    return kite_sum32_finish(s);
}

float dot_scale_f32_scalar(float *s, float a, const float *x, int n) {
    for (int i = 0; i < n; i++)
        s[i] = s[i] * a;
    return kite_dot_ref(s, x, n);
}

float dot_axpy_f32_scalar(float *s, const float *x, float a, const float *y, int n) {
    for (int i = 0; i < n; i++)
        s[i] = s[i] + x[i] * a;
    return kite_dot_ref(s, y, n);
}

