/* gguf.h - a validating reader of GGUF (v2 and v3) files.
 *
 * gguf_open_memory() checks the whole header against the buffer it is given and never reads
 * outside it: magic, version, counts (bounded by the size), string lengths, value types
 * (arrays included), tensor types, dimensions (products must not overflow) and that every
 * tensor's data is aligned and inside the buffer. gguf_open_file() maps a file and calls it.
 * Errors return -1 with a one-line message; nothing is left allocated.
 */
#ifndef KITE_GGUF_H
#define KITE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "platform.h"

/* ggml tensor types the engine reads */
enum { GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_Q4_0 = 2, GGUF_T_Q8_0 = 8, GGUF_T_BF16 = 30 };

/* GGUF metadata value types */
enum {
    GGUF_V_U8 = 0, GGUF_V_I8 = 1, GGUF_V_U16 = 2, GGUF_V_I16 = 3, GGUF_V_U32 = 4, GGUF_V_I32 = 5,
    GGUF_V_F32 = 6, GGUF_V_BOOL = 7, GGUF_V_STRING = 8, GGUF_V_ARRAY = 9, GGUF_V_U64 = 10,
    GGUF_V_I64 = 11, GGUF_V_F64 = 12
};

#define GGUF_MAX_DIMS 4
#define GGUF_NAME_MAX 255          /* tensor names */
#define GGUF_KEY_MAX 65535         /* metadata keys */
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_kv {
    char *key;                /* NUL-terminated copy */
    uint32_t type;            /* GGUF_V_* */
    uint32_t arr_type;        /* element type when type == GGUF_V_ARRAY */
    uint64_t arr_n;           /* element count when type == GGUF_V_ARRAY */
    const uint8_t *val;       /* the value (or first element) inside the buffer */
} gguf_kv;

typedef struct gguf_tensor {
    char name[GGUF_NAME_MAX + 1];
    int type;                 /* GGUF_T_* */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];/* ne[0] contiguous; unused dims are 1 */
    uint64_t offset;          /* relative to the data section */
    uint64_t nbytes;
    const void *data;         /* inside the buffer */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *base;
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
    kt_mapped_file map;       /* set by gguf_open_file */
} gguf_file;

int gguf_open_memory(gguf_file *g, const void *data, size_t size, char *err, size_t errlen);
int gguf_open_file(gguf_file *g, const char *path, char *err, size_t errlen);
void gguf_close(gguf_file *g);

const char *gguf_type_name(int type);       /* "f32", "q8_0", ...; NULL when unknown */
int gguf_type_block(int type);              /* values per block (1 for float types) */
int gguf_type_block_bytes(int type);        /* bytes per block */
/* Bytes of one row of n values; -1 when n is not a multiple of the block size. */
int64_t gguf_row_bytes(int type, int64_t n);

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);
/* Typed getters: 0 when found and convertible, -1 otherwise (*out untouched). */
int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out); /* any integer type >= 0 */
int gguf_get_f32(const gguf_file *g, const char *key, float *out);    /* f32, f64 */
int gguf_get_str(const gguf_file *g, const char *key, char *out, size_t outlen);
/* Element i of an array of integers or bools, as int64. */
int gguf_get_arr_int(const gguf_file *g, const gguf_kv *kv, uint64_t i, int64_t *out);

#endif
