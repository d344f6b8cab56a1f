/* kite_pick.h - the greedy pick's rule, written once for the engine (C) and the module's host
 * code (C++): the token after a row of logits.
 *
 * The pick of a row v[0..n) is the index that `best = 0; for i: if (v[i] > v[best]) best = i`
 * ends with: the first index of the largest value, a NaN never winning (no comparison with a
 * NaN is true). So a row whose first value is NaN picks 0, as does an empty row. The engine's
 * vec_argmax (vec_math.c) gives the same index by other means; `kite selftest` checks both.
 *
 * A row may be picked in parts, each part on its own and at any time (the module picks each
 * chunk of the logits as a copy thread brings it back), then the parts combined in row order:
 *
 *   kite_pick p = kite_pick_row_start(v, n);
 *   for each part [first, first + len), in row order:
 *       p = kite_pick_combine(p, kite_pick_span(v + first, len, first));
 *   p.index is the row's pick.
 *
 * Host code only, C and C++, so both halves compile the same rule.
 */
#ifndef KITE_PICK_H
#define KITE_PICK_H

#include <math.h> /* INFINITY, NAN */
#include <stdint.h>

/* SSE2 (every x86-64) takes the two passes below 16 and 4 values at a time; a device pass of
 * nvcc or hipcc sees the plain loops alone (host code only, never called there). */
#if (defined(__SSE2__) || defined(_M_X64)) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#  include <emmintrin.h>
#  define KITE_PICK_SSE2 1
#else
#  define KITE_PICK_SSE2 0
#endif

typedef struct kite_pick {
    float value;   /* the largest value seen; NaN when a part has no value that can win */
    int32_t index; /* where it first occurs, as an index of the whole row */
} kite_pick;

/* Where a row's pick starts: its first value at index 0 (a NaN there is never replaced). */
static inline kite_pick kite_pick_row_start(const float *row, int32_t n) {
    kite_pick p;
    p.value = n > 0 ? row[0] : NAN;
    p.index = 0;
    return p;
}

/* The pick of one part v[0..n) lying at index `first` of its row: its largest value that is not
 * NaN and the first index holding it; {NaN, first} when every value is NaN (or n is 0), which
 * never wins a combine. Two passes, as vec_argmax: the maximum, then its first index. */
static inline kite_pick kite_pick_span(const float *v, int32_t n, int32_t first) {
    /* 1. the largest value that is not NaN, -inf if none: a value replaces the maximum only if
     * larger, which a NaN never is; the order of the comparisons does not change a maximum, so
     * running lanes may take them */
    float max = -INFINITY;
    int32_t i = 0;
#if KITE_PICK_SSE2
    if (n >= 16) {
        __m128 a = _mm_set1_ps(max), b = a, c = a, d = a;
        for (; i + 16 <= n; i += 16) { /* _mm_max_ps(x, m) is x > m ? x : m: m on a NaN */
            a = _mm_max_ps(_mm_loadu_ps(v + i), a);
            b = _mm_max_ps(_mm_loadu_ps(v + i + 4), b);
            c = _mm_max_ps(_mm_loadu_ps(v + i + 8), c);
            d = _mm_max_ps(_mm_loadu_ps(v + i + 12), d);
        }
        float lane[16];
        _mm_storeu_ps(lane, a);
        _mm_storeu_ps(lane + 4, b);
        _mm_storeu_ps(lane + 8, c);
        _mm_storeu_ps(lane + 12, d);
        for (int k = 0; k < 16; k++)
            max = lane[k] > max ? lane[k] : max;
    }
#endif
    for (; i < n; i++)
        max = v[i] > max ? v[i] : max;
    /* 2. the first value equal to it: never a NaN; -0 equals +0, as in vec_argmax */
    i = 0;
#if KITE_PICK_SSE2
    const __m128 m4 = _mm_set1_ps(max);
    for (; i + 16 <= n; i += 16) {
        const __m128 e01 = _mm_or_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + i), m4), _mm_cmpeq_ps(_mm_loadu_ps(v + i + 4), m4));
        const __m128 e23 = _mm_or_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + i + 8), m4), _mm_cmpeq_ps(_mm_loadu_ps(v + i + 12), m4));
        if (_mm_movemask_ps(_mm_or_ps(e01, e23)))
            break;
    }
#endif
    kite_pick p;
    p.value = NAN;
    p.index = first;
    for (; i < n; i++)
        if (v[i] == max) {
            p.value = v[i];
            p.index = first + i;
            break;
        }
    return p;
}

/* A part's pick after the picks of the parts before it in the row: it wins only with a
 * strictly larger value, so the first index of the maximum is kept and a NaN never wins. */
static inline kite_pick kite_pick_combine(kite_pick before, kite_pick after) {
    return after.value > before.value ? after : before;
}

/* The pick of a whole row in one part. */
static inline int32_t kite_pick_row(const float *v, int32_t n) {
    return kite_pick_combine(kite_pick_row_start(v, n), kite_pick_span(v, n, 0)).index;
}

#endif /* KITE_PICK_H */
