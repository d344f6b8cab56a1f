#include "device_matrix.cuh"

#include <vector>


void matrix_free(DeviceMatrix &w) {
    if (w.q) cudaFree(w.q);
    if (w.s) cudaFree(w.s);
    w = DeviceMatrix();
}

int64_t type_row_bytes(int type, int64_t ne0) {
    switch (type) {
    case KCUDA_T_F32: return ne0 * 4;
    case KCUDA_T_F16: case KCUDA_T_BF16: return ne0 * 2;
    case KCUDA_T_Q8_0: return ne0 / 32 * 34;
    case KCUDA_T_Q4_0: return ne0 / 32 * 18;
    default: return -1;
    }
}

// Bytes of a row of w.q in the device layout (quantized: the quants alone, scales apart in w.s).
int64_t matrix_quant_row_bytes(int type, int64_t ne0) {
    switch (type) {
    case KCUDA_T_Q8_0: return ne0;
    case KCUDA_T_Q4_0: return ne0 / 2;
    default: return type_row_bytes(type, ne0);
    }
}

// Split ggml blocks into quants and scales (one thread per block).
__global__ void k_repack_q8(const uint8_t *raw, int64_t nblk, int8_t *q, uint16_t *s) {
    int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = raw + b * 34;
    s[b] = (uint16_t)(p[0] | (p[1] << 8));
    for (int i = 0; i < 32; i++) q[b * 32 + i] = (int8_t)p[2 + i];
}

__global__ void k_repack_q4(const uint8_t *raw, int64_t nblk, uint8_t *q, uint16_t *s) {
    int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = raw + b * 18;
    s[b] = (uint16_t)(p[0] | (p[1] << 8));
    for (int i = 0; i < 16; i++) q[b * 16 + i] = p[2 + i];
}

// the upload staging buffer on the device (raw ggml blocks before their repack)
static void *g_stage = nullptr;
static size_t g_stage_bytes = 0;

static int32_t stage_reserve(size_t bytes) {
    if (bytes <= g_stage_bytes) return 0;
    if (g_stage) cudaFree(g_stage);
    g_stage = nullptr;
    g_stage_bytes = 0;
    CK(cudaMalloc(&g_stage, bytes));
    g_stage_bytes = bytes;
    return 0;
}

// Upload a matrix (rows ne1 of ne0 values) in its device layout.
int32_t matrix_upload(DeviceMatrix &w, int type, const void *data, int64_t ne0, int64_t ne1, int64_t nbytes) {
    int64_t rb = type_row_bytes(type, ne0);
    if (rb < 0) return KCUDA_E_UNSUPPORTED;
    if ((type == KCUDA_T_Q8_0 || type == KCUDA_T_Q4_0) && ne0 % 32) return KCUDA_E_UNSUPPORTED;
    if (rb * ne1 != nbytes || !data) return KCUDA_E_ARG;
    matrix_free(w);
    w.type = type;
    w.ne0 = ne0;
    w.ne1 = ne1;
    if (type == KCUDA_T_Q8_0 || type == KCUDA_T_Q4_0) {
        int64_t nblk = ne0 / 32 * ne1;
        CKS(stage_reserve((size_t)nbytes));
        CK(cudaMemcpy(g_stage, data, (size_t)nbytes, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&w.q, (size_t)(matrix_quant_row_bytes(type, ne0) * ne1)));
        CK(cudaMalloc((void **)&w.s, (size_t)nblk * 2));
        int th = 256;
        unsigned gr = (unsigned)((nblk + th - 1) / th);
        if (type == KCUDA_T_Q8_0)
            k_repack_q8<<<gr, th>>>((const uint8_t *)g_stage, nblk, (int8_t *)w.q, w.s);
        else
            k_repack_q4<<<gr, th>>>((const uint8_t *)g_stage, nblk, (uint8_t *)w.q, w.s);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    } else {
        CK(cudaMalloc(&w.q, (size_t)nbytes));
        CK(cudaMemcpy(w.q, data, (size_t)nbytes, cudaMemcpyHostToDevice));
    }
    return 0;
}

// A small vector as f32 on the device (conversions from f16/bf16 are exact).
int32_t vec_upload(float **dst, int type, const void *data, int64_t n, int64_t nbytes) {
    std::vector<float> tmp((size_t)n);
    if (type == KCUDA_T_F32) {
        if (nbytes != n * 4) return KCUDA_E_ARG;
        memcpy(tmp.data(), data, (size_t)nbytes);
    } else if (type == KCUDA_T_F16 || type == KCUDA_T_BF16) {
        if (nbytes != n * 2) return KCUDA_E_ARG;
        const uint16_t *h = (const uint16_t *)data;
        for (int64_t i = 0; i < n; i++)
            tmp[(size_t)i] = type == KCUDA_T_F16 ? kite_f16_to_f32(h[i]) : kite_bf16_to_f32(h[i]);
    } else {
        return KCUDA_E_UNSUPPORTED;
    }
    if (*dst) cudaFree(*dst);
    *dst = nullptr;
    CK(cudaMalloc((void **)dst, (size_t)n * 4));
    CK(cudaMemcpy(*dst, tmp.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
    return 0;
}


void stage_free(void) {
    if (g_stage) cudaFree(g_stage);
    g_stage = nullptr;
    g_stage_bytes = 0;
}
