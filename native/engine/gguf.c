/* gguf.c - GGUF reader; see gguf.h. Every read goes through the cursor's bounds check. */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const uint8_t *p;
    size_t size;
    size_t pos;
    char *err;
    size_t errlen;
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int need(cursor *c, uint64_t n, const char *what) {
    if (n > (uint64_t)(c->size - c->pos))
        return fail(c, "truncated file: %s needs %llu bytes at offset %llu, file has %llu", what,
                    (unsigned long long)n, (unsigned long long)c->pos,
                    (unsigned long long)c->size);
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int read_u32(cursor *c, uint32_t *out, const char *what) {
    if (need(c, 4, what))
        return -1;
    *out = (uint32_t)rd_le(c->p + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int read_u64(cursor *c, uint64_t *out, const char *what) {
    if (need(c, 8, what))
        return -1;
    *out = rd_le(c->p + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* A string: u64 length, bytes. Returns the bytes in place (not NUL-terminated). */
static int read_str(cursor *c, const uint8_t **s, uint64_t *len, uint64_t max, const char *what) {
    if (read_u64(c, len, what))
        return -1;
    if (*len > max)
        return fail(c, "%s: string length %llu exceeds the limit %llu", what,
                    (unsigned long long)*len, (unsigned long long)max);
    if (need(c, *len, what))
        return -1;
    *s = c->p + c->pos;
    c->pos += (size_t)*len;
    return 0;
}

static int scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_V_U8: case GGUF_V_I8: case GGUF_V_BOOL: return 1;
    case GGUF_V_U16: case GGUF_V_I16: return 2;
    case GGUF_V_U32: case GGUF_V_I32: case GGUF_V_F32: return 4;
    case GGUF_V_U64: case GGUF_V_I64: case GGUF_V_F64: return 8;
    default: return 0;
    }
}

/* Skip one value of type t (not an array). */
static int skip_value(cursor *c, uint32_t t, const char *key) {
    if (t == GGUF_V_STRING) {
        const uint8_t *s;
        uint64_t len;
        return read_str(c, &s, &len, UINT64_MAX, key);
    }
    int n = scalar_size(t);
    if (n == 0)
        return fail(c, "metadata '%s': unknown value type %u", key, t);
    if (need(c, (uint64_t)n, key))
        return -1;
    c->pos += (size_t)n;
    return 0;
}

const char *gguf_type_name(int type) {
    switch (type) {
    case GGUF_T_F32: return "f32";
    case GGUF_T_F16: return "f16";
    case GGUF_T_Q4_0: return "q4_0";
    case GGUF_T_Q8_0: return "q8_0";
    case GGUF_T_BF16: return "bf16";
    default: return NULL;
    }
}

int gguf_type_block(int type) {
    return (type == GGUF_T_Q4_0 || type == GGUF_T_Q8_0) ? 32 : 1;
}

int gguf_type_block_bytes(int type) {
    switch (type) {
    case GGUF_T_F32: return 4;
    case GGUF_T_F16: case GGUF_T_BF16: return 2;
    case GGUF_T_Q4_0: return 18;
    case GGUF_T_Q8_0: return 34;
    default: return 0;
    }
}

int64_t gguf_row_bytes(int type, int64_t n) {
    int blk = gguf_type_block(type);
    int bb = gguf_type_block_bytes(type);
    if (n < 0 || n % blk != 0 || bb == 0 || n / blk > INT64_MAX / bb)
        return -1; /* not whole blocks, unknown type, or the byte count overflows */
    return n / blk * bb;
}

void gguf_close(gguf_file *g) {
    if (g->kv) {
        for (uint64_t i = 0; i < g->n_kv; i++)
            free(g->kv[i].key);
        free(g->kv);
    }
    free(g->tensors);
    kt_unmap_file(&g->map);
    memset(g, 0, sizeof *g);
}

static int parse_kv(cursor *c, gguf_kv *kv, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "metadata key #%llu", (unsigned long long)index);
    const uint8_t *key;
    uint64_t klen;
    if (read_str(c, &key, &klen, GGUF_KEY_MAX, what))
        return -1;
    if (klen == 0)
        return fail(c, "%s: empty key", what);
    kv->key = malloc((size_t)klen + 1);
    if (!kv->key)
        return fail(c, "out of memory");
    memcpy(kv->key, key, (size_t)klen);
    kv->key[klen] = '\0';
    if (strlen(kv->key) != klen)
        return fail(c, "%s: key contains a NUL byte", what);
    if (read_u32(c, &kv->type, kv->key))
        return -1;
    if (kv->type == GGUF_V_ARRAY) {
        if (read_u32(c, &kv->arr_type, kv->key) || read_u64(c, &kv->arr_n, kv->key))
            return -1;
        if (kv->arr_type == GGUF_V_ARRAY)
            return fail(c, "metadata '%s': nested arrays are not supported", kv->key);
        if (kv->arr_type != GGUF_V_STRING && scalar_size(kv->arr_type) == 0)
            return fail(c, "metadata '%s': unknown array element type %u", kv->key, kv->arr_type);
        /* every element takes at least one byte (a string at least 8) */
        uint64_t min_elem = kv->arr_type == GGUF_V_STRING ? 8 : (uint64_t)scalar_size(kv->arr_type);
        if (kv->arr_n > (uint64_t)(c->size - c->pos) / min_elem)
            return fail(c, "metadata '%s': array count %llu does not fit in the file", kv->key,
                        (unsigned long long)kv->arr_n);
        kv->val = c->p + c->pos;
        if (kv->arr_type == GGUF_V_STRING) {
            for (uint64_t i = 0; i < kv->arr_n; i++)
                if (skip_value(c, GGUF_V_STRING, kv->key))
                    return -1;
        } else {
            c->pos += (size_t)(kv->arr_n * min_elem); /* checked above */
        }
        return 0;
    }
    kv->val = c->p + c->pos;
    return skip_value(c, kv->type, kv->key);
}

static int parse_tensor(cursor *c, gguf_tensor *t, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "tensor #%llu", (unsigned long long)index);
    const uint8_t *name;
    uint64_t nlen;
    if (read_str(c, &name, &nlen, GGUF_NAME_MAX, what))
        return -1;
    if (nlen == 0)
        return fail(c, "%s: empty name", what);
    memcpy(t->name, name, (size_t)nlen);
    t->name[nlen] = '\0';
    if (strlen(t->name) != nlen)
        return fail(c, "%s: name contains a NUL byte", what);
    uint32_t n_dims, type;
    if (read_u32(c, &n_dims, t->name))
        return -1;
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return fail(c, "tensor '%s': %u dimensions (1 to %d supported)", t->name, n_dims,
                    GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t n_elem = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t v;
        if (read_u64(c, &v, t->name))
            return -1;
        if (v == 0)
            return fail(c, "tensor '%s': dimension %u is zero", t->name, d);
        if (v > (uint64_t)INT64_MAX / n_elem)
            return fail(c, "tensor '%s': dimensions overflow", t->name);
        n_elem *= v;
        t->ne[d] = (int64_t)v;
    }
    if (read_u32(c, &type, t->name))
        return -1;
    if (!gguf_type_name((int)type))
        return fail(c, "tensor '%s': unsupported tensor type %u (supported: f32, f16, bf16, "
                       "q8_0, q4_0)", t->name, type);
    t->type = (int)type;
    int64_t row = gguf_row_bytes(t->type, t->ne[0]);
    if (row < 0)
        return fail(c, "tensor '%s': row of %lld values is not a whole number of %s blocks "
                       "or is too large",
                    t->name, (long long)t->ne[0], gguf_type_name(t->type));
    uint64_t rows = n_elem / (uint64_t)t->ne[0];
    if (row > 0 && rows > (uint64_t)INT64_MAX / (uint64_t)row)
        return fail(c, "tensor '%s': size overflows", t->name);
    t->nbytes = rows * (uint64_t)row;
    if (read_u64(c, &t->offset, t->name))
        return -1;
    return 0;
}

/* Make room for n elements of size sz in *arr (zero-filled), doubling the capacity. */
static int grow(void **arr, uint64_t *cap, uint64_t n, size_t sz) {
    if (n <= *cap)
        return 0;
    uint64_t nc = *cap ? *cap * 2 : 16;
    if (nc > (uint64_t)SIZE_MAX / sz)
        return -1;
    void *p = realloc(*arr, (size_t)(nc * sz));
    if (!p)
        return -1;
    memset((char *)p + *cap * sz, 0, (size_t)((nc - *cap) * sz));
    *arr = p;
    *cap = nc;
    return 0;
}

int gguf_open_memory(gguf_file *g, const void *data, size_t size, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    cursor c = {(const uint8_t *)data, size, 0, err, errlen};
    if (size < 4 || !data)
        return fail(&c, "not a GGUF file: %llu bytes", (unsigned long long)size);
    if (memcmp(c.p, "GGUF", 4) != 0)
        return fail(&c, "not a GGUF file: bad magic %02x %02x %02x %02x", c.p[0], c.p[1], c.p[2],
                    c.p[3]);
    c.pos = 4;
    if (read_u32(&c, &g->version, "version"))
        return -1;
    if (g->version != 2 && g->version != 3)
        return fail(&c, "unsupported GGUF version %u (2 and 3 are supported)", g->version);
    if (read_u64(&c, &g->n_tensors, "tensor count") || read_u64(&c, &g->n_kv, "metadata count"))
        return -1;
    /* a key-value pair takes at least 8 + 1 + 4 + 1 bytes, a tensor entry 8 + 1 + 4 + 8 + 4 + 8 */
    uint64_t left = (uint64_t)(size - c.pos);
    if (g->n_kv > left / 14)
        return fail(&c, "metadata count %llu does not fit in a file of %llu bytes",
                    (unsigned long long)g->n_kv, (unsigned long long)size);
    if (g->n_tensors > left / 33)
        return fail(&c, "tensor count %llu does not fit in a file of %llu bytes",
                    (unsigned long long)g->n_tensors, (unsigned long long)size);
    uint64_t n_kv = g->n_kv, n_tensors = g->n_tensors;
    g->n_kv = 0;
    g->n_tensors = 0;
    /* arrays grow as entries are parsed, so that a hostile count costs no memory up front */
    uint64_t cap_kv = 0, cap_t = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (grow((void **)&g->kv, &cap_kv, i + 1, sizeof *g->kv)) {
            gguf_close(g);
            return fail(&c, "out of memory");
        }
        g->n_kv = i + 1; /* so that gguf_close frees the key */
        if (parse_kv(&c, &g->kv[i], i)) {
            gguf_close(g);
            return -1;
        }
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->kv[j].key, g->kv[i].key) == 0) {
                fail(&c, "duplicate metadata key '%s'", g->kv[i].key);
                gguf_close(g);
                return -1;
            }
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        uint32_t a;
        if (gguf_get_u32(g, "general.alignment", &a) || a == 0 || (a & (a - 1)) != 0) {
            fail(&c, "general.alignment must be a power of two");
            gguf_close(g);
            return -1;
        }
        g->alignment = a;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (grow((void **)&g->tensors, &cap_t, i + 1, sizeof *g->tensors)) {
            gguf_close(g);
            return fail(&c, "out of memory");
        }
        g->n_tensors = i + 1;
        if (parse_tensor(&c, &g->tensors[i], i)) {
            gguf_close(g);
            return -1;
        }
    }
    uint64_t data_off = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_tensors > 0 && data_off > size) {
        fail(&c, "truncated file: the data section would start at %llu, file has %llu bytes",
             (unsigned long long)data_off, (unsigned long long)size);
        gguf_close(g);
        return -1;
    }
    g->data_offset = data_off;
    uint64_t data_size = data_off <= size ? size - data_off : 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0) {
            fail(&c, "tensor '%s': offset %llu is not a multiple of the alignment %llu", t->name,
                 (unsigned long long)t->offset, (unsigned long long)g->alignment);
            gguf_close(g);
            return -1;
        }
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            fail(&c, "tensor '%s': data [%llu, +%llu) lies outside the file (data section %llu "
                     "bytes)", t->name, (unsigned long long)t->offset,
                 (unsigned long long)t->nbytes, (unsigned long long)data_size);
            gguf_close(g);
            return -1;
        }
        t->data = c.p + data_off + t->offset;
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->tensors[j].name, t->name) == 0) {
                fail(&c, "duplicate tensor name '%s'", t->name);
                gguf_close(g);
                return -1;
            }
    }
    g->base = c.p;
    g->size = size;
    return 0;
}

int gguf_open_file(gguf_file *g, const char *path, char *err, size_t errlen) {
    kt_mapped_file mf;
    memset(g, 0, sizeof *g);
    if (kt_map_file(&mf, path, err, errlen))
        return -1;
    if (gguf_open_memory(g, mf.data, mf.size, err, errlen)) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "'%s': %s", path, inner);
        kt_unmap_file(&mf);
        return -1;
    }
    g->map = mf;
    return 0;
}

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0)
            return &g->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    return NULL;
}

/* Integer value of a scalar at p with type t: 0 on success. */
static int int_value(uint32_t t, const uint8_t *p, int64_t *out) {
    switch (t) {
    case GGUF_V_U8: case GGUF_V_BOOL: *out = p[0]; return 0;
    case GGUF_V_I8: *out = (int8_t)p[0]; return 0;
    case GGUF_V_U16: *out = (int64_t)rd_le(p, 2); return 0;
    case GGUF_V_I16: *out = (int16_t)rd_le(p, 2); return 0;
    case GGUF_V_U32: *out = (int64_t)rd_le(p, 4); return 0;
    case GGUF_V_I32: *out = (int32_t)rd_le(p, 4); return 0;
    case GGUF_V_U64: {
        uint64_t v = rd_le(p, 8);
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
        return 0;
    }
    case GGUF_V_I64: *out = (int64_t)rd_le(p, 8); return 0;
    default: return -1;
    }
}

int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    int64_t v;
    if (!kv || kv->type == GGUF_V_ARRAY || int_value(kv->type, kv->val, &v) || v < 0 ||
        v > (int64_t)UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_f32(const gguf_file *g, const char *key, float *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv)
        return -1;
    if (kv->type == GGUF_V_F32) {
        uint32_t u = (uint32_t)rd_le(kv->val, 4);
        memcpy(out, &u, 4);
        return 0;
    }
    if (kv->type == GGUF_V_F64) {
        uint64_t u = rd_le(kv->val, 8);
        double d;
        memcpy(&d, &u, 8);
        *out = (float)d;
        return 0;
    }
    return -1;
}

int gguf_get_str(const gguf_file *g, const char *key, char *out, size_t outlen) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->type != GGUF_V_STRING || outlen == 0)
        return -1;
    uint64_t len = rd_le(kv->val, 8);
    if (len >= outlen)
        return -1;
    memcpy(out, kv->val + 8, (size_t)len);
    out[len] = '\0';
    return 0;
}

int gguf_get_arr_int(const gguf_file *g, const gguf_kv *kv, uint64_t i, int64_t *out) {
    (void)g;
    if (!kv || kv->type != GGUF_V_ARRAY || i >= kv->arr_n)
        return -1;
    int n = scalar_size(kv->arr_type);
    if (n == 0 || kv->arr_type == GGUF_V_F32 || kv->arr_type == GGUF_V_F64)
        return -1;
    return int_value(kv->arr_type, kv->val + i * (uint64_t)n, out);
}
