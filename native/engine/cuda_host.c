/* cuda_host.c - the engine's run-time loader for the optional GPU module (KITE_CUDA=ON).
 *
 * The vendor is fixed at build time (CMake KITE_GPU): cuda looks for libkite_cuda.so /
 * kite_cuda.dll, hip (KITE_GPU_HIP) for libkite_hip.so / kite_hip.dll; the name and the note's
 * tag are all that differ, one code path for both. Finds the module (KITE_CUDA_LIB, then the executable's folder, then the
 * platform search path; first library that loads wins; one attempt per process), binds every
 * entry of KCUDA_ENTRY_POINTS or none, checks the ABI version exactly, and translates the
 * module's 0 = success into the offload contract (1 = done on the GPU, 0 = run the CPU path).
 * Plain C11; no CUDA header, no CUDA library.
 */
#if !defined(_WIN32) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1
#endif

#include "cuda_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_options.h"
#include "kite_cuda.h"

#if defined(KITE_GPU_HIP)
#define KC_VENDOR "hip"
#define KC_TAG "[HIP] "
#else
#define KC_VENDOR "cuda"
#define KC_TAG ""
#endif

#if defined(_WIN32)
#include <windows.h>
#define KC_MODULE_NAME "kite_" KC_VENDOR ".dll"
typedef HMODULE kc_lib_t;
#else
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#define KC_MODULE_NAME "libkite_" KC_VENDOR ".so"
typedef void *kc_lib_t;
#endif

/* The function table: one pointer per entry of the X-macro. */
typedef struct kc_table {
#define KC_X(ret, name, params) ret(*name) params;
    KCUDA_ENTRY_POINTS(KC_X)
#undef KC_X
} kc_table;

static kc_table g_fn;
static kc_lib_t g_lib;
static int g_tried;
static kc_info g_info;
static kcuda_model *g_model;
static int64_t g_offload_gpu, g_offload_cpu;

/* ---- platform layer ---------------------------------------------------------------------- */

static void kc_copy(char *dst, size_t cap, const char *src) {
    if (!cap)
        return;
    snprintf(dst, cap, "%s", src ? src : "");
}

static kc_lib_t lib_open(const char *path, char *err, size_t errcap) {
#if defined(_WIN32)
    HMODULE h = LoadLibraryA(path);
    if (!h)
        snprintf(err, errcap, "LoadLibrary error %lu", (unsigned long)GetLastError());
    return h;
#else
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        kc_copy(err, errcap, e ? e : "dlopen failed");
    }
    return h;
#endif
}

static void *lib_sym(kc_lib_t h, const char *name) {
#if defined(_WIN32)
    return (void *)GetProcAddress(h, name);
#else
    return dlsym(h, name);
#endif
}

static void lib_close(kc_lib_t h) {
#if defined(_WIN32)
    FreeLibrary(h);
#else
    dlclose(h);
#endif
}

static int file_exists(const char *path) {
#if defined(_WIN32)
    DWORD a = GetFileAttributesA(path);
    return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
#else
    return access(path, F_OK) == 0;
#endif
}

/* Whether path is a regular file: dlopen on a FIFO would wait for a writer forever. */
static int is_regular_file(const char *path) {
#if defined(_WIN32)
    return file_exists(path);
#else
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
#endif
}

/* path as the loader must get it: a bare name gets "./", or dlopen / LoadLibrary would search
 * the system path for another library of that name instead of the file checked here. */
static int loader_path(const char *path, char *out, size_t cap) {
    const int bare = strchr(path, '/') == NULL
#if defined(_WIN32)
                     && strchr(path, '\\') == NULL && strchr(path, ':') == NULL
#endif
        ;
    int n = snprintf(out, cap, "%s%s", bare ? "./" : "", path);
    return n >= 0 && (size_t)n < cap;
}

/* The folder of the running executable, with a trailing separator; 0 on failure. */
static int exe_dir(char *out, size_t cap) {
    char buf[KC_PATH_MAX];
#if defined(_WIN32)
    DWORD n = GetModuleFileNameA(NULL, buf, (DWORD)sizeof buf);
    if (n == 0 || n >= sizeof buf)
        return 0;
    buf[n] = 0;
    char *s1 = strrchr(buf, '\\'), *s2 = strrchr(buf, '/');
    char *s = s1 > s2 ? s1 : s2;
#else
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0 || (size_t)n >= sizeof buf - 1)
        return 0;
    buf[n] = 0;
    char *s = strrchr(buf, '/');
#endif
    if (!s)
        return 0;
    s[1] = 0;
    if (strlen(buf) + 1 > cap)
        return 0;
    kc_copy(out, cap, buf);
    return 1;
}

/* ---- environment ------------------------------------------------------------------------- */

static void read_env(void) {
    const kt_env *env = kt_env_get();
    g_info.gate_graph = env->cuda_graph;
    g_info.gate_graph_m = env->cuda_graph_m;
    g_info.force_cpu = env->cuda_force_cpu;
    g_info.flops_min = env->cuda_flops_min;
}

/* ---- binding ----------------------------------------------------------------------------- */

static void table_clear(void) {
    memset(&g_fn, 0, sizeof g_fn);
}

static void unload(void) {
    kc_lib_t h = g_lib;
    table_clear(); /* before the library goes away */
    g_lib = 0;
    if (h)
        lib_close(h);
}

/* Bind every entry point or none; on a missing one, name it. */
static int bind_all(const char *path) {
    kc_table t;
    memset(&t, 0, sizeof t);
#define KC_X(ret, name, params)                                                                \
    {                                                                                          \
        void *p_ = lib_sym(g_lib, #name);                                                      \
        if (!p_) {                                                                             \
            snprintf(g_info.note, sizeof g_info.note, KC_TAG "%.900s: missing symbol %s; module refused", \
                     path, #name);                                                             \
            snprintf(g_info.reason, sizeof g_info.reason, "module refused: missing symbol %s", \
                     #name);                                                                   \
            return 0;                                                                          \
        }                                                                                      \
        memcpy(&t.name, &p_, sizeof p_);                                                       \
    }
    KCUDA_ENTRY_POINTS(KC_X)
#undef KC_X
    g_fn = t;
    return 1;
}

/* Try one candidate; returns 1 if a library was loaded (whatever came next), 0 if not. */
static int try_load(kc_search_step *st, const char *path, int must_exist) {
    char err[256] = "", open_path[KC_PATH_MAX + 2];
    kc_copy(st->path, sizeof st->path, path);
    if (strlen(path) >= sizeof st->path || !loader_path(path, open_path, sizeof open_path)) {
        /* the path reported must be the path loaded */
        snprintf(st->result, sizeof st->result, "load failed: path longer than %d bytes",
                 KC_PATH_MAX - 1);
        return 0;
    }
    if (must_exist && !file_exists(path)) {
        kc_copy(st->result, sizeof st->result, "not found");
        return 0;
    }
    if (must_exist && !is_regular_file(path)) {
        kc_copy(st->result, sizeof st->result, "load failed: not a regular file");
        return 0;
    }
    kc_lib_t h = lib_open(must_exist ? open_path : path, err, sizeof err);
    if (!h) {
        snprintf(st->result, sizeof st->result, "%s: %.100s", must_exist ? "load failed" : "not found", err);
        return 0;
    }
    g_lib = h;
    kc_copy(st->result, sizeof st->result, "loaded");
    kc_copy(g_info.loaded_path, sizeof g_info.loaded_path, path);
    return 1;
}

static void set_reason_from_init(int st, const char *note) {
    if (st == 35)
        snprintf(g_info.reason, sizeof g_info.reason, "no driver: %.230s", note);
    else if (st == 100 || st == KCUDA_E_NODEVICE)
        snprintf(g_info.reason, sizeof g_info.reason, "no device: %.230s", note);
    else if (st == 2)
        snprintf(g_info.reason, sizeof g_info.reason, "out of memory: %.230s", note);
    else
        snprintf(g_info.reason, sizeof g_info.reason, "init failed (%d): %.220s", st, note);
}

void kc_init(void) {
    if (g_tried)
        return;
    g_tried = 1;
    memset(&g_info, 0, sizeof g_info);
    g_info.compiled = 1;
    g_info.engine_abi = KCUDA_ABI_VERSION;
    g_info.module_abi = -1;
    g_info.init_status = KCUDA_E_NODEVICE;
    read_env();

    int loaded = 0;
    kc_search_step *st;
    /* 1. explicit path */
    st = &g_info.search[g_info.n_search++];
    kc_copy(st->how, sizeof st->how, "KITE_CUDA_LIB");
    const char *lp = kt_env_get()->cuda_lib;
    if (!lp) {
        kc_copy(st->result, sizeof st->result, "not set");
    } else {
        loaded = try_load(st, lp, 1);
    }
    /* 2. the executable's folder */
    if (!loaded) {
        char dir[KC_PATH_MAX];
        st = &g_info.search[g_info.n_search++];
        kc_copy(st->how, sizeof st->how, "exe_dir");
        if (exe_dir(dir, sizeof dir) && strlen(dir) + strlen(KC_MODULE_NAME) < sizeof dir) {
            strcat(dir, KC_MODULE_NAME);
            loaded = try_load(st, dir, 1);
        } else {
            kc_copy(st->result, sizeof st->result, "executable folder unknown");
        }
    }
    /* 3. the platform loader's search path */
    if (!loaded) {
        st = &g_info.search[g_info.n_search++];
        kc_copy(st->how, sizeof st->how, "system");
        loaded = try_load(st, KC_MODULE_NAME, 0);
    }
    if (!loaded) {
        kc_copy(g_info.reason, sizeof g_info.reason, "module not found");
        snprintf(g_info.note, sizeof g_info.note, KC_TAG "no %s found (KITE_CUDA_LIB, executable folder, system path); CPU only",
                 KC_MODULE_NAME);
        return;
    }
    const char *path = g_info.loaded_path;
    if (!bind_all(path)) {
        unload();
        return;
    }
    int abi = g_fn.kcuda_abi_version();
    g_info.module_abi = abi;
    if (abi != KCUDA_ABI_VERSION) {
        snprintf(g_info.note, sizeof g_info.note, KC_TAG "%.900s: ABI version %d, engine expects %d; module refused", path, abi,
                 KCUDA_ABI_VERSION);
        snprintf(g_info.reason, sizeof g_info.reason, "module refused: ABI version %d, engine expects %d", abi,
                 KCUDA_ABI_VERSION);
        unload();
        return;
    }
    g_info.bound = 1;
    char note[512] = "";
    int s = g_fn.kcuda_init(note, (int32_t)sizeof note);
    note[sizeof note - 1] = 0;
    g_info.init_status = s;
    snprintf(g_info.note, sizeof g_info.note, KC_TAG "%.500s: bound (ABI %d); init: %.480s", path, abi, note);
    int32_t dv = 0, rv = 0;
    if (s != 0) {
        set_reason_from_init(s, note);
        g_fn.kcuda_device_info(NULL, 0, NULL, NULL, NULL, &dv, &rv);
        g_info.driver_version = dv;
        g_info.runtime_version = rv;
        return;
    }
    int32_t ma = 0, mi = 0;
    int64_t mem = 0;
    if (g_fn.kcuda_device_info(g_info.device_name, (int32_t)sizeof g_info.device_name, &ma, &mi, &mem, &dv, &rv) == 0) {
        g_info.cc_major = ma;
        g_info.cc_minor = mi;
        g_info.mem_total = mem;
    }
    g_info.driver_version = dv;
    g_info.runtime_version = rv;
    g_fn.kcuda_set_option(KCUDA_OPT_GRAPH, g_info.gate_graph);
    g_fn.kcuda_set_option(KCUDA_OPT_GRAPH_M, g_info.gate_graph_m);
    g_info.available = 1;
    g_info.reason[0] = 0;
}

static void drop_model(void) {
    if (g_model && g_fn.kcuda_model_free)
        g_fn.kcuda_model_free(g_model);
    g_model = NULL;
    g_info.resident = 0;
}

void kc_shutdown(void) {
    if (g_lib) {
        drop_model();
        if (g_info.bound && g_fn.kcuda_shutdown)
            g_fn.kcuda_shutdown();
        unload();
    }
    g_info.available = 0;
    g_info.resident = 0;
}

int kc_available(void) {
    return g_info.available;
}

void kc_get_info(kc_info *out) {
    if (!out)
        return;
    if (!g_tried) {
        memset(out, 0, sizeof *out);
        out->compiled = 1;
        out->engine_abi = KCUDA_ABI_VERSION;
        out->module_abi = -1;
        return;
    }
    *out = g_info;
}

void kc_get_counters(kc_counters *out) {
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->offload_gpu = g_offload_gpu;
    out->offload_cpu = g_offload_cpu;
    if (g_model && g_fn.kcuda_model_counters) {
        int64_t c[KCUDA_C_COUNT];
        memset(c, 0, sizeof c);
        if (g_fn.kcuda_model_counters(g_model, c, KCUDA_C_COUNT) == 0) {
            out->gpu_steps = c[KCUDA_C_STEPS];
            out->mrow_calls = c[KCUDA_C_MROW_CALLS];
            out->graph_captures = c[KCUDA_C_GRAPH_CAPTURES];
            out->graph_replays = c[KCUDA_C_GRAPH_REPLAYS];
            out->mrow_graph_replays = c[KCUDA_C_MROW_GRAPH_REPLAYS];
            out->stream_steps = c[KCUDA_C_STREAM_STEPS];
        }
    }
}

/* ---- offloads ---------------------------------------------------------------------------- */

int kc_gemm_gw(int type, const void *w, int64_t w_bytes, int n_out, int k, const int8_t *xq, const float *xd, int m,
               float *y) {
    double flops = 2.0 * (double)m * (double)n_out * (double)k;
    if (!g_info.available || g_info.force_cpu || flops < (double)g_info.flops_min ||
        (type != KCUDA_T_Q8_0 && type != KCUDA_T_Q4_0)) {
        g_offload_cpu++;
        return 0;
    }
    if (g_fn.kcuda_gemm_gw((int32_t)type, w, w_bytes, (int32_t)n_out, (int32_t)k, xq, xd, (int32_t)m, y) != 0) {
        g_offload_cpu++;
        return 0;
    }
    g_offload_gpu++;
    return 1;
}

int kc_model_begin(const int32_t *hp, int n_hp, const int32_t *layer_recurrent, float eps) {
    if (!g_info.available)
        return 0;
    drop_model();
    g_fn.kcuda_set_option(KCUDA_OPT_GRAPH, g_info.gate_graph);
    g_fn.kcuda_set_option(KCUDA_OPT_GRAPH_M, g_info.gate_graph_m);
    g_model = g_fn.kcuda_model_create(hp, (int32_t)n_hp, layer_recurrent, eps);
    return g_model != NULL;
}

int kc_model_tensor(int layer, int role, int type, const void *data, int64_t ne0, int64_t ne1, int64_t nbytes) {
    if (!g_model)
        return 0;
    if (g_fn.kcuda_model_set_tensor(g_model, layer, role, type, data, ne0, ne1, nbytes) != 0) {
        drop_model();
        return 0;
    }
    return 1;
}

int kc_model_ready(const float *cos_tab, const float *sin_tab, int max_pos, int half_rot, int max_m) {
    if (!g_model)
        return 0;
    if (g_fn.kcuda_model_set_rope(g_model, cos_tab, sin_tab, max_pos, half_rot) != 0 ||
        g_fn.kcuda_model_prepare(g_model, max_m) != 0) {
        drop_model();
        return 0;
    }
    g_info.resident = 1;
    return 1;
}

int kc_seq_reset(void) {
    if (!g_model || !g_info.resident)
        return 0;
    if (g_fn.kcuda_seq_reset(g_model) != 0) {
        drop_model();
        return 0;
    }
    return 1;
}

int kc_step(int token, int pos, float *h_out, float *logits) {
    if (!g_model || !g_info.resident || g_info.force_cpu)
        return 0;
    if (g_fn.kcuda_step(g_model, token, pos, h_out, logits) != 0) {
        drop_model();
        return 0;
    }
    return 1;
}

int kc_step_m(const int32_t *tokens, int m, int pos, float *h_out, float *logits) {
    /* Gated by residency alone: never by the M=1 graph gate. */
    if (!g_model || !g_info.resident || g_info.force_cpu)
        return 0;
    if (g_fn.kcuda_step_m(g_model, tokens, (int32_t)m, (int32_t)pos, h_out, logits) != 0) {
        drop_model();
        return 0;
    }
    return 1;
}

int kc_prompt(const int32_t *tokens, int n, int m, int pos, float *h_out, float *logits, int ring) {
    /* Gated like kc_step_m: each pass reads its own graph gate inside the module. */
    if (!g_model || !g_info.resident || g_info.force_cpu)
        return 0;
    if (g_fn.kcuda_prompt(g_model, tokens, (int32_t)n, (int32_t)m, (int32_t)pos, h_out, logits,
                          (int32_t)ring) != 0) {
        drop_model();
        return 0;
    }
    return 1;
}
