"""Model recipes: validation, the 0.8B shape (never generated in tests), tensor plans."""

from __future__ import annotations

import pytest

from harness.models.quant import tensor_type
from harness.models.recipes import RecipeError, load_recipe, parse_recipe

TINY_TEXT = """
name: t
vocab_size: 512
hidden_size: 64
num_hidden_layers: 4
layer_types: [linear, linear, linear, full]
intermediate_size: 128
num_attention_heads: 4
num_key_value_heads: 2
head_dim: 16
linear_num_key_heads: 2
linear_num_value_heads: 4
linear_key_head_dim: 16
linear_value_head_dim: 16
rope_sections: [1, 1, 0, 0]
"""


def test_tiny_recipe_has_both_layer_types_and_no_f16_fallback():
    r = load_recipe("tiny")
    c = r.config
    assert r.type == "q8_0"
    assert {"linear", "full"} <= set(c.layer_types)
    for s in c.tensor_specs():
        if len(s.ne) == 2 and not s.name.endswith("ssm_conv1d.weight"):
            assert s.ne[0] % 32 == 0, s.name
            assert tensor_type(s.name, s.ne, "q8_0").name == "Q8_0"
            assert tensor_type(s.name, s.ne, "q4_0").name == "Q4_0"


def test_qwen35_0p8b_shape_and_parameter_count():
    c = load_recipe("qwen35-0.8b").config
    assert c.n_params() == 752_393_024  # 752M, tied embeddings
    assert c.layer_types == ("linear", "linear", "linear", "full") * 6
    assert c.n_rot == 64 and c.conv_dim == 6144
    specs = {s.name: s.ne for s in c.tensor_specs()}
    assert "output.weight" not in specs  # tied
    assert specs["token_embd.weight"] == (1024, 248320)
    assert specs["blk.0.attn_qkv.weight"] == (1024, 6144)
    assert specs["blk.0.attn_gate.weight"] == (1024, 2048)
    assert specs["blk.0.ssm_conv1d.weight"] == (4, 6144)
    assert specs["blk.0.ssm_out.weight"] == (2048, 1024)
    assert specs["blk.0.ssm_a"] == (16,)
    assert specs["blk.3.attn_q.weight"] == (1024, 4096)
    assert specs["blk.3.attn_k.weight"] == (1024, 512)
    assert specs["blk.3.attn_output.weight"] == (2048, 1024)
    assert specs["blk.3.attn_q_norm.weight"] == (256,)
    assert specs["blk.23.ffn_down.weight"] == (3584, 1024)
    assert "blk.3.ssm_a" not in specs and "blk.0.attn_q.weight" not in specs
    assert len(specs) == 18 * 14 + 6 * 11 + 2


def test_layer_pattern_expands():
    text = TINY_TEXT.replace("layer_types: [linear, linear, linear, full]", "layer_pattern: [linear, full]")
    assert parse_recipe(text).config.layer_types == ("linear", "full", "linear", "full")


@pytest.mark.parametrize("edit, message", [
    (("name: t", "name: t\nbogus: 1"), "unknown key"),
    (("vocab_size: 512\n", ""), "missing required key(s) vocab_size"),
    (("linear_num_value_heads: 4", "linear_num_value_heads: 3"), "multiple of linear_num_key_heads"),
    (("linear_value_head_dim: 16", "linear_value_head_dim: 32"), "must equal linear_value_head_dim"),
    (("[linear, linear, linear, full]", "[linear, linear, lin, full]"), "'lin' is not one of"),
    (("[linear, linear, linear, full]", "[linear, full]"), "layer_types has 2 entries"),
    (("rope_sections: [1, 1, 0, 0]", "rope_sections: [11, 11, 10, 0]"), "exceeds head_dim"),
    (("hidden_size: 64", "hidden_size: -64"), "hidden_size must be a positive integer"),
    (("hidden_size: 64", "hidden_size: sixty"), "hidden_size must be a positive integer"),
    (("name: t", "name: t\ntype: q5_k"), "type must be one of"),
    (("name: t", "name: t\nrope_theta: fast"), "rope_theta must be a number"),
    (("name: t", "name: t\ninit: {warmth: 1}"), "unknown init key"),
    (("vocab_size: 512", "vocab_size: 100"), "vocab_size must be at least 258"),
    (("name: t", "name: t\narch: llama"), "arch must be 'qwen35'"),
])
def test_recipe_validation_errors(edit, message):
    old, new = edit
    assert old in TINY_TEXT
    with pytest.raises(RecipeError) as e:
        parse_recipe(TINY_TEXT.replace(old, new), "bad.yaml")
    assert message in str(e.value)
    assert "bad.yaml" in str(e.value)


def test_pattern_must_divide_layers():
    text = TINY_TEXT.replace("layer_types: [linear, linear, linear, full]", "layer_pattern: [linear, linear, full]")
    with pytest.raises(RecipeError, match="not a multiple of the layer_pattern length"):
        parse_recipe(text)


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(RecipeError, match="known: .*tiny"):
        load_recipe("no-such-recipe")


def test_not_yaml_mapping():
    with pytest.raises(RecipeError, match="mapping"):
        parse_recipe("- 1\n- 2\n")
    with pytest.raises(RecipeError, match="not valid YAML"):
        parse_recipe("a: [1, 2\n")
