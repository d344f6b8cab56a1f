/* membw: read-only memory bandwidth probe for the CPU decode benchmark.
 *
 * Streams (sums) a buffer of BYTES bytes with T threads, each thread reading its own contiguous
 * slice, REPS times; prints one JSON object with the best and the median GB/s per thread count.
 * Elapsed time of a repetition = last thread's end - first thread's start (after a barrier).
 *
 *   cc -O3 -march=native -pthread -o membw membw.c
 *   ./membw [BYTES] [REPS] [THREADS...]        e.g. ./membw 1073741824 5 1 2
 *
 * POSIX (pthreads, clock_gettime); used by bench/cpu_decode.py, not part of the engine.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 256
#define MAX_REPS 64

typedef struct {
    const uint64_t *p;
    size_t n; /* uint64 words */
    pthread_barrier_t *bar;
    double t0, t1;
    uint64_t sum;
} job_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Eight independent accumulators: the loop vectorizes and is limited by memory, not by adds. */
static uint64_t sum_words(const uint64_t *restrict p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += p[i + 0]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
        s4 += p[i + 4]; s5 += p[i + 5]; s6 += p[i + 6]; s7 += p[i + 7];
    }
    for (; i < n; i++) s0 += p[i];
    return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

static void *worker(void *arg) {
    job_t *j = (job_t *)arg;
    pthread_barrier_wait(j->bar);
    j->t0 = now_s();
    j->sum = sum_words(j->p, j->n);
    j->t1 = now_s();
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : ((size_t)1 << 30);
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int nthr_list[16], nlist = 0;
    for (int a = 3; a < argc && nlist < 16; a++) nthr_list[nlist++] = atoi(argv[a]);
    if (nlist == 0) { nthr_list[0] = 1; nthr_list[1] = 2; nlist = 2; }
    if (reps < 1 || reps > MAX_REPS || bytes < 4096) {
        fprintf(stderr, "membw: usage: membw [BYTES>=4096] [REPS 1..%d] [THREADS...]\n", MAX_REPS);
        return 2;
    }
    size_t words = bytes / sizeof(uint64_t);
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, words * sizeof(uint64_t)) != 0) {
        fprintf(stderr, "membw: cannot allocate %zu bytes\n", bytes);
        return 1;
    }
    for (size_t i = 0; i < words; i++) buf[i] = i * 0x9E3779B97F4A7C15ull; /* touch every page */

    uint64_t check = 0;
    printf("{\"bytes\": %zu, \"reps\": %d, \"results\": [", words * sizeof(uint64_t), reps);
    for (int k = 0; k < nlist; k++) {
        int T = nthr_list[k];
        if (T < 1 || T > MAX_THREADS) { fprintf(stderr, "membw: bad thread count %d\n", T); return 2; }
        double gbps[MAX_REPS];
        for (int r = 0; r < reps; r++) {
            pthread_t th[MAX_THREADS];
            job_t jobs[MAX_THREADS];
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, (unsigned)T);
            size_t per = words / (size_t)T;
            for (int t = 0; t < T; t++) {
                jobs[t].p = buf + (size_t)t * per;
                jobs[t].n = t == T - 1 ? words - (size_t)t * per : per;
                jobs[t].bar = &bar;
                pthread_create(&th[t], NULL, worker, &jobs[t]);
            }
            double t0 = 1e300, t1 = 0;
            for (int t = 0; t < T; t++) {
                pthread_join(th[t], NULL);
                if (jobs[t].t0 < t0) t0 = jobs[t].t0;
                if (jobs[t].t1 > t1) t1 = jobs[t].t1;
                check += jobs[t].sum;
            }
            pthread_barrier_destroy(&bar);
            gbps[r] = (double)(words * sizeof(uint64_t)) / (t1 - t0) / 1e9;
        }
        qsort(gbps, (size_t)reps, sizeof(double), cmp_double);
        printf("%s{\"threads\": %d, \"best_gbps\": %.3f, \"median_gbps\": %.3f, \"runs_gbps\": [",
               k ? ", " : "", T, gbps[reps - 1], gbps[reps / 2]);
        for (int r = 0; r < reps; r++) printf("%s%.3f", r ? ", " : "", gbps[r]);
        printf("]}");
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)(check & 0xFFFF));
    free(buf);
    return 0;
}
