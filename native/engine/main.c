/* main.c - the kite command line: info, run, selftest (docs/ENGINE.md). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "env_options.h"
#include "json.h"
#include "kernels.h"
#include "kite_cuda.h"
#include "model.h"
#include "platform.h"
#include "selftest.h"
#include "session.h"
#include "sha256.h"
#include "threads.h"
#include "vec_math.h"

#define KITE_VERSION "0.1.0"

#if defined(__clang__)
#  define KITE_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#  define KITE_COMPILER "gcc " __VERSION__
#else
#  define KITE_COMPILER "unknown"
#endif

static void usage(void) {
    fprintf(stderr,
            "usage:\n"
            "  kite info [--json]\n"
            "  kite run --model M.gguf --prompt 1,2,3 [--steps N] [--mt M] [--threads T]\n"
            "           [--iters K] [--dump DIR] [--json] [--ctx N]\n"
            "  kite selftest [--model M.gguf]\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "kite: ");
    fprintf(stderr, fmt, arg ? arg : "");
    fprintf(stderr, "\n");
    usage();
    return 2;
}

static int runtime_error(const char *msg) {
    fprintf(stderr, "kite: error: %s\n", msg);
    return 1;
}

/* A whole decimal integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* ---- info ---------------------------------------------------------------------------------- */

static void write_backend(kt_json *j, const char *key) {
    kc_info ci;
    kc_get_info(&ci);
    json_obj_begin(j, key);
    json_bool(j, "compiled", ci.compiled);
    json_arr_begin(j, "search");
    for (int i = 0; i < ci.n_search && i < 3; i++) {
        json_obj_begin(j, NULL);
        json_str(j, "how", ci.search[i].how);
        json_str(j, "path", ci.search[i].path);
        json_str(j, "result", ci.search[i].result);
        json_obj_end(j);
    }
    json_arr_end(j);
    if (ci.loaded_path[0])
        json_str(j, "loaded_path", ci.loaded_path);
    else
        json_null(j, "loaded_path");
    json_bool(j, "bound", ci.bound);
    json_int(j, "engine_abi", ci.engine_abi);
    json_int(j, "module_abi", ci.module_abi);
    json_bool(j, "available", ci.available);
    json_int(j, "init_status", ci.init_status);
    json_str(j, "reason", ci.reason);
    json_str(j, "note", ci.note);
    if (ci.available) {
        char cc[32];
        snprintf(cc, sizeof cc, "%d.%d", ci.cc_major, ci.cc_minor);
        json_obj_begin(j, "device");
        json_str(j, "name", ci.device_name);
        json_str(j, "cc", cc);
        json_int(j, "mem_total", ci.mem_total);
        json_int(j, "driver_version", ci.driver_version);
        json_int(j, "runtime_version", ci.runtime_version);
        json_obj_end(j);
    } else {
        json_null(j, "device");
    }
    json_obj_begin(j, "gates");
    json_bool(j, "graph", ci.gate_graph);
    json_bool(j, "graph_m", ci.gate_graph_m);
    json_bool(j, "force_cpu", ci.force_cpu);
    json_int(j, "flops_min", ci.flops_min);
    json_obj_end(j);
    json_bool(j, "resident", ci.resident);
    json_obj_end(j);
}

static void write_build(kt_json *j) {
    kc_info ci;
    kc_get_info(&ci);
    json_obj_begin(j, "build");
    json_str(j, "compiler", KITE_COMPILER);
    json_bool(j, "kite_cuda", ci.compiled);
    json_str(j, "simd", kernels_simd_name());
    json_str(j, "os", kt_os_name());
    json_str(j, "arch", kt_arch_name());
    json_obj_end(j);
}

static int cmd_info(int argc, char **argv) {
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else
            return usage_error("info: unknown argument '%s'", argv[i]);
    }
    if (as_json) {
        kt_json j;
        json_init(&j);
        json_obj_begin(&j, NULL);
        json_str(&j, "kite_version", KITE_VERSION);
        json_int(&j, "abi_version", KCUDA_ABI_VERSION);
        write_build(&j);
        json_int(&j, "threads_default", kt_threads_default());
        write_backend(&j, "cuda");
        json_obj_end(&j);
        printf("%s\n", j.buf ? j.buf : "{}");
        json_free(&j);
        return 0;
    }
    kc_info ci;
    kc_get_info(&ci);
    printf("kite %s (ABI %d)\n", KITE_VERSION, KCUDA_ABI_VERSION);
    printf("build: %s, %s/%s, simd %s, KITE_CUDA %s\n", KITE_COMPILER, kt_os_name(),
           kt_arch_name(), kernels_simd_name(), ci.compiled ? "on" : "off");
    printf("threads (default): %d\n", kt_threads_default());
    printf("cuda module:\n");
    for (int i = 0; i < ci.n_search && i < 3; i++)
        printf("  search %-14s %s: %s\n", ci.search[i].how,
               ci.search[i].path[0] ? ci.search[i].path : "-", ci.search[i].result);
    printf("  loaded: %s\n", ci.loaded_path[0] ? ci.loaded_path : "(none)");
    printf("  bound: %s, engine ABI %d, module ABI %d\n", ci.bound ? "yes" : "no", ci.engine_abi,
           ci.module_abi);
    printf("  available: %s (init status %d)%s%s\n", ci.available ? "yes" : "no", ci.init_status,
           ci.reason[0] ? ", reason: " : "", ci.reason);
    if (ci.note[0])
        printf("  note: %s\n", ci.note);
    if (ci.available)
        printf("  device: %s, cc %d.%d, %lld bytes, driver %d, runtime %d\n", ci.device_name,
               ci.cc_major, ci.cc_minor, (long long)ci.mem_total, ci.driver_version,
               ci.runtime_version);
    printf("  gates: graph %d, graph_m %d, force_cpu %d, flops_min %lld\n", ci.gate_graph,
           ci.gate_graph_m, ci.force_cpu, (long long)ci.flops_min);
    return 0;
}

/* ---- run ------------------------------------------------------------------------------------ */

typedef struct run_opts {
    const char *model, *dump;
    int32_t *prompt;
    int n_prompt, steps, mt, threads, iters, json, ctx;
} run_opts;

static int parse_prompt(const char *s, run_opts *o) {
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    o->prompt = malloc(n * sizeof(int32_t));
    if (!o->prompt)
        return -1;
    o->n_prompt = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0'))
            return -1;
        o->prompt[o->n_prompt++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0')
            return -1;
    }
    return o->n_prompt > 0 ? 0 : -1;
}

static int write_file_atomic(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    int bad = (w != n) | (fclose(f) != 0);
    if (bad || kt_rename_replace(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

static int cmd_run(int argc, char **argv) {
    run_opts o = {0};
    o.mt = 1;
    o.iters = 1;
    o.threads = 0;
    const char *prompt_s = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (strcmp(a, "--json") == 0) {
            o.json = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage_error("run: '%s' needs a value (or is unknown)", a);
        const char *val = argv[++i];
        if (strcmp(a, "--model") == 0) o.model = val;
        else if (strcmp(a, "--prompt") == 0) prompt_s = val;
        else if (strcmp(a, "--dump") == 0) o.dump = val;
        else if (strcmp(a, "--steps") == 0) {
            if (parse_int(val, 0, 1 << 20, &v)) return usage_error("run: bad --steps '%s'", val);
            o.steps = (int)v;
        } else if (strcmp(a, "--mt") == 0) {
            if (parse_int(val, 1, 4096, &v)) return usage_error("run: bad --mt '%s'", val);
            o.mt = (int)v;
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_int(val, 1, 1024, &v)) return usage_error("run: bad --threads '%s'", val);
            o.threads = (int)v;
        } else if (strcmp(a, "--iters") == 0) {
            if (parse_int(val, 1, 1 << 20, &v)) return usage_error("run: bad --iters '%s'", val);
            o.iters = (int)v;
        } else if (strcmp(a, "--ctx") == 0) {
            if (parse_int(val, 1, 1 << 20, &v)) return usage_error("run: bad --ctx '%s'", val);
            o.ctx = (int)v;
        } else
            return usage_error("run: unknown option '%s'", a);
    }
    if (!o.model)
        return usage_error("run: --model is required%s", NULL);
    if (!prompt_s)
        return usage_error("run: --prompt is required%s", NULL);
    if (parse_prompt(prompt_s, &o)) {
        free(o.prompt);
        return usage_error("run: bad --prompt '%s' (comma-separated token ids)", prompt_s);
    }
    if (o.threads == 0)
        o.threads = kt_threads_default();

    char err[1024];
    int rc = 1;
    kt_model md;
    kt_state st;
    memset(&st, 0, sizeof st);
    float *h_all = NULL, *l_all = NULL;
    double *step_ms = NULL, *request_ms = NULL, *prefill_ms = NULL, *decode_ms = NULL;
    int32_t *gen = NULL;
    int model_ok = 0, state_ok = 0;

    double t0 = kt_now_ms();
    if (kt_model_load(&md, o.model, o.ctx, err, sizeof err)) {
        runtime_error(err);
        free(o.prompt);
        return 1;
    }
    model_ok = 1;
    double load_ms = kt_now_ms() - t0;
    const int E = md.hp.n_embd, V = md.hp.n_vocab, P = o.n_prompt, N = o.steps, R = P + N;
    if (R > md.hp.max_pos) {
        snprintf(err, sizeof err, "prompt (%d) + steps (%d) exceed the context length %d (--ctx)",
                 P, N, md.hp.max_pos);
        runtime_error(err);
        goto done;
    }
    for (int i = 0; i < P; i++)
        if (o.prompt[i] >= V) {
            snprintf(err, sizeof err, "prompt token %d is outside the vocabulary (%d)",
                     o.prompt[i], V);
            runtime_error(err);
            goto done;
        }
    double t1 = kt_now_ms();
    if (kt_session_prepare(&md, o.threads, o.mt, err, sizeof err) ||
        kt_state_init(&st, &md, err, sizeof err)) {
        runtime_error(err);
        goto done;
    }
    state_ok = 1;
    double prepare_ms = kt_now_ms() - t1;

    /* outputs: every row with --dump, else only the rows of the current pass */
    size_t rows_kept = o.dump ? (size_t)R : (size_t)o.mt;
    h_all = malloc(rows_kept * E * sizeof(float));
    l_all = malloc(rows_kept * V * sizeof(float));
    step_ms = calloc((size_t)R, sizeof(double));
    request_ms = calloc((size_t)o.iters, sizeof(double));
    prefill_ms = calloc((size_t)o.iters, sizeof(double));
    decode_ms = calloc((size_t)o.iters, sizeof(double));
    gen = calloc((size_t)N + 1, sizeof(int32_t));
    if (!h_all || !l_all || !step_ms || !request_ms || !prefill_ms || !decode_ms || !gen) {
        runtime_error("out of memory for the outputs");
        goto done;
    }
    /* touch the output pages now, outside the request window (no page faults in a step) */
    memset(h_all, 0, rows_kept * E * sizeof(float));
    memset(l_all, 0, rows_kept * V * sizeof(float));
    const long delay_us = kt_env_get()->step_delay_us;

    for (int it = 0; it < o.iters; it++) {
        kt_session_reset(&st, &md); /* outside the request window */
        double w0 = kt_now_ms();
        /* the prompt in one call: on the device its passes run back to back, so a prompt
         * row's step_ms is the prompt's time over its rows */
        if (kt_process_prompt(&md, &st, o.prompt, P, o.mt, h_all, l_all, (int)rows_kept, err,
                              sizeof err)) {
            runtime_error(err);
            goto done;
        }
        kt_busy_wait_us(delay_us * P);
        double w1 = kt_now_ms();
        for (int i = 0; i < P; i++)
            step_ms[i] = (w1 - w0) / P;
        int row = P;
        float *last_logits = l_all + (size_t)((P - 1) % (int)rows_kept) * V;
        for (int s = 0; s < N; s++) {
            int32_t tok = (int32_t)vec_argmax(last_logits, V);
            gen[s] = tok;
            size_t slot = o.dump ? (size_t)row : 0;
            double s0 = kt_now_ms();
            if (kt_process_rows(&md, &st, &tok, 1, h_all + slot * E, l_all + slot * V, err,
                                sizeof err)) {
                runtime_error(err);
                goto done;
            }
            kt_busy_wait_us(delay_us);
            step_ms[row] = kt_now_ms() - s0;
            last_logits = l_all + slot * V;
            row++;
        }
        double w2 = kt_now_ms();
        prefill_ms[it] = w1 - w0;
        decode_ms[it] = w2 - w1;
        request_ms[it] = w2 - w0;
    }

    {
        char digest[65] = "";
        if (o.dump) {
            if (kt_mkdir_p(o.dump) != 0) {
                snprintf(err, sizeof err, "cannot create the dump folder '%s'", o.dump);
                runtime_error(err);
                goto done;
            }
            if (md.gguf.size)
                sha256_hex(md.gguf.base, md.gguf.size, digest);
        }
        kc_counters kc;
        kc_get_counters(&kc);
        kt_json j;
        json_init(&j);
        json_obj_begin(&j, NULL);
        json_str(&j, "kite_version", KITE_VERSION);
        json_obj_begin(&j, "model");
        json_str(&j, "path", o.model);
        json_int(&j, "bytes", (int64_t)md.gguf.size);
        if (o.dump)
            json_str(&j, "sha256", digest);
        else
            json_null(&j, "sha256");
        json_str(&j, "arch", md.arch);
        json_int(&j, "n_layer", md.hp.n_layer);
        json_int(&j, "n_embd", E);
        json_int(&j, "n_vocab", V);
        json_int(&j, "weight_bytes", (int64_t)md.weight_bytes);
        json_int(&j, "max_pos", md.hp.max_pos);
        json_bool(&j, "tied_output", md.tied);
        json_obj_begin(&j, "types");
        for (int t = 0; t < 31; t++)
            if (md.type_count[t] && gguf_type_name(t))
                json_int(&j, gguf_type_name(t), md.type_count[t]);
        json_obj_end(&j);
        json_obj_end(&j);
        json_obj_begin(&j, "request");
        json_arr_begin(&j, "prompt");
        for (int i = 0; i < P; i++)
            json_int(&j, NULL, o.prompt[i]);
        json_arr_end(&j);
        json_int(&j, "prompt_len", P);
        json_int(&j, "steps", N);
        json_int(&j, "mt", o.mt);
        json_int(&j, "threads", kt_pool_size(md.pool));
        json_int(&j, "iters", o.iters);
        json_int(&j, "step_delay_us", delay_us);
        json_obj_end(&j);
        json_arr_begin(&j, "tokens");
        for (int s = 0; s < N; s++)
            json_int(&j, NULL, gen[s]);
        json_arr_end(&j);
        json_obj_begin(&j, "shapes");
        json_arr_begin(&j, "h_out");
        json_int(&j, NULL, R);
        json_int(&j, NULL, E);
        json_arr_end(&j);
        json_arr_begin(&j, "logits");
        json_int(&j, NULL, R);
        json_int(&j, NULL, V);
        json_arr_end(&j);
        json_obj_end(&j);
        write_backend(&j, "backend");
        json_obj_begin(&j, "counters");
        json_int(&j, "gpu_steps", md.counters.gpu_steps);
        json_int(&j, "cpu_steps", md.counters.cpu_steps);
        json_int(&j, "mrow_calls", md.counters.mrow_calls);
        json_int(&j, "cpu_mrow_calls", md.counters.cpu_mrow_calls);
        json_int(&j, "offload_gpu", kc.offload_gpu);
        json_int(&j, "offload_cpu", kc.offload_cpu);
        json_int(&j, "graph_captures", kc.graph_captures);
        json_int(&j, "graph_replays", kc.graph_replays);
        json_int(&j, "mrow_graph_replays", kc.mrow_graph_replays);
        json_int(&j, "stream_steps", kc.stream_steps);
        json_int(&j, "module_gpu_steps", kc.gpu_steps);
        json_int(&j, "module_mrow_calls", kc.mrow_calls);
        json_obj_end(&j);
        json_obj_begin(&j, "timings");
        json_num(&j, "load_ms", load_ms);
        json_num(&j, "prepare_ms", prepare_ms);
        json_arr_begin(&j, "request_ms");
        for (int i = 0; i < o.iters; i++)
            json_num(&j, NULL, request_ms[i]);
        json_arr_end(&j);
        json_arr_begin(&j, "step_ms");
        for (int i = 0; i < R; i++)
            json_num(&j, NULL, step_ms[i]);
        json_arr_end(&j);
        json_arr_begin(&j, "prefill_ms");
        for (int i = 0; i < o.iters; i++)
            json_num(&j, NULL, prefill_ms[i]);
        json_arr_end(&j);
        json_arr_begin(&j, "decode_ms");
        for (int i = 0; i < o.iters; i++)
            json_num(&j, NULL, decode_ms[i]);
        json_arr_end(&j);
        json_obj_end(&j);
        json_obj_end(&j);
        if (j.oom) {
            json_free(&j);
            runtime_error("out of memory writing the meta data");
            goto done;
        }
        if (o.dump) {
            if (write_file_atomic(o.dump, "h_out.f32", h_all, (size_t)R * E * sizeof(float)) ||
                write_file_atomic(o.dump, "logits.f32", l_all, (size_t)R * V * sizeof(float)) ||
                write_file_atomic(o.dump, "meta.json", j.buf, j.len)) {
                json_free(&j);
                snprintf(err, sizeof err, "cannot write the dumps into '%s'", o.dump);
                runtime_error(err);
                goto done;
            }
        }
        if (o.json)
            printf("%s\n", j.buf);
        json_free(&j);
    }
    rc = 0;
done:
    if (state_ok)
        kt_state_free(&st);
    if (model_ok)
        kt_model_free(&md);
    free(h_all); free(l_all); free(step_ms); free(request_ms); free(prefill_ms);
    free(decode_ms); free(gen); free(o.prompt);
    return rc;
}

/* ---- selftest --------------------------------------------------------------------------------- */

static int cmd_selftest(int argc, char **argv) {
    const char *model = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model = argv[++i];
        else
            return usage_error("selftest: unknown argument '%s'", argv[i]);
    }
    return kt_selftest(model) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return 2;
    }
    kernels_init();
    kc_init();
    int rc;
    if (strcmp(argv[1], "info") == 0)
        rc = cmd_info(argc - 2, argv + 2);
    else if (strcmp(argv[1], "run") == 0)
        rc = cmd_run(argc - 2, argv + 2);
    else if (strcmp(argv[1], "selftest") == 0)
        rc = cmd_selftest(argc - 2, argv + 2);
    else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        rc = 0;
    } else
        rc = usage_error("unknown command '%s'", argv[1]);
    kc_shutdown();
    return rc;
}
