/* threads.c - see threads.h. Workers spin briefly on a generation counter, then sleep on a
 * condition variable; pthreads on POSIX, Windows threads under _WIN32. */
#if !defined(_WIN32)
#  define _POSIX_C_SOURCE 200809L
#endif
#include "threads.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "env_options.h"
#include "platform.h"

#if defined(_WIN32)
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
typedef CRITICAL_SECTION kt_mutex;
typedef CONDITION_VARIABLE kt_cond;
typedef HANDLE kt_thread;
#  define mutex_init(m) InitializeCriticalSection(m)
#  define mutex_destroy(m) DeleteCriticalSection(m)
#  define mutex_lock(m) EnterCriticalSection(m)
#  define mutex_unlock(m) LeaveCriticalSection(m)
#  define cond_init(c) InitializeConditionVariable(c)
#  define cond_destroy(c) ((void)0)
#  define cond_wait(c, m) SleepConditionVariableCS(c, m, INFINITE)
#  define cond_broadcast(c) WakeAllConditionVariable(c)
#  define thread_yield() SwitchToThread()
#else
#  include <pthread.h>
#  include <sched.h>
typedef pthread_mutex_t kt_mutex;
typedef pthread_cond_t kt_cond;
typedef pthread_t kt_thread;
#  define mutex_init(m) pthread_mutex_init(m, NULL)
#  define mutex_destroy(m) pthread_mutex_destroy(m)
#  define mutex_lock(m) pthread_mutex_lock(m)
#  define mutex_unlock(m) pthread_mutex_unlock(m)
#  define cond_init(c) pthread_cond_init(c, NULL)
#  define cond_destroy(c) pthread_cond_destroy(c)
#  define cond_wait(c, m) pthread_cond_wait(c, m)
#  define cond_broadcast(c) pthread_cond_broadcast(c)
#  define thread_yield() sched_yield()
#endif

#if defined(__x86_64__) || defined(__i386__)
#  define cpu_relax() __builtin_ia32_pause()
#else
#  define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000

struct kt_worker {
    struct kt_pool *pool;
    int tid;
    kt_thread th;
};

struct kt_pool {
    int n;
    struct kt_worker *workers;
    kt_mutex mu;
    kt_cond cv;
    atomic_uint gen;  /* bumped for every job */
    atomic_int done;  /* workers finished with the current job */
    atomic_int stop;
    kt_task_fn fn;
    void *ctx;
};

static void worker_loop(struct kt_worker *w) {
    struct kt_pool *p = w->pool;
    unsigned seen = 0; /* the generation at creation: a job posted before this thread ran is not missed */
    for (;;) {
        int spins = 0;
        while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop) && spins < SPIN_ITERS) {
            cpu_relax();
            spins++;
        }
        if (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) {
            mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                cond_wait(&p->cv, &p->mu);
            mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return;
        seen = atomic_load(&p->gen);
        p->fn(p->ctx, w->tid, p->n);
        atomic_fetch_add(&p->done, 1);
    }
}

#if defined(_WIN32)
static DWORD WINAPI worker_main(LPVOID arg) {
    worker_loop((struct kt_worker *)arg);
    return 0;
}
#else
static void *worker_main(void *arg) {
    worker_loop((struct kt_worker *)arg);
    return NULL;
}
#endif

kt_pool *kt_pool_create(int nthreads) {
    if (nthreads < 1)
        nthreads = 1;
    kt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = nthreads;
    p->workers = calloc((size_t)nthreads, sizeof *p->workers);
    if (!p->workers) {
        free(p);
        return NULL;
    }
    mutex_init(&p->mu);
    cond_init(&p->cv);
    atomic_init(&p->gen, 0u);
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, 0);
    for (int i = 1; i < nthreads; i++) {
        struct kt_worker *w = &p->workers[i];
        w->pool = p;
        w->tid = i;
#if defined(_WIN32)
        w->th = CreateThread(NULL, 0, worker_main, w, 0, NULL);
        if (!w->th) {
            p->n = i;
            break;
        }
#else
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
            p->n = i; /* run with the threads we have: results do not depend on n */
            break;
        }
#endif
    }
    return p;
}

int kt_pool_size(const kt_pool *pool) {
    return pool ? pool->n : 1;
}

void kt_pool_run(kt_pool *p, kt_task_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->done, 0);
    mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1u);
    cond_broadcast(&p->cv);
    mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load(&p->done) < p->n - 1) {
        if (++spins < SPIN_ITERS)
            cpu_relax();
        else
            thread_yield();
    }
}

typedef struct unit_job {
    kt_unit_fn fn;
    void *arg;
    int n;
    atomic_int next;
} unit_job;

static void unit_task(void *ctx, int tid, int nthreads) {
    unit_job *j = (unit_job *)ctx;
    (void)nthreads;
    for (int u; (u = atomic_fetch_add(&j->next, 1)) < j->n;)
        j->fn(j->arg, u, tid);
}

void kt_pool_for(kt_pool *p, int n, kt_unit_fn fn, void *arg) {
    unit_job j;
    j.fn = fn;
    j.arg = arg;
    j.n = n;
    atomic_init(&j.next, 0);
    if (n > 1)
        kt_pool_run(p, unit_task, &j);
    else
        unit_task(&j, 0, 1);
}

void kt_pool_free(kt_pool *p) {
    if (!p)
        return;
    mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    cond_broadcast(&p->cv);
    mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) {
#if defined(_WIN32)
        WaitForSingleObject(p->workers[i].th, INFINITE);
        CloseHandle(p->workers[i].th);
#else
        pthread_join(p->workers[i].th, NULL);
#endif
    }
    cond_destroy(&p->cv);
    mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int kt_threads_default(void) {
    return kt_env_get()->threads;
}
