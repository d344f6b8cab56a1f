/* env_options.h - the engine's environment variables, each read by one rule, for the stub and
 * the real CUDA host alike (docs/KITE-ENGINE.md, "Environment").
 *
 * Unset or empty: the default, silently. A value that does not parse (a flag other than 0 or 1,
 * a number with other characters or out of its range) is refused: one warning line on stderr,
 * and the default is used.
 */
#ifndef KITE_ENV_OPTIONS_H
#define KITE_ENV_OPTIONS_H

#include <stdint.h>

#define KT_FLOPS_MIN_DEFAULT 1000000     /* 2 m n k of one product: below it, no per-op offload */
#define KT_THREADS_MAX 1024
#define KT_STEP_DELAY_US_MAX (1L << 30)

typedef struct kt_env {
    int cuda_graph;          /* KITE_CUDA_GRAPH     0 or 1, default 1 */
    int cuda_graph_m;        /* KITE_CUDA_GRAPH_M   0 or 1, default 0 */
    int cuda_force_cpu;      /* KITE_CUDA_FORCE_CPU 0 or 1, default 0 */
    int64_t cuda_flops_min;  /* KITE_CUDA_FLOPS_MIN 0 or more, default KT_FLOPS_MIN_DEFAULT */
    int threads;             /* KITE_THREADS        1 .. KT_THREADS_MAX, default the online cores */
    long step_delay_us;      /* KITE_DEBUG_STEP_DELAY_US 0 .. KT_STEP_DELAY_US_MAX, default 0 */
    const char *cuda_lib;    /* KITE_CUDA_LIB       a path; NULL when unset or empty */
} kt_env;

/* The environment, read on the first call (warnings then), the same values afterwards. */
const kt_env *kt_env_get(void);

#endif
