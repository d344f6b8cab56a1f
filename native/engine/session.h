/* session.h - where each pass runs. The model lives on the device when the CUDA module took it
 * at prepare; each pass goes there first and, when the device refuses, to the CPU forward pass
 * (forward.h) with the same bytes. main.c drives a run through these calls alone:
 *
 *   kt_session_prepare  kt_model_prepare, then the device upload (kc_model_begin /
 *                       kc_model_tensor / kc_model_ready) when a device is available;
 *   kt_session_reset    a new sequence (kc_seq_reset when the model is resident);
 *   kt_process_rows     m tokens at the next positions: the device (kc_step / kc_step_m), else
 *                       the CPU; a device that refuses mid-sequence hands the sequence to the
 *                       CPU, which recomputes it from position 0;
 *   kt_process_prompt   a prompt in passes of m rows, queued back to back on the device
 *                       (kc_prompt), else pass by pass.
 */
#ifndef KITE_SESSION_H
#define KITE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "forward.h"
#include "model.h"

/* 0 on success; -1 with a message (the device's refusal is not a failure). */
int kt_session_prepare(kt_model *md, int n_threads, int max_m, char *err, size_t errlen);
void kt_session_reset(kt_state *st, kt_model *md);

/* m tokens (1 <= m <= max_m) at positions st->pos .. st->pos + m - 1. h_out [m][E],
 * logits [m][V]. 0 on success, -1 with a message (positions past max_pos, out of memory). */
int kt_process_rows(kt_model *md, kt_state *st, const int32_t *tokens, int m, float *h_out,
                    float *logits, char *err, size_t errlen);

/* n tokens in passes of m rows, one call: on the device the passes are queued back to back
 * (kc_prompt), else each pass is kt_process_rows. Row r's outputs go to row r % ring of h_out
 * [ring][E] and logits [ring][V] (ring >= n, or a multiple of m). Same bytes and counters as
 * kt_process_rows pass by pass. */
int kt_process_prompt(kt_model *md, kt_state *st, const int32_t *tokens, int n, int m,
                      float *h_out, float *logits, int ring, char *err, size_t errlen);

#endif
