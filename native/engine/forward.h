/* forward.h - the CPU forward pass of Qwen3.5 text (forward.c), in the canonical order of
 * docs/NUMERICS.md. */
#ifndef KITE_FORWARD_H
#define KITE_FORWARD_H

#include <stdint.h>

#include "model.h"

/* m rows at positions pos .. pos + m - 1: h_out [m][E] (the final norm's output), logits [m][V].
 * Byte-identical to m calls with one row each. 0 on success, -1 when out of memory. The caller
 * advances st->pos. */
int kt_forward_rows(const kt_model *md, kt_state *st, const int32_t *tokens, int m, int pos,
                    float *h_out, float *logits);

#endif
