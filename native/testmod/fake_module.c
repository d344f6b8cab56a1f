/* fake_module.c - a plain-C implementation of every kcuda_ entry point that reports "no device".
 *
 * The loader-test module: it needs no CUDA toolkit, so any host toolchain (gcc, clang, MinGW)
 * can build it. An engine that finds and binds it must behave exactly as with a real module on
 * a machine without a device: kcuda_init fails with KCUDA_E_NODEVICE, every offload and model
 * call is refused, and the engine runs the CPU path (output byte-identical to the stub build).
 *
 * Variants (compile definitions):
 *   KITE_FAKE_OMIT_STEP_M  leave kcuda_step_m out (one export missing: refused whole)
 *   KITE_FAKE_ABI_DELTA=n  report KCUDA_ABI_VERSION + n from kcuda_abi_version (refused)
 *   KITE_FAKE_DEVICE       report a device and take every per-op offload (kcuda_gemm_gw),
 *                          writing zeros and one stderr line "kite fake module: gemm_gw FLOPS"
 *                          (FLOPS = 2 m n_out k) per call; the model stays on the CPU. A test
 *                          of which products the engine offloads (KITE_CUDA_FLOPS_MIN).
 *
 * The prototypes below are generated from KCUDA_ENTRY_POINTS, so a signature that drifts from
 * kite_cuda.h is a compile error here.
 */
#define KCUDA_BUILD 1
#include "kite_cuda.h"

#include <stdio.h>
#include <string.h>

#ifndef KITE_FAKE_ABI_DELTA
#define KITE_FAKE_ABI_DELTA 0
#endif

#define KITE_FAKE_DECLARE(ret, name, params) KCUDA_API ret name params;
KCUDA_ENTRY_POINTS(KITE_FAKE_DECLARE)
#undef KITE_FAKE_DECLARE

#ifdef KITE_FAKE_DEVICE
static const char fake_note[] = "kite fake module: fake device (takes every per-op offload, no CUDA)";
#else
static const char fake_note[] = "kite fake module: no device (loader test module, no CUDA)";
#endif

static void fake_copy(char *dst, int32_t len, const char *src)
{
    size_t n;
    if (dst == NULL || len <= 0)
        return;
    n = strlen(src);
    if (n > (size_t)(len - 1))
        n = (size_t)(len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

KCUDA_API int32_t kcuda_abi_version(void)
{
    return KCUDA_ABI_VERSION + KITE_FAKE_ABI_DELTA;
}

#ifdef KITE_FAKE_DEVICE
#define FAKE_DEVICE_STATUS 0
#else
#define FAKE_DEVICE_STATUS KCUDA_E_NODEVICE
#endif

KCUDA_API int32_t kcuda_init(char *note, int32_t note_len)
{
    fake_copy(note, note_len, fake_note);
    return FAKE_DEVICE_STATUS;
}

KCUDA_API void kcuda_shutdown(void)
{
}

KCUDA_API int32_t kcuda_device_info(char *name, int32_t name_len, int32_t *cc_major,
                                    int32_t *cc_minor, int64_t *mem_total,
                                    int32_t *driver_version, int32_t *runtime_version)
{
    fake_copy(name, name_len, FAKE_DEVICE_STATUS == 0 ? "kite fake device" : "");
    if (cc_major) *cc_major = 0;
    if (cc_minor) *cc_minor = 0;
    if (mem_total) *mem_total = 0;
    if (driver_version) *driver_version = 0;
    if (runtime_version) *runtime_version = 0;
    return FAKE_DEVICE_STATUS;
}

KCUDA_API int32_t kcuda_set_option(int32_t key, int64_t value)
{
    (void)key;
    (void)value;
    return FAKE_DEVICE_STATUS;
}

KCUDA_API int32_t kcuda_gemm_gw(int32_t wtype, const void *w, int64_t w_bytes, int32_t n_out,
                                int32_t k, const int8_t *xq, const float *xd, int32_t m, float *y)
{
    (void)wtype; (void)w; (void)w_bytes; (void)xq; (void)xd;
#ifdef KITE_FAKE_DEVICE
    memset(y, 0, (size_t)m * (size_t)n_out * sizeof(float));
    fprintf(stderr, "kite fake module: gemm_gw %lld\n", 2LL * m * n_out * k);
    return 0;
#else
    (void)n_out; (void)k; (void)m; (void)y;
    return KCUDA_E_NODEVICE;
#endif
}

KCUDA_API kcuda_model *kcuda_model_create(const int32_t *hp, int32_t n_hp,
                                          const int32_t *layer_recurrent, float eps)
{
    (void)hp; (void)n_hp; (void)layer_recurrent; (void)eps;
    return NULL;
}

KCUDA_API int32_t kcuda_model_set_tensor(kcuda_model *mdl, int32_t layer, int32_t role,
                                         int32_t type, const void *data, int64_t ne0,
                                         int64_t ne1, int64_t nbytes)
{
    (void)mdl; (void)layer; (void)role; (void)type; (void)data; (void)ne0; (void)ne1;
    (void)nbytes;
    return KCUDA_E_NODEVICE;
}

KCUDA_API int32_t kcuda_model_set_rope(kcuda_model *mdl, const float *cos_tab,
                                       const float *sin_tab, int32_t max_pos, int32_t half_rot)
{
    (void)mdl; (void)cos_tab; (void)sin_tab; (void)max_pos; (void)half_rot;
    return KCUDA_E_NODEVICE;
}

KCUDA_API int32_t kcuda_model_prepare(kcuda_model *mdl, int32_t max_m)
{
    (void)mdl; (void)max_m;
    return KCUDA_E_NODEVICE;
}

KCUDA_API int32_t kcuda_seq_reset(kcuda_model *mdl)
{
    (void)mdl;
    return KCUDA_E_NODEVICE;
}

KCUDA_API int32_t kcuda_step(kcuda_model *mdl, int32_t token, int32_t pos, float *h_out,
                             float *logits)
{
    (void)mdl; (void)token; (void)pos; (void)h_out; (void)logits;
    return KCUDA_E_NODEVICE;
}

#ifndef KITE_FAKE_OMIT_STEP_M
KCUDA_API int32_t kcuda_step_m(kcuda_model *mdl, const int32_t *tokens, int32_t m, int32_t pos,
                               float *h_out, float *logits)
{
    (void)mdl; (void)tokens; (void)m; (void)pos; (void)h_out; (void)logits;
    return KCUDA_E_NODEVICE;
}
#endif

KCUDA_API int32_t kcuda_prompt(kcuda_model *mdl, const int32_t *tokens, int32_t n, int32_t m,
                               int32_t pos, float *h_out, float *logits, int32_t ring)
{
    (void)mdl; (void)tokens; (void)n; (void)m; (void)pos; (void)h_out; (void)logits; (void)ring;
    return KCUDA_E_NODEVICE;
}

KCUDA_API int32_t kcuda_model_counters(kcuda_model *mdl, int64_t *out, int32_t n)
{
    int32_t i;
    (void)mdl;
    if (out == NULL || n < 0)
        return KCUDA_E_ARG;
    for (i = 0; i < n; i++)
        out[i] = 0;
    return KCUDA_E_NODEVICE;
}

KCUDA_API void kcuda_model_free(kcuda_model *mdl)
{
    (void)mdl;
}
