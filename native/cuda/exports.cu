// exports.cu - the two exports that the loader test modules change; everything else lives in
// the core objects (kite_cuda_core in CMakeLists.txt, compiled once). KCUDA_TEST_NOEXPORT omits
// kcuda_step_m; KCUDA_TEST_BADABI reports KCUDA_ABI_VERSION + 1. Both are test artifacts only.
#include "kite_cuda.h"

int32_t kcuda_impl_step_m(kcuda_model *mdl, const int32_t *tokens, int32_t m, int32_t pos,
                          float *h_out, float *logits);

extern "C" {

KCUDA_API int32_t kcuda_abi_version(void) {
#if defined(KCUDA_TEST_BADABI)
    return KCUDA_ABI_VERSION + 1;
#else
    return KCUDA_ABI_VERSION;
#endif
}

#if !defined(KCUDA_TEST_NOEXPORT)
KCUDA_API int32_t kcuda_step_m(kcuda_model *mdl, const int32_t *tokens, int32_t m, int32_t pos,
                               float *h_out, float *logits) {
    return kcuda_impl_step_m(mdl, tokens, m, pos, h_out, logits);
}
#endif

} // extern "C"
