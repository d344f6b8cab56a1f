/* threads.h - a small persistent thread pool.
 *
 * kt_pool_run(pool, fn, ctx) calls fn(ctx, tid, n) once on each of the pool's n threads (the
 * caller is thread 0) and returns when all have finished. The engine splits output rows by tid,
 * never a reduction, so results do not depend on n.
 *
 * kt_pool_for(pool, n, fn, arg) calls fn(arg, u, tid) for u = 0 .. n-1, the threads claiming
 * units in turn (a thread that the OS delays does not hold the others up); the units must be
 * independent, so which thread computes one never changes a byte.
 */
#ifndef KITE_THREADS_H
#define KITE_THREADS_H

typedef void (*kt_task_fn)(void *ctx, int tid, int nthreads);
typedef struct kt_pool kt_pool;

kt_pool *kt_pool_create(int nthreads); /* NULL on failure; nthreads >= 1 */
int kt_pool_size(const kt_pool *pool);
void kt_pool_run(kt_pool *pool, kt_task_fn fn, void *ctx);
typedef void (*kt_unit_fn)(void *arg, int unit, int tid);
void kt_pool_for(kt_pool *pool, int n, kt_unit_fn fn, void *arg);
void kt_pool_free(kt_pool *pool);

/* KITE_THREADS when set (env_options.h), else the number of online cores. */
int kt_threads_default(void);

#endif
