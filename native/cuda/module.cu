#include <map>

#include "matvec.cuh"

int g_ready = 0;
int g_device = 0;
cudaStream_t g_stream = 0;
int g_opt_graph = 1;
int g_opt_graph_m = 0;
int g_cc_major = 0;
int g_pdl = 0;

// ------------------------------------------------------------------------------------------------
// Per-op gemm cache (host weight pointer -> device copy)

struct CacheEnt {
    DeviceMatrix w;
    int64_t bytes;
    int n, k;
};
static std::map<const void *, CacheEnt> g_wcache;
static void *g_op_buf = nullptr;
static size_t g_op_bytes = 0;

static void op_free_all(void) {
    for (auto &kv : g_wcache) matrix_free(kv.second.w);
    g_wcache.clear();
    if (g_op_buf) cudaFree(g_op_buf);
    g_op_buf = nullptr;
    g_op_bytes = 0;
    stage_free();
}

// ------------------------------------------------------------------------------------------------
// Exports

static void note_put(char *note, int32_t len, const char *s) {
    if (!note || len <= 0) return;
    snprintf(note, (size_t)len, "%s", s);
}

extern "C" {

KCUDA_API int32_t kcuda_init(char *note, int32_t note_len) {
    char buf[512];
    if (g_ready) {
        note_put(note, note_len, "already initialised");
        return 0;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, KC_RUNTIME " error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        cudaGetLastError();
        return (int32_t)e;
    }
    if (n <= 0) {
        note_put(note, note_len, "no CUDA device");
        return KCUDA_E_NODEVICE;
    }
    g_device = 0;
    e = cudaSetDevice(g_device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, KC_RUNTIME " error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        return (int32_t)e;
    }
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, g_device) == cudaSuccess) {
        snprintf(buf, sizeof buf, "device 0: %s (sm_%d%d), %d device(s)", pr.name, pr.major, pr.minor, n);
        g_cc_major = pr.major;
    }
    else
        snprintf(buf, sizeof buf, "device 0 ready");
    note_put(note, note_len, buf);
    e = (cudaError_t)gemv_smem_optin();
    if (e != cudaSuccess) {
        snprintf(buf, sizeof buf, KC_RUNTIME " error %d (%s): %s", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
        note_put(note, note_len, buf);
        return (int32_t)e;
    }
    g_ready = 1;
    return 0;
}

KCUDA_API void kcuda_shutdown(void) {
    if (!g_ready) return;
    cudaDeviceSynchronize();
    op_free_all();
    if (g_stream) cudaStreamDestroy(g_stream);
    g_stream = 0;
    g_ready = 0;
}

KCUDA_API int32_t kcuda_device_info(char *name, int32_t name_len, int32_t *cc_major, int32_t *cc_minor,
                                    int64_t *mem_total, int32_t *driver_version, int32_t *runtime_version) {
    int dv = 0, rv = 0;
    cudaDriverGetVersion(&dv);
    cudaRuntimeGetVersion(&rv);
    if (driver_version) *driver_version = dv;
    if (runtime_version) *runtime_version = rv;
    if (!g_ready) return KCUDA_E_NODEVICE;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, g_device));
    note_put(name, name_len, pr.name);
    if (cc_major) *cc_major = pr.major;
    if (cc_minor) *cc_minor = pr.minor;
    if (mem_total) *mem_total = (int64_t)pr.totalGlobalMem;
    return 0;
}

KCUDA_API int32_t kcuda_set_option(int32_t key, int64_t value) {
    // without external event nodes (HIP, kc_gpu.cuh) the passes run as streams: same bytes
    if (key == KCUDA_OPT_GRAPH) g_opt_graph = value != 0 && KC_HAS_GRAPH_EXT_EVENT;
    else if (key == KCUDA_OPT_GRAPH_M) g_opt_graph_m = value != 0 && KC_HAS_GRAPH_EXT_EVENT;
    else return KCUDA_E_UNSUPPORTED;
    return 0;
}

KCUDA_API int32_t kcuda_gemm_gw(int32_t wtype, const void *w, int64_t w_bytes, int32_t n_out, int32_t k,
                                const int8_t *xq, const float *xd, int32_t m, float *y) {
    if (!g_ready) return KCUDA_E_NODEVICE;
    if (wtype != KCUDA_T_Q8_0 && wtype != KCUDA_T_Q4_0) return KCUDA_E_UNSUPPORTED;
    if (!w || !xq || !xd || !y || n_out <= 0 || k <= 0 || k % 32 || m <= 0) return KCUDA_E_ARG;
    auto it = g_wcache.find(w);
    if (it != g_wcache.end() && (it->second.bytes != w_bytes || it->second.n != n_out || it->second.k != k ||
                                 it->second.w.type != wtype)) {
        matrix_free(it->second.w);
        g_wcache.erase(it);
        it = g_wcache.end();
    }
    if (it == g_wcache.end()) {
        CacheEnt ce;
        ce.bytes = w_bytes;
        ce.n = n_out;
        ce.k = k;
        int32_t st = matrix_upload(ce.w, wtype, w, k, n_out, w_bytes);
        if (st) {
            matrix_free(ce.w);
            return st;
        }
        it = g_wcache.emplace(w, ce).first;
    }
    size_t qb = (size_t)m * k, db = (size_t)m * (k / 32) * 4, yb = (size_t)m * n_out * 4;
    size_t need = ((qb + 255) / 256 + (db + 255) / 256 + (yb + 255) / 256) * 256;
    if (need > g_op_bytes) {
        if (g_op_buf) cudaFree(g_op_buf);
        g_op_buf = nullptr;
        g_op_bytes = 0;
        CK(cudaMalloc(&g_op_buf, need));
        // zeroed as every device buffer is: the M=1 product reads y[r] before it knows the job adds
        CK(cudaMemset(g_op_buf, 0, need));
        g_op_bytes = need;
    }
    int8_t *dq = (int8_t *)g_op_buf;
    float *dd = (float *)((char *)g_op_buf + (qb + 255) / 256 * 256);
    float *dy = (float *)((char *)dd + (db + 255) / 256 * 256);
    CK(cudaMemcpyAsync(dq, xq, qb, cudaMemcpyHostToDevice, g_stream));
    CK(cudaMemcpyAsync(dd, xd, db, cudaMemcpyHostToDevice, g_stream));
    MatvecJobs js = {};
    js.nj = 1;
    js.j[0] = job(it->second.w, dy, n_out, 0);
    CKS(gemv_run(js, m, prologue(-1, nullptr, nullptr, 0, nullptr, 1, 0.0f), dq, dd, nullptr, k));
    CK(cudaMemcpyAsync(y, dy, yb, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    return 0;
}


} // extern "C"
