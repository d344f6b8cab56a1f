/* fuzz_gguf.c - libFuzzer entry for the GGUF reader (CMake option KITE_FUZZ, clang; the target
 * is defined in fuzz/CMakeLists.txt). Opens the input, then reads every tensor's first and last
 * byte and every metadata value through the typed getters, so that any pointer the reader hands
 * out is proven to lie inside the buffer (ASan would report otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    char err[512];
    if (gguf_open_memory(&g, data, size, err, sizeof err) != 0) {
        if (err[0] == '\0')
            abort(); /* a refusal must say why */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const uint8_t *p = (const uint8_t *)g.tensors[i].data;
        if (g.tensors[i].nbytes)
            sink ^= p[0] ^ p[g.tensors[i].nbytes - 1];
        if (gguf_find_tensor(&g, g.tensors[i].name) == NULL)
            abort();
    }
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        uint32_t u;
        float f;
        char s[64];
        int64_t v;
        if (gguf_get_u32(&g, kv->key, &u) == 0)
            sink ^= (uint8_t)u;
        if (gguf_get_f32(&g, kv->key, &f) == 0)
            sink ^= (uint8_t)(f == f);
        if (gguf_get_str(&g, kv->key, s, sizeof s) == 0)
            sink ^= (uint8_t)s[0];
        if (kv->type == GGUF_V_ARRAY && kv->arr_n > 0) {
            if (gguf_get_arr_int(&g, kv, 0, &v) == 0)
                sink ^= (uint8_t)v;
            if (gguf_get_arr_int(&g, kv, kv->arr_n - 1, &v) == 0)
                sink ^= (uint8_t)v;
        }
    }
    (void)sink;
    gguf_close(&g);
    return 0;
}
