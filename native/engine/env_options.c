/* env_options.c - see env_options.h. */
#include "env_options.h"

#include <stdio.h>
#include <stdlib.h>

#include "platform.h"
#include "run_files.h"

static kt_env env;
static int env_read;

/* The value of name, or NULL when unset or empty. */
static const char *value_of(const char *name) {
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}


static int read_flag(const char *name, int dflt) {
    const char *s = value_of(name);
    if (!s)
        return dflt;
    if ((s[0] == '0' || s[0] == '1') && s[1] == '\0')
        return s[0] == '1';
    fprintf(stderr, "kite: warning: %s='", name);
    kt_fputs_one_line(s, stderr);
    fprintf(stderr, "' is not 0 or 1; using the default %d\n", dflt);
    return dflt;
}

static long long read_number(const char *name, long long lo, long long hi, long long dflt) {
    const char *s = value_of(name);
    long long v;
    if (!s)
        return dflt;
    const char *rest;
    if (kt_parse_whole(s, &rest, lo, hi, &v) == 0 && *rest == '\0')
        return v;
    fprintf(stderr, "kite: warning: %s='", name);
    kt_fputs_one_line(s, stderr);
    fprintf(stderr, "' is not a whole number from %lld to %lld; using the default %lld\n", lo, hi,
            dflt);
    return dflt;
}

const kt_env *kt_env_get(void) {
    if (env_read)
        return &env;
    env_read = 1;
    env.cuda_graph = read_flag("KITE_CUDA_GRAPH", 1);
    env.cuda_graph_m = read_flag("KITE_CUDA_GRAPH_M", 0);
    env.cuda_force_cpu = read_flag("KITE_CUDA_FORCE_CPU", 0);
    env.cuda_flops_min = read_number("KITE_CUDA_FLOPS_MIN", 0, INT64_MAX, KT_FLOPS_MIN_DEFAULT);
    env.threads = (int)read_number("KITE_THREADS", 1, KT_THREADS_MAX, kt_cpu_count());
    env.step_delay_us = (long)read_number("KITE_DEBUG_STEP_DELAY_US", 0, KT_STEP_DELAY_US_MAX, 0);
    env.cuda_lib = value_of("KITE_CUDA_LIB");
    return &env;
}
