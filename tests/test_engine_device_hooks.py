"""The engine's device hooks, driven by an emulated module (no CUDA needed).

The module below accepts every call whose rows all lie before position REFUSE_AT (filling
the outputs with placeholder values) and refuses the others: a prompt call (kcuda_prompt, all the
prompt's passes) that reaches REFUSE_AT is refused whole. The engine must then say so on stderr, rebuild
its CPU state from position 0 and carry on: every row from REFUSE_AT on, and the generated
tokens, must be byte-identical to a CPU-only run. REFUSE_AT = 0 means the device refuses the
first row: the whole sequence runs on the CPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from engine_build import build_engine, qwen35_fixtures, run_kite, tokens_of, kite_bin  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine

MODULE_C = r"""
#define KCUDA_BUILD 1
#include "kite_cuda.h"
#include <string.h>

static int dummy, n_embd, n_vocab, uploads;
static void copy(char *d, int32_t n, const char *s) { if (d && n > 0) { strncpy(d, s, (size_t)n - 1); d[n - 1] = 0; } }
static void fill(float *h, float *l, int m) {
    for (int i = 0; i < m * n_embd; i++) h[i] = 0.5f;
    for (int i = 0; i < m * n_vocab; i++) l[i] = (i % n_vocab) == 3 ? 1.0f : 0.0f;
}
KCUDA_API int32_t kcuda_abi_version(void) { return KCUDA_ABI_VERSION; }
KCUDA_API int32_t kcuda_init(char *note, int32_t n) { copy(note, n, "emulated device"); return 0; }
KCUDA_API void kcuda_shutdown(void) {}
KCUDA_API int32_t kcuda_device_info(char *name, int32_t len, int32_t *ma, int32_t *mi, int64_t *mem,
                                    int32_t *drv, int32_t *rt) {
    copy(name, len, "emulated"); *ma = 9; *mi = 0; *mem = 1; *drv = 1; *rt = 1; return 0; }
KCUDA_API int32_t kcuda_set_option(int32_t k, int64_t v) { (void)k; (void)v; return 0; }
KCUDA_API int32_t kcuda_gemm_gw(int32_t t, const void *w, int64_t wb, int32_t n, int32_t k,
                                const int8_t *xq, const float *xd, int32_t m, float *y) {
    (void)t; (void)w; (void)wb; (void)n; (void)k; (void)xq; (void)xd; (void)m; (void)y;
    return KCUDA_E_UNSUPPORTED; }
KCUDA_API kcuda_model *kcuda_model_create(const int32_t *hp, int32_t n, const int32_t *rec, float eps) {
    (void)rec; (void)eps;
    if (n != KCUDA_HP_COUNT) return 0;
    n_embd = hp[KCUDA_HP_N_EMBD]; n_vocab = hp[KCUDA_HP_N_VOCAB];
    return (kcuda_model *)&dummy; }
KCUDA_API int32_t kcuda_model_set_tensor(kcuda_model *m, int32_t l, int32_t r, int32_t t, const void *d,
                                         int64_t a, int64_t b, int64_t nb) {
    (void)m; (void)l; (void)r; (void)t; (void)d; (void)a; (void)b; (void)nb; uploads++; return 0; }
KCUDA_API int32_t kcuda_model_set_rope(kcuda_model *m, const float *c, const float *s, int32_t p, int32_t h) {
    (void)m; (void)c; (void)s; (void)p; (void)h; return 0; }
KCUDA_API int32_t kcuda_model_prepare(kcuda_model *m, int32_t mm) { (void)m; (void)mm; return uploads > 0 ? 0 : KCUDA_E_STATE; }
KCUDA_API int32_t kcuda_seq_reset(kcuda_model *m) { (void)m; return 0; }
KCUDA_API int32_t kcuda_step(kcuda_model *m, int32_t tok, int32_t pos, float *h, float *l) {
    (void)m; (void)tok;
    if (pos >= REFUSE_AT) return KCUDA_E_UNSUPPORTED;
    fill(h, l, 1); return 0; }
KCUDA_API int32_t kcuda_step_m(kcuda_model *m, const int32_t *t, int32_t mm, int32_t pos, float *h, float *l) {
    (void)m; (void)t;
    if (pos + mm > REFUSE_AT) return KCUDA_E_UNSUPPORTED;
    fill(h, l, mm); return 0; }
KCUDA_API int32_t kcuda_prompt(kcuda_model *m, const int32_t *t, int32_t n, int32_t mm, int32_t pos,
                               float *h, float *l, int32_t ring) {
    (void)m; (void)t; (void)mm;
    if (pos + n > REFUSE_AT) return KCUDA_E_UNSUPPORTED;
    fill(h, l, n < ring ? n : ring); return 0; }
KCUDA_API int32_t kcuda_model_counters(kcuda_model *m, int64_t *out, int32_t n) {
    (void)m; for (int i = 0; i < n; i++) out[i] = 0; return 0; }
KCUDA_API void kcuda_model_free(kcuda_model *m) { (void)m; }
"""


@pytest.fixture(scope="session")
def kite_loader_bin():
    """The engine with the run-time loader (KITE_CUDA=ON); needs no CUDA toolkit."""
    if sys.platform == "win32":
        pytest.skip("the emulated module is built as a POSIX shared object")
    return build_engine("default")


def _module(tmp_path, refuse_at: int):
    from engine_build import REPO

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the emulated module")
    src = tmp_path / "emulated.c"
    src.write_text(MODULE_C)
    out = tmp_path / f"libemulated_{refuse_at}.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            f"-DREFUSE_AT={refuse_at}",
            f"-I{REPO / 'native' / 'include'}",
            str(src),
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


def _run(exe, model, prompt, out, *extra, env=None):
    res = run_kite(exe, "run", "--model", model, "--prompt", prompt, "--steps", "4", "--dump", out, *extra, env=env)
    assert res.returncode == 0, res.stderr
    meta = json.loads((out / "meta.json").read_text())
    n, e = meta["shapes"]["h_out"]
    v = meta["shapes"]["logits"][1]
    h = np.fromfile(out / "h_out.f32", dtype="<f4").reshape(n, e)
    lg = np.fromfile(out / "logits.f32", dtype="<f4").reshape(n, v)
    return h, lg, meta, res.stderr


@pytest.mark.parametrize("refuse_at,mt", [(0, 1), (9, 1), (8, 4), (20, 5), (24, 5), (26, 4), (100, 1)])
def test_device_refusal_falls_back_to_cpu(kite_bin, kite_loader_bin, qwen35_fixtures, tmp_path, refuse_at, mt):
    fx = qwen35_fixtures / "tiny-b"
    model = fx / "tiny-b-q8_0.gguf"
    prompt = tokens_of(fx)
    h0, l0, m0, _ = _run(kite_bin, model, prompt, tmp_path / "cpu")
    lib = _module(tmp_path, refuse_at)
    h1, l1, m1, err = _run(
        kite_loader_bin, model, prompt, tmp_path / "dev", "--mt", str(mt), env={"KITE_CUDA_LIB": str(lib)}
    )
    backend = m1["backend"]
    assert backend["bound"] and backend["available"], backend
    # the host layer drops residency after a refusal
    assert backend["resident"] == (refuse_at >= 24 + 4), backend
    c = m1["counters"]
    rows = 24 + 4
    # the calls the engine makes: the prompt in one (its passes of mt rows), then one per step
    calls = [[min(mt, 24 - p) for p in range(0, 24, mt)]] + [[1]] * 4
    done_on_device, gpu_steps, mrow_calls = 0, 0, 0
    for passes in calls:
        if done_on_device + sum(passes) > refuse_at:
            break
        done_on_device += sum(passes)
        gpu_steps += sum(m == 1 for m in passes)
        mrow_calls += sum(m > 1 for m in passes)
    if refuse_at >= rows:  # the device did everything: placeholder outputs, no CPU rows
        assert c["cpu_steps"] == 0 and "warning" not in err
        assert np.all(h1 == 0.5)
        return
    assert (c["gpu_steps"], c["mrow_calls"]) == (gpu_steps, mrow_calls)
    assert c["cpu_steps"] == rows - done_on_device
    if done_on_device > 0:
        assert "recomputing the sequence on the CPU" in err
    else:
        assert "warning" not in err
    if done_on_device >= 24:
        return  # the first generated token came from the device's placeholder logits
    # from the first refused row on: the CPU's bytes exactly
    assert h1[done_on_device:].tobytes() == h0[done_on_device:].tobytes()
    assert l1[done_on_device:].tobytes() == l0[done_on_device:].tobytes()
    assert m1["tokens"] == m0["tokens"]


def test_selftest_device_checks_fail_on_wrong_bytes(kite_loader_bin, tmp_path):
    """selftest's whole-model device checks (pass by pass and as one prompt call, rings included)
    compare bytes: a device that answers with placeholders must fail each of them, not pass."""
    lib = _module(tmp_path, 100000)
    res = run_kite(kite_loader_bin, "selftest", env={"KITE_CUDA_LIB": str(lib)})
    assert res.returncode == 1, res.stdout[-2000:]
    failed = {ln.split(":")[0][5:] for ln in res.stdout.splitlines() if ln.startswith("FAIL ")}
    want = {"model_random_device_m1", "model_random_device_m4"} | {
        f"model_random_device_prompt_m{m}_ring{r}" for m, r in [(1, 11), (2, 11), (4, 11), (2, 2), (4, 4)]
    }
    assert want <= failed, sorted(failed)
    assert all("bytes differ from the CPU" in ln for ln in res.stdout.splitlines()
               if ln.startswith("FAIL model_random_device"))
