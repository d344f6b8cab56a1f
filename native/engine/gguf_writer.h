/* gguf_writer.h - GGUF v3 images in memory: built-in models and reader inputs for selftest.
 *
 *   gguf_writer w = {0};
 *   gguf_writer_str(&w, "general.architecture", "qwen35");   ... key-values, in file order
 *   gguf_writer_tensor(&w, "token_embd.weight", GGUF_T_Q8_0, E, V, values);  ... tensors
 *   kt_buf file;
 *   gguf_writer_finish(&w, &file);   the image; the writer's buffers are freed
 *
 * Tensor data is aligned to 32 bytes. Quantization (gguf_put_row) rounds like the usual Q8_0 /
 * Q4_0 writers; selftest only needs it to be deterministic. Out of memory ends the process.
 */
#ifndef KITE_GGUF_WRITER_H
#define KITE_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer. */
typedef struct kt_buf {
    uint8_t *p;
    size_t n, cap;
} kt_buf;

void buf_put(kt_buf *b, const void *d, size_t n);
void buf_put_u32(kt_buf *b, uint32_t v);   /* little-endian */
void buf_put_u64(kt_buf *b, uint64_t v);
void buf_put_str(kt_buf *b, const char *s); /* GGUF string: u64 length, bytes */
void buf_set_u32(kt_buf *b, size_t off, uint32_t v);  /* overwrite at off */
void buf_set_u64(kt_buf *b, size_t off, uint64_t v);

/* n floats as one row of the given GGUF type (F32, F16, BF16, Q8_0, Q4_0), appended. */
void gguf_put_row(kt_buf *b, int type, const float *x, int n);

#define GGUF_WRITER_TENSORS 160

typedef struct gguf_writer_tensor_data {
    char name[96];
    int type, n_dims;
    int64_t ne[4];
    kt_buf data;
} gguf_writer_tensor_data;

typedef struct gguf_writer {
    kt_buf kv;
    int n_kv;
    gguf_writer_tensor_data t[GGUF_WRITER_TENSORS];
    int n_t;
} gguf_writer;

void gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_str(gguf_writer *w, const char *key, const char *v);
void gguf_writer_bools(gguf_writer *w, const char *key, const int *v, int n);
/* A tensor [ne0, ne1] (one dimension when ne1 == 1) from values [ne1][ne0], row by row. */
void gguf_writer_tensor(gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1,
                        const float *values);
void gguf_writer_finish(gguf_writer *w, kt_buf *out);

#endif /* KITE_GGUF_WRITER_H */
