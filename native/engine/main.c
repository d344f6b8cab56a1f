/* main.c - the kite command line: info, run, selftest (docs/KITE-ENGINE.md). */
#include <errno.h>
#include <limits.h>
#include <math.h>
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
#include "run_files.h"
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

/* The message (fmt with arg for its one %s, cut at 1 KiB) on one line, then the usage. */
static int usage_error(const char *fmt, const char *arg) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    fprintf(stderr, "kite: error: ");
    kt_fputs_one_line(msg, stderr);
    fprintf(stderr, "\n");
    usage();
    return 2;
}

static int runtime_error(const char *msg) {
    fprintf(stderr, "kite: error: ");
    kt_fputs_one_line(msg, stderr);
    fprintf(stderr, "\n");
    return 1;
}

/* "kite: error: WHAT 'PATH': why" with the whole path, however long (no message buffer). */
static int path_error(const char *what, const char *path, int cause) {
    fprintf(stderr, "kite: error: %s '", what);
    kt_fputs_one_line(path, stderr);
    fprintf(stderr, "': %s\n", strerror(cause));
    return 1;
}

/* An option's value: a whole decimal number in [lo, hi] and nothing after it. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    const char *rest;
    long long v;
    if (kt_parse_whole(s, &rest, lo, hi, &v) || *rest)
        return -1;
    *out = (long)v;
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
        if (strcmp(argv[i], "--json") != 0)
            return usage_error("info: unknown argument '%s'", argv[i]);
        if (as_json)
            return usage_error("info: '%s' given twice", argv[i]);
        as_json = 1;
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

/* The options of `run`; the first is the only one without a value. */
static const char *const run_options[] = {"--json", "--model", "--prompt", "--dump", "--steps",
                                          "--mt", "--threads", "--iters", "--ctx"};
#define RUN_OPTION_COUNT (int)(sizeof run_options / sizeof run_options[0])

/* The index of a in run_options, or -1. */
static int run_option_index(const char *a) {
    for (int k = 0; k < RUN_OPTION_COUNT; k++)
        if (strcmp(a, run_options[k]) == 0)
            return k;
    return -1;
}

/* The options of `run` into o (o->prompt allocated); 0, or the usage error's exit status. */
static int parse_run_args(int argc, char **argv, run_opts *o) {
    const char *prompt_s = NULL;
    int seen[RUN_OPTION_COUNT] = {0};
    memset(o, 0, sizeof *o);
    o->mt = 1;
    o->iters = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        long v;
        const int k = run_option_index(a);
        if (k < 0)
            return usage_error("run: unknown option '%s'", a);
        if (seen[k]++) /* which one was meant is not ours to guess */
            return usage_error("run: '%s' given twice", a);
        if (k == 0) {
            o->json = 1;
            continue;
        }
        if (i + 1 >= argc)
            return usage_error("run: '%s' needs a value", a);
        const char *val = argv[++i];
        if (strcmp(a, "--model") == 0) o->model = val;
        else if (strcmp(a, "--prompt") == 0) prompt_s = val;
        else if (strcmp(a, "--dump") == 0) o->dump = val;
        else if (strcmp(a, "--steps") == 0) {
            if (parse_int(val, 0, 1 << 20, &v)) return usage_error("run: bad --steps '%s'", val);
            o->steps = (int)v;
        } else if (strcmp(a, "--mt") == 0) {
            if (parse_int(val, 1, 4096, &v)) return usage_error("run: bad --mt '%s'", val);
            o->mt = (int)v;
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_int(val, 1, 1024, &v)) return usage_error("run: bad --threads '%s'", val);
            o->threads = (int)v;
        } else if (strcmp(a, "--iters") == 0) {
            if (parse_int(val, 1, 1 << 20, &v)) return usage_error("run: bad --iters '%s'", val);
            o->iters = (int)v;
        } else if (strcmp(a, "--ctx") == 0) {
            if (parse_int(val, 1, 1 << 20, &v)) return usage_error("run: bad --ctx '%s'", val);
            o->ctx = (int)v;
        } else
            return usage_error("run: unknown option '%s'", a);
    }
    if (!o->model)
        return usage_error("run: --model is required%s", NULL);
    if (!prompt_s)
        return usage_error("run: --prompt is required%s", NULL);
    if (!(o->prompt = kt_parse_token_list(prompt_s, &o->n_prompt)))
        return usage_error("run: bad --prompt '%s' (comma-separated token ids)", prompt_s);
    if (o->threads == 0)
        o->threads = kt_threads_default();
    return 0;
}

/* What a run produces: the kept output rows, the generated tokens, the timings. */
typedef struct run_outputs {
    size_t rows_kept;          /* every row with --dump, else the rows of one pass */
    float *h_all;              /* [rows_kept][E] */
    float *l_all;              /* [rows_kept][V] */
    int32_t *gen;              /* [steps] generated tokens */
    double *step_ms;           /* [P + N] per row, last iteration */
    double *request_ms, *prefill_ms, *decode_ms; /* [iters] */
    double *greedy_ms;         /* [iters] the decode window's greedy picks, summed */
    double load_ms, prepare_ms;
} run_outputs;

static int outputs_alloc(run_outputs *out, const run_opts *o, const kt_model *md) {
    const size_t E = md->hp.n_embd, V = md->hp.n_vocab, R = (size_t)o->n_prompt + o->steps;
    out->rows_kept = o->dump ? R : (size_t)o->mt;
    out->h_all = malloc(out->rows_kept * E * sizeof(float));
    out->l_all = malloc(out->rows_kept * V * sizeof(float));
    out->gen = calloc((size_t)o->steps + 1, sizeof(int32_t));
    out->step_ms = calloc(R, sizeof(double));
    out->request_ms = calloc((size_t)o->iters, sizeof(double));
    out->prefill_ms = calloc((size_t)o->iters, sizeof(double));
    out->decode_ms = calloc((size_t)o->iters, sizeof(double));
    out->greedy_ms = calloc((size_t)o->iters, sizeof(double));
    if (!out->h_all || !out->l_all || !out->gen || !out->step_ms || !out->request_ms ||
        !out->prefill_ms || !out->decode_ms || !out->greedy_ms)
        return -1;
    /* touch the output pages now, outside the request window (no page faults in a step) */
    memset(out->h_all, 0, out->rows_kept * E * sizeof(float));
    memset(out->l_all, 0, out->rows_kept * V * sizeof(float));
    return 0;
}

static void outputs_free(run_outputs *out) {
    free(out->h_all); free(out->l_all); free(out->gen); free(out->step_ms);
    free(out->request_ms); free(out->prefill_ms); free(out->decode_ms); free(out->greedy_ms);
}

/* The model file loaded and checked against the request; 0, or -1 after the message (the model
 * then closed). */
static int load_for_request(kt_model *md, const run_opts *o, run_outputs *out) {
    char err[1024];
    double t0 = kt_now_ms();
    if (kt_model_load(md, o->model, o->ctx, err, sizeof err)) {
        runtime_error(err);
        return -1;
    }
    out->load_ms = kt_now_ms() - t0;
    err[0] = '\0';
    if (o->n_prompt + o->steps > md->hp.max_pos)
        snprintf(err, sizeof err, "prompt (%d) + steps (%d) exceed the context length %d (--ctx)",
                 o->n_prompt, o->steps, md->hp.max_pos);
    for (int i = 0; i < o->n_prompt && !err[0]; i++)
        if (o->prompt[i] >= md->hp.n_vocab)
            snprintf(err, sizeof err, "prompt token %d is outside the vocabulary (%d)", o->prompt[i],
                     md->hp.n_vocab);
    if (err[0]) {
        runtime_error(err);
        kt_model_free(md);
        return -1;
    }
    return 0;
}

/* One request: a new sequence, then inside the timed window the prompt in one call and the
 * greedy steps, each generated token fed back. */
static int run_request(kt_model *md, kt_state *st, const run_opts *o, run_outputs *out, int it,
                       long delay_us) {
    const size_t E = md->hp.n_embd, V = md->hp.n_vocab;
    const int P = o->n_prompt;
    char err[1024];
    kt_session_reset(st, md); /* outside the request window */
    double w0 = kt_now_ms();
    /* on the device the prompt's passes run back to back, so a prompt row's step_ms is the
     * prompt's time over its rows */
    if (kt_process_prompt(md, st, o->prompt, P, o->mt, out->h_all, out->l_all,
                          (int)out->rows_kept, err, sizeof err)) {
        runtime_error(err);
        return -1;
    }
    kt_busy_wait_us((int64_t)delay_us * P); /* long is 32 bits on Windows */
    double w1 = kt_now_ms();
    for (int i = 0; i < P; i++)
        out->step_ms[i] = (w1 - w0) / P;
    const float *last_logits = out->l_all + (size_t)((P - 1) % (int)out->rows_kept) * V;
    double greedy_ms = 0.0; /* the host's share of the window: picking each next token */
    for (int s = 0; s < o->steps; s++) {
        const int row = P + s;
        const size_t slot = o->dump ? (size_t)row : 0;
        double g0 = kt_now_ms();
        int32_t tok = (int32_t)vec_argmax(last_logits, (int)V);
        greedy_ms += kt_now_ms() - g0;
        out->gen[s] = tok;
        double s0 = kt_now_ms();
        if (kt_process_rows(md, st, &tok, 1, out->h_all + slot * E, out->l_all + slot * V, err,
                            sizeof err)) {
            runtime_error(err);
            return -1;
        }
        kt_busy_wait_us(delay_us);
        out->step_ms[row] = kt_now_ms() - s0;
        last_logits = out->l_all + slot * V;
    }
    double w2 = kt_now_ms();
    out->prefill_ms[it] = w1 - w0;
    out->decode_ms[it] = w2 - w1;
    out->greedy_ms[it] = greedy_ms;
    out->request_ms[it] = w2 - w0;
    return 0;
}

static void json_ints(kt_json *j, const char *key, const int32_t *v, int n) {
    json_arr_begin(j, key);
    for (int i = 0; i < n; i++)
        json_int(j, NULL, v[i]);
    json_arr_end(j);
}

static void json_nums(kt_json *j, const char *key, const double *v, int n) {
    json_arr_begin(j, key);
    for (int i = 0; i < n; i++)
        json_num(j, NULL, v[i]);
    json_arr_end(j);
}

static void json_shape(kt_json *j, const char *key, int rows, int cols) {
    json_arr_begin(j, key);
    json_int(j, NULL, rows);
    json_int(j, NULL, cols);
    json_arr_end(j);
}

static void write_meta_model(kt_json *j, const kt_model *md, const run_opts *o) {
    char digest[65] = "";
    json_obj_begin(j, "model");
    json_str(j, "path", o->model);
    json_int(j, "bytes", (int64_t)md->gguf.size);
    if (o->dump) { /* the digest costs a read of the whole file: only for dumps */
        if (md->gguf.size)
            sha256_hex(md->gguf.base, md->gguf.size, digest);
        json_str(j, "sha256", digest);
    } else {
        json_null(j, "sha256");
    }
    json_str(j, "arch", md->arch);
    json_int(j, "n_layer", md->hp.n_layer);
    json_int(j, "n_embd", md->hp.n_embd);
    json_int(j, "n_vocab", md->hp.n_vocab);
    json_int(j, "weight_bytes", (int64_t)md->weight_bytes);
    json_int(j, "max_pos", md->hp.max_pos);
    json_bool(j, "tied_output", md->tied);
    json_obj_begin(j, "types");
    for (int t = 0; t < 31; t++)
        if (md->type_count[t] && gguf_type_name(t))
            json_int(j, gguf_type_name(t), md->type_count[t]);
    json_obj_end(j);
    json_obj_end(j);
}

static void write_meta_counters(kt_json *j, const kt_model *md) {
    kc_counters kc;
    kc_get_counters(&kc);
    json_obj_begin(j, "counters");
    json_int(j, "gpu_steps", md->counters.gpu_steps);
    json_int(j, "cpu_steps", md->counters.cpu_steps);
    json_int(j, "mrow_calls", md->counters.mrow_calls);
    json_int(j, "cpu_mrow_calls", md->counters.cpu_mrow_calls);
    json_int(j, "offload_gpu", kc.offload_gpu);
    json_int(j, "offload_cpu", kc.offload_cpu);
    json_int(j, "graph_captures", kc.graph_captures);
    json_int(j, "graph_replays", kc.graph_replays);
    json_int(j, "mrow_graph_replays", kc.mrow_graph_replays);
    json_int(j, "stream_steps", kc.stream_steps);
    json_int(j, "module_gpu_steps", kc.gpu_steps);
    json_int(j, "module_mrow_calls", kc.mrow_calls);
    json_obj_end(j);
}

/* NaN and infinite values among n floats. */
static int64_t count_nonfinite(const float *v, size_t n) {
    int64_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += !isfinite(v[i]);
    return count;
}

/* The meta object (docs/KITE-ENGINE.md, meta.json) into j. */
static void write_meta(kt_json *j, const kt_model *md, const run_opts *o, const run_outputs *out,
                       long delay_us) {
    const int R = o->n_prompt + o->steps;
    json_obj_begin(j, NULL);
    json_str(j, "kite_version", KITE_VERSION);
    write_meta_model(j, md, o);
    json_obj_begin(j, "request");
    json_ints(j, "prompt", o->prompt, o->n_prompt);
    json_int(j, "prompt_len", o->n_prompt);
    json_int(j, "steps", o->steps);
    json_int(j, "mt", o->mt);
    json_int(j, "threads", kt_pool_size(md->pool));
    json_int(j, "iters", o->iters);
    json_int(j, "step_delay_us", delay_us);
    json_obj_end(j);
    json_ints(j, "tokens", out->gen, o->steps);
    json_obj_begin(j, "shapes");
    json_shape(j, "h_out", R, md->hp.n_embd);
    json_shape(j, "logits", R, md->hp.n_vocab);
    json_obj_end(j);
    json_obj_begin(j, "nonfinite"); /* in the rows kept: all P + N with --dump, else the last pass */
    json_int(j, "h_out", count_nonfinite(out->h_all, out->rows_kept * md->hp.n_embd));
    json_int(j, "logits", count_nonfinite(out->l_all, out->rows_kept * md->hp.n_vocab));
    json_obj_end(j);
    write_backend(j, "backend");
    write_meta_counters(j, md);
    json_obj_begin(j, "timings");
    json_num(j, "load_ms", out->load_ms);
    json_num(j, "prepare_ms", out->prepare_ms);
    json_nums(j, "request_ms", out->request_ms, o->iters);
    json_nums(j, "step_ms", out->step_ms, R);
    json_nums(j, "prefill_ms", out->prefill_ms, o->iters);
    json_nums(j, "decode_ms", out->decode_ms, o->iters);
    json_nums(j, "step_greedy_ms", out->greedy_ms, o->iters);
    json_obj_end(j);
    json_obj_end(j);
}

/* --dump DIR: h_out.f32, logits.f32 and meta.json, each written whole or not at all. */
static int write_dumps(const char *dir, const kt_model *md, const run_outputs *out, int rows,
                       const kt_json *meta) {
    const size_t E = md->hp.n_embd, V = md->hp.n_vocab;
    if (kt_write_file_atomic(dir, "h_out.f32", out->h_all, (size_t)rows * E * sizeof(float)) ||
        kt_write_file_atomic(dir, "logits.f32", out->l_all, (size_t)rows * V * sizeof(float)) ||
        kt_write_file_atomic(dir, "meta.json", meta->buf, meta->len)) {
        path_error("cannot write the dumps into", dir, errno);
        return -1;
    }
    return 0;
}

/* Load, prepare, run the requests, then report: meta.json and the dumps, or --json. */
static int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_run_args(argc, argv, &o);
    if (rc) {
        free(o.prompt);
        return rc;
    }
    const long delay_us = kt_env_get()->step_delay_us;
    char err[1024];
    kt_model md;
    kt_state st;
    run_outputs out;
    memset(&st, 0, sizeof st);
    memset(&out, 0, sizeof out);
    if (o.dump && kt_mkdir_p(o.dump) != 0) { /* before the requests: a long run must not fail at its end */
        path_error("cannot create the dump folder", o.dump, errno);
        free(o.prompt);
        return 1;
    }
    if (load_for_request(&md, &o, &out)) {
        free(o.prompt);
        return 1;
    }
    rc = 1;
    double t1 = kt_now_ms();
    if (kt_session_prepare(&md, o.threads, o.mt, err, sizeof err) ||
        kt_state_init(&st, &md, err, sizeof err)) {
        runtime_error(err);
        goto done;
    }
    out.prepare_ms = kt_now_ms() - t1;
    if (outputs_alloc(&out, &o, &md)) {
        runtime_error("out of memory for the outputs");
        goto done;
    }
    for (int it = 0; it < o.iters; it++)
        if (run_request(&md, &st, &o, &out, it, delay_us))
            goto done;
    kt_json j;
    json_init(&j);
    write_meta(&j, &md, &o, &out, delay_us);
    if (j.oom)
        runtime_error("out of memory writing the meta data");
    else if (!o.dump || write_dumps(o.dump, &md, &out, o.n_prompt + o.steps, &j) == 0) {
        if (o.json)
            printf("%s\n", j.buf);
        rc = 0;
    }
    json_free(&j);
done:
    kt_state_free(&st);
    kt_model_free(&md);
    outputs_free(&out);
    free(o.prompt);
    return rc;
}

/* ---- selftest --------------------------------------------------------------------------------- */

static int cmd_selftest(int argc, char **argv) {
    const char *model = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--model") != 0)
            return usage_error("selftest: unknown argument '%s'", argv[i]);
        if (model)
            return usage_error("selftest: '%s' given twice", argv[i]);
        if (i + 1 >= argc)
            return usage_error("selftest: '%s' needs a value", argv[i]);
        model = argv[++i];
    }
    return kt_selftest(model) == 0 ? 0 : 1;
}

/* rc, or 1 when what was printed on stdout did not all get out (a full disk, a closed pipe):
 * output lost must not exit 0. */
static int finish_stdout(int rc) {
    const int flush_failed = fflush(stdout) != 0;
    const int cause = errno; /* meaningful only when the flush itself failed */
    if (!flush_failed && !ferror(stdout))
        return rc;
    char err[256];
    snprintf(err, sizeof err, "cannot write the standard output%s%s", flush_failed ? ": " : "",
             flush_failed ? strerror(cause) : "");
    runtime_error(err);
    return rc ? rc : 1;
}

static int is_help(const char *a) {
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
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
    else if (is_help(argv[1]) && argc == 2) {
        usage();
        rc = 0;
    } else if (is_help(argv[1]))
        rc = usage_error("unknown argument '%s'", argv[2]);
    else
        rc = usage_error("unknown command '%s'", argv[1]);
    kc_shutdown();
    return finish_stdout(rc);
}
