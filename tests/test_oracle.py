"""The engine against Hugging Face transformers on random Qwen3.5 configs (harness/tools/oracle.py).

Marked `oracle`: needs torch and transformers, which only `nox -s oracle` installs; skipped with
the reason when they are absent, so the default test run does not need them. The pure parts (config
generation, comparison) are checked without them.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_build import kite_bin  # noqa: F401
from harness.tools import oracle


def test_configs_are_seeded_and_quantisable():
    a, b = oracle.random_configs(8, 3), oracle.random_configs(8, 3)
    assert a == b
    assert a != oracle.random_configs(8, 4)
    for c in a:
        kinds = set(c.layer_types)
        assert kinds == {"linear_attention", "full_attention"}
        E, F = c.hidden_size, c.intermediate_size
        HD = c.num_attention_heads * c.head_dim
        Hv_dv = c.linear_num_value_heads * c.linear_head_dim
        assert all(n % 32 == 0 for n in (E, F, HD, Hv_dv)), c.summary()
        assert HD != E
        assert c.num_attention_heads % c.num_key_value_heads == 0
        assert c.linear_num_value_heads % c.linear_num_key_heads == 0
        assert c.n_rot >= 2 and c.n_rot % 2 == 0 and sum(c.mrope_section) == c.n_rot // 2
        assert all(0 <= t < c.vocab_size for t in c.tokens)
    assert any(c.linear_num_value_heads > c.linear_num_key_heads >= 2 for c in a)  # value-head reorder
    assert {c.tie_word_embeddings for c in a} == {True, False}


def test_compare_bars():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(5, 40)).astype(np.float32)
    same = oracle.compare(ref.copy(), ref)
    assert same.rel == 0 and same.nmse == 0 and same.argmax_same == 5 and same.f32_ok
    off = ref.copy()
    p = 2
    off[p, int(np.abs(off[p]).argmin())] += 3e-4 * np.abs(ref[p]).max()  # one entry, not the argmax
    c = oracle.compare(off, ref)
    assert 2.9e-4 < c.rel < 3.1e-4 and not c.f32_ok and c.argmax_same == 5
    swapped = ref.copy()
    swapped[0] = -swapped[0]
    assert oracle.compare(swapped, ref).argmax_same < 5


@pytest.fixture
def hf_stack():
    """Skip (before the engine is built) when the optional dependencies are absent."""
    for mod in ("torch", "transformers"):
        pytest.importorskip(mod, reason=f"{mod} is an optional dependency: run `nox -s oracle -- pytest`")


@pytest.mark.oracle
@pytest.mark.native
def test_engine_matches_transformers(hf_stack, kite_bin, tmp_path):
    configs = oracle.random_configs(3, 11)
    results = oracle.run_oracle(configs, kite_bin, tmp_path)
    failed = [f"config {r.config.index} ({r.config.summary()}): {'; '.join(r.failures)}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
