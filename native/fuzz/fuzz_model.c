/* fuzz_model.c - libFuzzer entry for the model loader (and, for small models, one short
 * forward pass) on top of the GGUF reader. Built by the CMake option KITE_FUZZ (clang).
 *
 * Every input must end in one of two ways: the loader refuses it with a message, or it loads,
 * and then (when the sequence state is small enough to be worth it) two tokens run through the
 * CPU forward pass. Any sanitizer report, crash, leak, hang or allocation over libFuzzer's limit
 * is a finding.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"
#include "kernels.h"
#include "model.h"
#include "session.h"

/* Only run the forward pass when the state and scratch stay below this many floats: a file of a
 * few hundred kilobytes can declare shapes whose state is gigabytes, which is legal but slow. */
#define FUZZ_FORWARD_FLOATS (4u << 20)
#define FUZZ_CTX 8

static size_t state_floats(const kt_model *md) {
    const kt_hparams *hp = &md->hp;
    size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    size_t n = 2 * (size_t)md->n_full * FUZZ_CTX * kvd;
    n += (size_t)md->n_rec * (size_t)hp->ssm_hv * hp->ssm_dv * hp->ssm_dk;
    n += (size_t)md->n_rec * (size_t)(hp->ssm_conv - 1) * hp->ssm_channels;
    n += 8 * ((size_t)hp->n_embd + hp->n_ff + hp->ssm_channels + 2 * (size_t)hp->n_head * hp->head_dim);
    n += 2 * (size_t)hp->n_vocab;
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kernels_init();
    kc_init(); /* stub build: no device, every offload on the CPU */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kt_model md;
    char err[512];
    if (kt_model_load_memory(&md, data, size, FUZZ_CTX, err, sizeof err) != 0) {
        if (err[0] == '\0')
            abort(); /* a refusal must say why */
        return 0;
    }
    if (state_floats(&md) <= FUZZ_FORWARD_FLOATS &&
        kt_session_prepare(&md, 1, 2, err, sizeof err) == 0) {
        kt_state st;
        if (kt_state_init(&st, &md, err, sizeof err) == 0) {
            const int E = md.hp.n_embd, V = md.hp.n_vocab;
            float *h = malloc(2 * (size_t)E * sizeof(float));
            float *l = malloc(2 * (size_t)V * sizeof(float));
            if (h && l) {
                int32_t tok[2] = {0, V - 1};
                kt_session_reset(&st, &md);
                (void)kt_process_rows(&md, &st, tok, 2, h, l, err, sizeof err);
                (void)kt_process_rows(&md, &st, tok, 1, h, l, err, sizeof err);
            }
            free(h);
            free(l);
            kt_state_free(&st);
        }
    }
    kt_model_free(&md);
    return 0;
}
