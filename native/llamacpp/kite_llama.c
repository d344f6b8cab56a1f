/* kite_llama.c - llama.cpp behind kite's engine command line, so kite's criteria can judge it.
 *
 *   kite-llama info [--json]
 *   kite-llama run --model M.gguf --prompt 1,2,3 [--steps N] [--mt M] [--threads T] [--iters K]
 *                  [--ngl L] [--kv-type f32|f16] [--flash-attn off|on|auto] [--dump DIR] [--json]
 *                  [--embeddings on|off] [--keep-rows on|off] [--prompt-logits all|last]
 *                  [--threadpool on|off] [--sampler host|backend]
 *
 * A request: clear the sequence (outside the window), then inside the timed window decode the P
 * prompt tokens as one batch (llama.cpp splits it into micro-batches of --mt rows) and greedily
 * decode N steps, each generated token fed back. Each decode is followed by llama_synchronize, as
 * llama-bench times it: llama_decode returns before a GPU has finished, so without it a window
 * would hold the work of the decode before it.
 * With --dump every row's final normed hidden state (embeddings, pooling none) and logits are
 * kept: h_out.f32 [P+N, E], logits.f32 [P+N, V]. Without it the run is timed as llama.cpp's users
 * (and llama-bench) run it: no embeddings, logits of the last prompt row and of each step only,
 * read in place by the greedy pick, nothing copied. The four toggles set each of these costs
 * apart (docs/ENGINES.md measures them); a persistent CPU thread pool is attached as llama-bench
 * does (--threadpool off: ggml's pool made anew for every graph). --sampler backend picks the
 * greedy token with llama.cpp's backend sampler (an argmax in its graph, on the GPU with --ngl):
 * the logits stay on the device and only the token comes back; it keeps no rows (no --dump).
 * Defaults follow kite's numerics (KV cache in f32, flash attention off), as llama.cpp's reference
 * logits in tests/data/qwen35 were made; `--kv-type f16 --flash-attn auto` are llama.cpp's own defaults.
 * Exit status as kite's: 0 success, 1 runtime failure ("kite-llama: error: ..."), 2 usage. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
struct gguf_context; /* llama.h names it in a prototype before declaring it (a C-only warning) */
#include "llama.h"

#ifndef KITE_LLAMA_BACKEND_SAMPLING /* set by CMakeLists.txt from this revision's llama.h */
#define KITE_LLAMA_BACKEND_SAMPLING 0
#endif

#include "json.h"
#include "platform.h"
#include "run_files.h"

typedef struct run_options {
    const char *model_path;
    const char *dump_dir;
    int32_t *prompt; /* [n_prompt] token ids */
    int n_prompt;
    int steps;
    int rows_per_pass; /* --mt: llama.cpp's n_ubatch */
    int threads;
    int iters;
    int gpu_layers; /* --ngl: -1 = all when a GPU device exists, else 0 */
    int kv_f16;     /* --kv-type f16 (default f32) */
    enum llama_flash_attn_type flash_attn;
    int json;
    int embeddings;   /* --embeddings: -1 = on with --dump, else off */
    int keep_rows;    /* --keep-rows: copy each row's outputs into the run's buffers; -1 = as --dump */
    int prompt_all;   /* --prompt-logits all (1) | last (0); -1 = all with --dump, else last */
    int threadpool;   /* --threadpool: a persistent CPU thread pool (default on) */
    int backend_pick; /* --sampler backend (1): llama.cpp's backend greedy sampler; host (0, default) */
} run_options;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("kite-llama: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage(const char *why) {
    fprintf(stderr,
            "kite-llama: %s\n"
            "usage: kite-llama info [--json]\n"
            "       kite-llama run --model M.gguf --prompt 1,2,3 [--steps N] [--mt M] [--threads T]\n"
            "                      [--iters K] [--ngl L] [--kv-type f32|f16] [--flash-attn off|on|auto]\n"
            "                      [--dump DIR] [--json] [--embeddings on|off] [--keep-rows on|off]\n"
            "                      [--prompt-logits all|last] [--threadpool on|off]\n"
            "                      [--sampler host|backend]\n",
            why);
    exit(2);
}

/* llama.cpp logs to stderr by default; keep its errors only. */
static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    int *last_level = user_data; /* a CONT line continues the message before it */
    if (level != GGML_LOG_LEVEL_CONT)
        *last_level = (int)level;
    if (*last_level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* "on" / "off" (1 / 0) into *out; -1 for anything else. */
static int parse_switch(const char *s, const char *on, const char *off, int *out) {
    if (!strcmp(s, on)) *out = 1;
    else if (!strcmp(s, off)) *out = 0;
    else return -1;
    return 0;
}

static const char *device_kind(enum ggml_backend_dev_type t) {
    switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
    case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
    case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
    default: return "accel";
    }
}

static int gpu_device_count(void) {
    int n = 0;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        enum ggml_backend_dev_type t = ggml_backend_dev_type(ggml_backend_dev_get(i));
        n += t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU;
    }
    return n;
}

static const char *flash_attn_name(enum llama_flash_attn_type t) {
    return t == LLAMA_FLASH_ATTN_TYPE_ENABLED ? "on" : t == LLAMA_FLASH_ATTN_TYPE_DISABLED ? "off" : "auto";
}

/* The "backend" object of info and meta.json: what llama.cpp can prove about where it ran. */
static void json_backend(kt_json *j, int gpu_layers) {
    const char *no_graphs = getenv("GGML_CUDA_DISABLE_GRAPHS");
    json_obj_begin(j, "backend");
    json_str(j, "engine", "llama.cpp");
    json_str(j, "system_info", llama_print_system_info());
    json_int(j, "gpu_devices", gpu_device_count());
    json_bool(j, "available", gpu_device_count() > 0);
    json_int(j, "gpu_layers", gpu_layers);
    json_bool(j, "cuda_graphs_disabled", no_graphs && *no_graphs && strcmp(no_graphs, "0") != 0);
    json_arr_begin(j, "devices");
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        json_obj_begin(j, NULL);
        json_str(j, "name", ggml_backend_dev_name(dev));
        json_str(j, "description", ggml_backend_dev_description(dev));
        json_str(j, "type", device_kind(ggml_backend_dev_type(dev)));
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

static int cmd_info(int argc, char **argv) {
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else
            usage("unknown option for info");
    }
    kt_json j;
    json_init(&j);
    json_obj_begin(&j, NULL);
    json_str(&j, "engine", "llama.cpp");
    json_int(&j, "threads_default", kt_cpu_count());
    json_bool(&j, "backend_sampling", KITE_LLAMA_BACKEND_SAMPLING); /* --sampler backend can run */
    json_backend(&j, gpu_device_count() > 0 ? -1 : 0);
    json_obj_end(&j);
    if (as_json)
        printf("%s\n", j.buf);
    else
        printf("llama.cpp: %d GPU device(s); %s\n", gpu_device_count(), llama_print_system_info());
    json_free(&j);
    return 0;
}

static void parse_run_options(int argc, char **argv, run_options *o) {
    o->rows_per_pass = 1;
    o->iters = 1;
    o->gpu_layers = -1;
    o->flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    o->embeddings = o->keep_rows = o->prompt_all = -1;
    o->threadpool = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!v)
            usage("an option is missing its value");
        if (!strcmp(a, "--model")) o->model_path = v;
        else if (!strcmp(a, "--dump")) o->dump_dir = v;
        else if (!strcmp(a, "--prompt")) bad = !(o->prompt = kt_parse_token_list(v, &o->n_prompt));
        else if (!strcmp(a, "--steps")) bad = parse_int(v, 0, 1 << 20, &o->steps);
        else if (!strcmp(a, "--mt")) bad = parse_int(v, 1, 4096, &o->rows_per_pass);
        else if (!strcmp(a, "--threads")) bad = parse_int(v, 0, 1024, &o->threads);
        else if (!strcmp(a, "--iters")) bad = parse_int(v, 1, 1000, &o->iters);
        else if (!strcmp(a, "--ngl")) bad = parse_int(v, -1, 100000, &o->gpu_layers);
        else if (!strcmp(a, "--kv-type")) {
            bad = strcmp(v, "f32") && strcmp(v, "f16");
            o->kv_f16 = !strcmp(v, "f16");
        } else if (!strcmp(a, "--flash-attn")) {
            if (!strcmp(v, "off")) o->flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else if (!strcmp(v, "on")) o->flash_attn = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (!strcmp(v, "auto")) o->flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else bad = 1;
        }
        else if (!strcmp(a, "--embeddings")) bad = parse_switch(v, "on", "off", &o->embeddings);
        else if (!strcmp(a, "--keep-rows")) bad = parse_switch(v, "on", "off", &o->keep_rows);
        else if (!strcmp(a, "--prompt-logits")) bad = parse_switch(v, "all", "last", &o->prompt_all);
        else if (!strcmp(a, "--threadpool")) bad = parse_switch(v, "on", "off", &o->threadpool);
        else if (!strcmp(a, "--sampler")) bad = parse_switch(v, "backend", "host", &o->backend_pick);
        else usage("unknown option for run");
        if (bad)
            usage("an option has a bad value");
        i++;
    }
    if (!o->model_path || !o->n_prompt)
        usage("run needs --model and --prompt");
    const int dump = o->dump_dir != NULL;
    if (dump && (o->embeddings == 0 || o->keep_rows == 0 || o->prompt_all == 0))
        usage("--dump keeps every row: it needs --embeddings on, --keep-rows on, --prompt-logits all");
    if (o->backend_pick && (dump || o->keep_rows == 1))
        usage("--sampler backend leaves the logits on the device: it keeps no rows (no --dump, --keep-rows off)");
    if (o->embeddings < 0) o->embeddings = dump;
    if (o->keep_rows < 0) o->keep_rows = dump;
    if (o->prompt_all < 0) o->prompt_all = dump;
    if (o->threads == 0)
        o->threads = kt_cpu_count();
    if (o->gpu_layers < 0)
        o->gpu_layers = gpu_device_count() > 0 ? 100000 : 0;
}

/* Greedy pick: the largest logit, the lowest index on a tie (kite's rule). Two passes, so the
 * first vectorizes: the largest value over LANES running maxima (a select, not fmaxf: NaNs never
 * win, as with `>`), then its first index. The same pick as one pass tracking the index. */
static int32_t greedy(const float *logits, int n_vocab) {
    enum { LANES = 16 };
    float lane_max[LANES]; /* [LANES] running maxima of the strided columns */
    for (int j = 0; j < LANES; j++)
        lane_max[j] = logits[0];
    int i = 0;
    for (; i + LANES <= n_vocab; i += LANES)
        for (int j = 0; j < LANES; j++)
            lane_max[j] = logits[i + j] > lane_max[j] ? logits[i + j] : lane_max[j];
    float best = logits[0];
    for (int j = 0; j < LANES; j++)
        best = lane_max[j] > best ? lane_max[j] : best;
    for (; i < n_vocab; i++)
        best = logits[i] > best ? logits[i] : best;
    for (int32_t k = 0; k < n_vocab; k++)
        if (logits[k] == best)
            return k;
    return 0; /* logits[0] is NaN and nothing exceeds it: the one-pass rule keeps index 0 */
}

/* llama_decode and the wait for its work: llama_decode returns before a GPU has finished (llama.cpp
 * waits when an output is read), and llama-bench times the decode with its llama_synchronize. */
static void decode_or_die(struct llama_context *ctx, struct llama_batch batch, const char *what) {
    int32_t rc = llama_decode(ctx, batch);
    if (rc != 0)
        die("llama_decode (%s) returned %d", what, rc);
    llama_synchronize(ctx);
}

/* Output row `index` of the last decode: its logits [V] into logits_row, and with embeddings on
 * its hidden state [E] into h_row. */
static void copy_row(struct llama_context *ctx, int32_t index, int embeddings, float *h_row, int n_embd,
                     float *logits_row, int n_vocab) {
    const float *l = llama_get_logits_ith(ctx, index);
    const float *h = embeddings ? llama_get_embeddings_ith(ctx, index) : NULL;
    if (!l || (embeddings && !h))
        die("llama.cpp returned no output for row %d", index);
    if (embeddings)
        memcpy(h_row, h, (size_t)n_embd * sizeof(float));
    memcpy(logits_row, l, (size_t)n_vocab * sizeof(float));
}

/* The logits [V] greedy reads for the next token: the kept row, or llama.cpp's last output in place. */
static const float *last_logits(struct llama_context *ctx, const float *kept_row) {
    if (kept_row)
        return kept_row;
    const float *l = llama_get_logits_ith(ctx, -1);
    if (!l)
        die("llama.cpp returned no logits for the last row");
    return l;
}

#if KITE_LLAMA_BACKEND_SAMPLING
/* A greedy sampler chain for llama.cpp's backend sampling of sequence 0 (its argmax keeps the
 * first largest logit, kite's rule). */
static struct llama_sampler *backend_greedy(struct llama_context_params *cp, struct llama_sampler_seq_config *seq) {
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (!chain)
        die("llama.cpp could not make a sampler chain");
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    seq->seq_id = 0;
    seq->sampler = chain;
    cp->samplers = seq;
    cp->n_samplers = 1;
    return chain;
}

/* The token llama.cpp's backend sampler picked from the last output row. */
static int32_t backend_token(struct llama_context *ctx) {
    llama_token t = llama_get_sampled_token_ith(ctx, -1);
    if (t == LLAMA_TOKEN_NULL)
        die("llama.cpp's backend sampler gave no token (the sampler could not be offloaded?)");
    return t;
}
#endif

/* The next token: the backend sampler's, or the host's greedy pick over the last logits. */
static int32_t next_token(struct llama_context *ctx, const run_options *o, const float *kept_row, int n_vocab) {
#if KITE_LLAMA_BACKEND_SAMPLING
    if (o->backend_pick)
        return backend_token(ctx);
#endif
    (void)o;
    return greedy(last_logits(ctx, kept_row), n_vocab);
}

/* A persistent CPU thread pool, as llama-bench and llama.cpp's own programs attach one (without
 * it ggml starts and joins its threads for every graph). NULL when the CPU backend has none. */
static struct ggml_threadpool *attach_threadpool(struct llama_context *ctx, int threads) {
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    typedef struct ggml_threadpool *(*new_fn)(struct ggml_threadpool_params *);
    new_fn make = cpu ? (new_fn)ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_new") : NULL;
    if (!make)
        return NULL;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *pool = make(&tpp);
    if (!pool)
        die("cannot start a CPU thread pool of %d threads", threads);
    llama_attach_threadpool(ctx, pool, NULL);
    return pool;
}

static void free_threadpool(struct ggml_threadpool *pool) {
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    typedef void (*free_fn)(struct ggml_threadpool *);
    free_fn release = cpu ? (free_fn)ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_free") : NULL;
    if (pool && release)
        release(pool);
}

static int64_t count_nonfinite(const float *x, size_t n) {
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

static void json_doubles(kt_json *j, const char *key, const double *v, int n) {
    json_arr_begin(j, key);
    for (int i = 0; i < n; i++)
        json_num(j, NULL, v[i]);
    json_arr_end(j);
}

static int cmd_run(int argc, char **argv) {
    run_options o = {0};
    parse_run_options(argc, argv, &o);
    const int rows = o.n_prompt + o.steps; /* P + N */

    double t0 = kt_now_ms();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o.gpu_layers;
    struct llama_model *model = llama_model_load_from_file(o.model_path, mp);
    if (!model)
        die("%s: llama.cpp could not load the model", o.model_path);
    double load_ms = kt_now_ms() - t0;

    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_embd = llama_model_n_embd(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < o.n_prompt; i++)
        if (o.prompt[i] >= n_vocab)
            die("prompt token %d is outside the vocabulary (%d)", o.prompt[i], n_vocab);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)rows;
    cp.n_batch = (uint32_t)(o.n_prompt > o.rows_per_pass ? o.n_prompt : o.rows_per_pass);
    cp.n_ubatch = (uint32_t)o.rows_per_pass;
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.embeddings = o.embeddings != 0;
    cp.pooling_type = LLAMA_POOLING_TYPE_NONE;
    cp.no_perf = false;
    cp.op_offload = o.gpu_layers > 0; /* a CPU run stays on the CPU */
    cp.type_k = o.kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v = cp.type_k;
    cp.flash_attn_type = o.flash_attn;
    struct llama_sampler *sampler_chain = NULL;
    if (o.backend_pick) {
#if KITE_LLAMA_BACKEND_SAMPLING
        static struct llama_sampler_seq_config seq_sampler;
        sampler_chain = backend_greedy(&cp, &seq_sampler);
#else
        die("--sampler backend: this llama.cpp has no backend sampling (llama_get_sampled_token_ith)");
#endif
    }
    t0 = kt_now_ms();
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx)
        die("llama.cpp could not create a context of %d rows", rows);
    struct ggml_threadpool *pool = o.threadpool ? attach_threadpool(ctx, o.threads) : NULL;
    double prepare_ms = kt_now_ms() - t0;

    /* kept rows: every row with --keep-rows on, else none (the greedy pick reads llama.cpp's output) */
    const size_t kept = o.keep_rows ? (size_t)rows : 1;
    float *h_all = calloc(kept * n_embd, sizeof(float));         /* [P+N, E] */
    float *logits_all = calloc(kept * n_vocab, sizeof(float));   /* [P+N, V] */
    int32_t *tokens = malloc((size_t)(o.steps > 0 ? o.steps : 1) * sizeof(int32_t)); /* [N] */
    double *request_ms = calloc((size_t)o.iters, sizeof(double));  /* [K] each, one per iteration */
    double *prefill_ms = calloc((size_t)o.iters, sizeof(double));
    double *decode_ms = calloc((size_t)o.iters, sizeof(double));
    double *step_decode_ms = calloc((size_t)o.iters, sizeof(double)); /* the N decodes, each with its wait */
    double *step_greedy_ms = calloc((size_t)o.iters, sizeof(double)); /* the N picks of the next token */
    double *step_copy_ms = calloc((size_t)o.iters, sizeof(double));   /* the N row copies */
    struct llama_batch prompt_batch = llama_batch_init(o.n_prompt, 0, 1);
    struct llama_batch step_batch = llama_batch_init(1, 0, 1);
    if (!h_all || !logits_all || !tokens || !request_ms || !prefill_ms || !decode_ms || !step_decode_ms ||
        !step_greedy_ms || !step_copy_ms)
        die("out of memory for %d rows", rows);

    for (int iter = 0; iter < o.iters; iter++) {
        llama_memory_clear(llama_get_memory(ctx), true);
        prompt_batch.n_tokens = o.n_prompt;
        for (int i = 0; i < o.n_prompt; i++) {
            prompt_batch.token[i] = o.prompt[i];
            prompt_batch.pos[i] = i;
            prompt_batch.n_seq_id[i] = 1;
            prompt_batch.seq_id[i][0] = 0;
            prompt_batch.logits[i] = o.prompt_all || i == o.n_prompt - 1; /* all rows' outputs, or the last */
        }
        double start = kt_now_ms();
        decode_or_die(ctx, prompt_batch, "prompt");
        if (o.keep_rows)
            for (int i = 0; i < o.n_prompt; i++)
                if (prompt_batch.logits[i])
                    copy_row(ctx, i, o.embeddings, h_all + (size_t)i * n_embd, n_embd,
                             logits_all + (size_t)i * n_vocab, n_vocab);
        double prompt_done = kt_now_ms();
        double in_decode = 0, in_greedy = 0, in_copy = 0;
        for (int s = 0; s < o.steps; s++) {
            const int row = o.n_prompt + s;
            double t_pick = kt_now_ms();
            const float *kept_row = o.keep_rows ? logits_all + (size_t)(row - 1) * n_vocab : NULL;
            tokens[s] = next_token(ctx, &o, kept_row, n_vocab);
            step_batch.n_tokens = 1;
            step_batch.token[0] = tokens[s];
            step_batch.pos[0] = row;
            step_batch.n_seq_id[0] = 1;
            step_batch.seq_id[0][0] = 0;
            step_batch.logits[0] = 1;
            double t_decode = kt_now_ms();
            decode_or_die(ctx, step_batch, "decode step");
            double t_copy = kt_now_ms();
            if (o.keep_rows)
                copy_row(ctx, 0, o.embeddings, h_all + (size_t)row * n_embd, n_embd,
                         logits_all + (size_t)row * n_vocab, n_vocab);
            double t_done = kt_now_ms();
            in_greedy += t_decode - t_pick;
            in_decode += t_copy - t_decode;
            in_copy += t_done - t_copy;
        }
        double end = kt_now_ms();
        request_ms[iter] = end - start;
        prefill_ms[iter] = prompt_done - start;
        decode_ms[iter] = end - prompt_done;
        step_decode_ms[iter] = in_decode;
        step_greedy_ms[iter] = in_greedy;
        step_copy_ms[iter] = in_copy;
    }
    /* non-finite outputs: every kept row; without kept rows, the last row llama.cpp holds */
    const int64_t bad_h = o.keep_rows && o.embeddings ? count_nonfinite(h_all, (size_t)rows * n_embd) : 0;
    const float *last = o.keep_rows || o.backend_pick ? NULL : llama_get_logits_ith(ctx, -1);
    const int64_t bad_logits = o.keep_rows ? count_nonfinite(logits_all, (size_t)rows * n_vocab)
                                           : last ? count_nonfinite(last, (size_t)n_vocab) : 1;

    kt_json j;
    json_init(&j);
    json_obj_begin(&j, NULL);
    json_str(&j, "engine", "llama.cpp");
    json_obj_begin(&j, "model");
    json_str(&j, "path", o.model_path);
    json_int(&j, "bytes", (int64_t)llama_model_size(model));
    json_int(&j, "n_embd", n_embd);
    json_int(&j, "n_vocab", n_vocab);
    json_obj_end(&j);
    json_obj_begin(&j, "request");
    json_arr_begin(&j, "prompt");
    for (int i = 0; i < o.n_prompt; i++)
        json_int(&j, NULL, o.prompt[i]);
    json_arr_end(&j);
    json_int(&j, "prompt_len", o.n_prompt);
    json_int(&j, "steps", o.steps);
    json_int(&j, "mt", o.rows_per_pass);
    json_int(&j, "threads", o.threads);
    json_int(&j, "iters", o.iters);
    json_obj_end(&j);
    json_arr_begin(&j, "tokens");
    for (int s = 0; s < o.steps; s++)
        json_int(&j, NULL, tokens[s]);
    json_arr_end(&j);
    json_obj_begin(&j, "shapes");
    json_arr_begin(&j, "h_out");
    json_int(&j, NULL, rows);
    json_int(&j, NULL, n_embd);
    json_arr_end(&j);
    json_arr_begin(&j, "logits");
    json_int(&j, NULL, rows);
    json_int(&j, NULL, n_vocab);
    json_arr_end(&j);
    json_obj_end(&j);
    json_backend(&j, o.gpu_layers);
    json_obj_begin(&j, "options");
    json_str(&j, "kv_type", o.kv_f16 ? "f16" : "f32");
    json_str(&j, "flash_attn", flash_attn_name(o.flash_attn));
    json_obj_end(&j);
    json_obj_begin(&j, "counters");
    json_int(&j, "gpu_layers", o.gpu_layers);
    json_int(&j, "gpu_devices", gpu_device_count());
    json_int(&j, "graph_reuses", llama_perf_context(ctx).n_reused);
    json_obj_end(&j);
    json_obj_begin(&j, "outputs"); /* what a run computed and kept beyond greedy decoding's needs */
    json_bool(&j, "embeddings", o.embeddings);
    json_bool(&j, "keep_rows", o.keep_rows);
    json_str(&j, "prompt_logits", o.prompt_all ? "all" : "last");
    json_bool(&j, "threadpool", pool != NULL);
    json_str(&j, "sampler", o.backend_pick ? "backend" : "host");
    json_int(&j, "logits_rows_checked", o.keep_rows ? rows : o.backend_pick ? 0 : 1);
    json_obj_end(&j);
    json_obj_begin(&j, "nonfinite"); /* logits: null where none reached the host (--sampler backend) */
    json_int(&j, "h_out", bad_h);
    if (o.backend_pick)
        json_null(&j, "logits");
    else
        json_int(&j, "logits", bad_logits);
    json_obj_end(&j);
    json_obj_begin(&j, "timings");
    json_num(&j, "load_ms", load_ms);
    json_num(&j, "prepare_ms", prepare_ms);
    json_doubles(&j, "request_ms", request_ms, o.iters);
    json_doubles(&j, "prefill_ms", prefill_ms, o.iters);
    json_doubles(&j, "decode_ms", decode_ms, o.iters);
    json_doubles(&j, "step_decode_ms", step_decode_ms, o.iters);
    json_doubles(&j, "step_greedy_ms", step_greedy_ms, o.iters);
    json_doubles(&j, "step_copy_ms", step_copy_ms, o.iters);
    json_obj_end(&j);
    json_obj_end(&j);
    if (j.oom)
        die("out of memory writing meta.json");

    if (o.dump_dir) {
        if (kt_mkdir_p(o.dump_dir) != 0)
            die("%s: cannot create the dump folder", o.dump_dir);
        if (kt_write_file_atomic(o.dump_dir, "h_out.f32", h_all, (size_t)rows * n_embd * sizeof(float)) ||
            kt_write_file_atomic(o.dump_dir, "logits.f32", logits_all, (size_t)rows * n_vocab * sizeof(float)) ||
            kt_write_file_atomic(o.dump_dir, "meta.json", j.buf, j.len))
            die("%s: cannot write the dumps", o.dump_dir);
    }
    if (o.json)
        printf("%s\n", j.buf);

    json_free(&j);
    llama_batch_free(prompt_batch);
    llama_batch_free(step_batch);
    free(h_all);
    free(logits_all);
    free(tokens);
    free(request_ms);
    free(prefill_ms);
    free(decode_ms);
    free(step_decode_ms);
    free(step_greedy_ms);
    free(step_copy_ms);
    free(o.prompt);
    llama_free(ctx);
    if (sampler_chain)
        llama_sampler_free(sampler_chain); /* after its context, which uses it */
    free_threadpool(pool);
    llama_model_free(model);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        usage("no command");
    static int last_log_level = GGML_LOG_LEVEL_NONE;
    llama_log_set(quiet_log, &last_log_level);
    llama_backend_init();
    int rc;
    if (!strcmp(argv[1], "info"))
        rc = cmd_info(argc - 2, argv + 2);
    else if (!strcmp(argv[1], "run"))
        rc = cmd_run(argc - 2, argv + 2);
    else
        usage("unknown command");
    llama_backend_free();
    return rc;
}
