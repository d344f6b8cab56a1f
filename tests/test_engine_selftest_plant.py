"""`kite selftest` can fail: a test build (KITE_TEST_HOOKS=ON) plants a wrong kernel on request,
KITE_TEST_PLANT_ULP=avx2 or avx512 moving that SIMD tier's quantized block dots one ULP up, and
selftest must then report that tier's byte comparisons as failed and exit 1. Without the plant
the same build passes, so the failures come from the plant alone."""

from __future__ import annotations

import json

import pytest

from engine_build import build_test_variant, run_kite

pytestmark = pytest.mark.native  # builds and runs the real engine


@pytest.fixture(scope="module")
def hooks_bin():
    return build_test_variant("hooks", {"KITE_CUDA": "OFF", "KITE_TEST_HOOKS": "ON"})


def _failed(res) -> set[str]:
    return {ln[5:].split(":")[0] for ln in res.stdout.splitlines() if ln.startswith("FAIL ")}


def test_hooks_build_passes_without_a_plant(hooks_bin):
    res = run_kite(hooks_bin, "selftest", timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    assert res.stdout.rstrip().endswith(" passed, 0 failed")


# the tier's own byte check, and the whole-model check of the SIMD levels against scalar
@pytest.mark.parametrize(
    "tier,simd,must_fail",
    [
        (
            "avx2",
            ("avx2", "avx512vnni"),
            {"dot_q8_0_avx2_vs_scalar", "dot_q4_0_avx2_vs_scalar", "model_random_scalar_vs_simd"},
        ),
        ("avx512", ("avx512vnni",), {"dot_q4_0_avx512_vs_scalar", "model_random_scalar_vs_simd"}),
    ],
)
def test_one_ulp_in_one_tier_fails_selftest(hooks_bin, tier, simd, must_fail):
    info = json.loads(run_kite(hooks_bin, "info", "--json").stdout)
    if info["build"]["simd"] not in simd:
        pytest.skip(f"this CPU runs the {info['build']['simd']} kernels, not the {tier} tier")
    res = run_kite(hooks_bin, "selftest", env={"KITE_TEST_PLANT_ULP": tier}, timeout=300)
    assert res.returncode == 1, res.stdout[-3000:]
    failed = _failed(res)
    assert must_fail <= failed, sorted(failed)
    # the scalar reference and the checks that do not touch the planted kernels still pass
    assert not any(name.startswith(("math_", "gguf_", "f16_", "bf16_")) for name in failed), sorted(failed)
