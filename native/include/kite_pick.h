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
 * Host code only; plain C99 / C++ (no intrinsics), so both halves compile the same rule.
 */
#ifndef KITE_PICK_H
#define KITE_PICK_H

#include <math.h> /* INFINITY, NAN */
#include <stdint.h>

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
 * never wins a combine. The maximum is kept in 8 running lanes (the order in which values are
 * compared does not change a maximum), then the first value equal to it is found. */
static inline kite_pick kite_pick_span(const float *v, int32_t n, int32_t first) {
    float lane[8];
    for (int k = 0; k < 8; k++)
        lane[k] = -INFINITY;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] = v[i + k] > lane[k] ? v[i + k] : lane[k];
    float max = lane[0];
    for (int k = 1; k < 8; k++)
        max = lane[k] > max ? lane[k] : max;
    for (; i < n; i++)
        max = v[i] > max ? v[i] : max;
    kite_pick p;
    p.value = NAN;
    p.index = first;
    for (i = 0; i < n; i++)
        if (v[i] == max) { /* never true for a NaN; -0 equals +0, as in vec_argmax */
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
