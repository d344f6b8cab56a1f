/* gguf_writer.c - see gguf_writer.h. */
#include "gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels.h"
#include "kite_math.h"

void buf_put(kt_buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->n + n)
            nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) {
            fprintf(stderr, "kite: error: out of memory building a GGUF image\n");
            exit(1);
        }
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

void buf_put_u32(kt_buf *b, uint32_t v) {
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_put(b, t, 4);
}

void buf_put_u64(kt_buf *b, uint64_t v) {
    buf_put_u32(b, (uint32_t)v);
    buf_put_u32(b, (uint32_t)(v >> 32));
}

void buf_put_str(kt_buf *b, const char *s) {
    buf_put_u64(b, strlen(s));
    buf_put(b, s, strlen(s));
}

void gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v) {
    buf_put_str(&w->kv, key);
    buf_put_u32(&w->kv, GGUF_V_U32);
    buf_put_u32(&w->kv, v);
    w->n_kv++;
}

void gguf_writer_f32(gguf_writer *w, const char *key, float v) {
    buf_put_str(&w->kv, key);
    buf_put_u32(&w->kv, GGUF_V_F32);
    buf_put_u32(&w->kv, kite_f32_bits(v));
    w->n_kv++;
}

void gguf_writer_str(gguf_writer *w, const char *key, const char *v) {
    buf_put_str(&w->kv, key);
    buf_put_u32(&w->kv, GGUF_V_STRING);
    buf_put_str(&w->kv, v);
    w->n_kv++;
}

void gguf_writer_bools(gguf_writer *w, const char *key, const int *v, int n) {
    buf_put_str(&w->kv, key);
    buf_put_u32(&w->kv, GGUF_V_ARRAY);
    buf_put_u32(&w->kv, GGUF_V_BOOL);
    buf_put_u64(&w->kv, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(v[i] != 0);
        buf_put(&w->kv, &c, 1);
    }
    w->n_kv++;
}

/* Quantize a row of float values into the given type and append it. */
void gguf_put_row(kt_buf *b, int type, const float *x, int n) {
    if (type == GGUF_T_F32) {
        for (int i = 0; i < n; i++)
            buf_put_u32(b, kite_f32_bits(x[i]));
    } else if (type == GGUF_T_F16 || type == GGUF_T_BF16) {
        for (int i = 0; i < n; i++) {
            uint16_t h = type == GGUF_T_F16 ? kite_f32_to_f16(x[i]) : kite_f32_to_bf16(x[i]);
            uint8_t t[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
            buf_put(b, t, 2);
        }
    } else if (type == GGUF_T_Q8_0) {
        for (int blk = 0; blk < n / QK; blk++) {
            const float *xb = x + blk * QK;
            float amax = 0.0f;
            for (int i = 0; i < QK; i++)
                amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t h = kite_f32_to_f16(d);
            uint8_t t[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
            buf_put(b, t, 2);
            for (int i = 0; i < QK; i++) {
                int8_t q = (int8_t)rintf(xb[i] * id);
                buf_put(b, &q, 1);
            }
        }
    } else if (type == GGUF_T_Q4_0) {
        for (int blk = 0; blk < n / QK; blk++) {
            const float *xb = x + blk * QK;
            float amax = 0.0f, mx = 0.0f;
            for (int i = 0; i < QK; i++)
                if (fabsf(xb[i]) > amax) {
                    amax = fabsf(xb[i]);
                    mx = xb[i];
                }
            float d = mx / -8.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t h = kite_f32_to_f16(d);
            uint8_t t[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
            buf_put(b, t, 2);
            for (int j = 0; j < 16; j++) {
                int q0 = (int)(xb[j] * id + 8.5f), q1 = (int)(xb[j + 16] * id + 8.5f);
                q0 = q0 < 0 ? 0 : (q0 > 15 ? 15 : q0);
                q1 = q1 < 0 ? 0 : (q1 > 15 ? 15 : q1);
                uint8_t c = (uint8_t)(q0 | (q1 << 4));
                buf_put(b, &c, 1);
            }
        }
    }
}

void buf_set_u32(kt_buf *b, size_t off, uint32_t v) {
    for (int i = 0; i < 4; i++)
        b->p[off + i] = (uint8_t)(v >> (8 * i));
}

void buf_set_u64(kt_buf *b, size_t off, uint64_t v) {
    for (int i = 0; i < 8; i++)
        b->p[off + i] = (uint8_t)(v >> (8 * i));
}

void gguf_writer_tensor(gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1,
                        const float *values) {
    if (w->n_t == GGUF_WRITER_TENSORS) {
        fprintf(stderr, "kite: error: more than %d tensors in a GGUF image\n", GGUF_WRITER_TENSORS);
        exit(1);
    }
    gguf_writer_tensor_data *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    for (int64_t r = 0; r < ne1; r++)
        gguf_put_row(&t->data, type, values + r * ne0, (int)ne0);
}

void gguf_writer_finish(gguf_writer *w, kt_buf *out) {
    memset(out, 0, sizeof *out);
    buf_put(out, "GGUF", 4);
    buf_put_u32(out, 3);
    buf_put_u64(out, (uint64_t)w->n_t);
    buf_put_u64(out, (uint64_t)w->n_kv);
    buf_put(out, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        gguf_writer_tensor_data *t = &w->t[i];
        buf_put_str(out, t->name);
        buf_put_u32(out, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            buf_put_u64(out, (uint64_t)t->ne[d]);
        buf_put_u32(out, (uint32_t)t->type);
        buf_put_u64(out, off);
        off += (t->data.n + 31) / 32 * 32;
    }
    static const uint8_t zeros[32] = {0};
    buf_put(out, zeros, (32 - out->n % 32) % 32);
    for (int i = 0; i < w->n_t; i++) {
        buf_put(out, w->t[i].data.p, w->t[i].data.n);
        buf_put(out, zeros, (32 - w->t[i].data.n % 32) % 32);
        free(w->t[i].data.p);
    }
    free(w->kv.p);
}

