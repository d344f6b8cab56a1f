// device_matrix.cuh - weights on the device: a matrix in its device layout (quantized blocks split
// into quants and f16 scales) and the small f32 vectors (norms, biases, conv taps).
#pragma once
#include "kc_common.cuh"

struct DeviceMatrix {
    int type = -1;      // KCUDA_T_*; -1 = absent
    int64_t ne0 = 0, ne1 = 0;
    void *q = nullptr;  // Q8_0: int8 [ne1][ne0]; Q4_0: uint8 [ne1][ne0/2]; F32/F16/BF16: the data
    uint16_t *s = nullptr; // Q8_0/Q4_0: f16 scales [ne1][ne0/32]
};

void matrix_free(DeviceMatrix &w);
// Bytes of one row of ne0 values of a ggml type; -1 for a type the module does not take.
int64_t type_row_bytes(int type, int64_t ne0);
// Bytes of a row of w.q in the device layout (quantized: the quants alone, scales apart in w.s).
int64_t matrix_quant_row_bytes(int type, int64_t ne0);
// Upload a matrix (rows ne1 of ne0 values) in its device layout.
int32_t matrix_upload(DeviceMatrix &w, int type, const void *data, int64_t ne0, int64_t ne1, int64_t nbytes);
// A small vector as f32 on the device (conversions from f16/bf16 are exact).
int32_t vec_upload(float **dst, int type, const void *data, int64_t n, int64_t nbytes);
// Free the upload staging buffer (kcuda_shutdown).
void stage_free(void);
