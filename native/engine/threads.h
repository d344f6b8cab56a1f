/* threads.h - a small persistent thread pool.
 *
 * kt_pool_run(pool, fn, ctx) calls fn(ctx, tid, n) once on each of the pool's n threads (the
 * caller is thread 0) and returns when all have finished. The engine splits output rows by tid,
 * never a reduction, so results do not depend on n.
 */
#ifndef KITE_THREADS_H
#define KITE_THREADS_H

typedef void (*kt_task_fn)(void *ctx, int tid, int nthreads);
typedef struct kt_pool kt_pool;

kt_pool *kt_pool_create(int nthreads); /* NULL on failure; nthreads >= 1 */
int kt_pool_size(const kt_pool *pool);
void kt_pool_run(kt_pool *pool, kt_task_fn fn, void *ctx);
void kt_pool_free(kt_pool *pool);

/* KITE_THREADS when set to a positive number, else the number of online cores. */
int kt_threads_default(void);

#endif
