"""config.json parsing, validation and the presets."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime import ModelConfig, UnsupportedConfigError, get_preset, load_random
from warpcode.model_runtime.model import build_model


def test_reads_transformers_config_json(arch, hf_checkpoints):
    hf_model, path = hf_checkpoints[arch]
    config = ModelConfig.from_pretrained(path)
    hf = hf_model.config
    assert config.model_type == arch
    assert config.num_experts == (getattr(hf, "num_experts", None) or hf.num_local_experts)
    assert config.moe_shape == (64, 32, 8, 2)
    assert [config.is_moe_layer(i) for i in range(config.num_hidden_layers)] == [
        type(layer.mlp).__name__.endswith("SparseMoeBlock") for layer in hf_model.model.layers
    ]


def qwen3_raw(**changes) -> dict:
    raw = dict(
        model_type="qwen3_moe",
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        moe_intermediate_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_experts=4,
        num_experts_per_tok=2,
        rope_theta=1e6,
        rope_scaling=None,
    )
    raw.update(changes)
    return raw


def test_hub_style_config_with_old_rope_keys():
    config = ModelConfig.from_dict(
        qwen3_raw(rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    )
    assert config.rope_theta == 1e6
    assert config.rope_scaling.rope_type == "yarn" and config.rope_scaling.factor == 4.0
    assert config.head_dim == 8 and config.expert_intermediate_size == 8


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_type": "llama"}, "model_type 'llama' is not supported"),
        ({"use_sliding_window": True, "sliding_window": 4096}, "sliding-window attention"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope scaling type 'dynamic'"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1}}, "low_freq_factor"),
        ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ],
)
def test_unsupported_options_are_named(changes, message):
    with pytest.raises(UnsupportedConfigError, match=message):
        ModelConfig.from_dict(qwen3_raw(**changes))


def test_mixtral_sliding_window_is_rejected():
    raw = dict(
        model_type="mixtral",
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4096,
    )
    with pytest.raises(UnsupportedConfigError, match="sliding_window=4096"):
        ModelConfig.from_dict(raw)
    raw["sliding_window"] = None
    assert ModelConfig.from_dict(raw).norm_topk_prob  # mixtral always renormalises


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_key_value_heads": 3}, "not a multiple"),
        ({"num_experts_per_tok": 5}, "exceeds num_experts"),
        ({"mlp_only_layers": [2]}, r"mlp_only_layers \[2\]"),
        ({"hidden_size": 0}, "hidden_size must be a positive integer"),
    ],
)
def test_invalid_values_fail_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_dict(qwen3_raw(**changes))


def test_presets_have_the_real_shapes():
    qwen = get_preset("qwen3-30b-a3b")
    assert qwen.moe_shape == (2048, 768, 128, 8)
    assert (qwen.num_hidden_layers, qwen.vocab_size, qwen.num_attention_heads, qwen.num_key_value_heads) == (
        48,
        151936,
        32,
        4,
    )
    assert (qwen.head_dim, qwen.qk_norm, qwen.rope_theta) == (128, "per_head", 1e6)
    assert get_preset("mixtral-8x7b").moe_shape == (4096, 14336, 8, 2)
    assert get_preset("olmoe-1b-7b").moe_shape == (2048, 1024, 64, 8)
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        get_preset("nope")


def test_big_preset_builds_without_materialising():
    model = build_model(get_preset("qwen3-30b-a3b"), device="meta", dtype=torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    assert 30.0e9 < parameters < 31.0e9  # Qwen3-30B-A3B: 30.5B
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_random_tiny_preset_generates():
    engine = load_random("tiny", seed=1)
    out = engine.generate([1, 2, 3], 5, stop_token_ids=[])
    assert len(out) == 5 and all(0 <= t < engine.config.vocab_size for t in out)
    assert engine.generate([1, 2, 3], 5, stop_token_ids=[]) == out
