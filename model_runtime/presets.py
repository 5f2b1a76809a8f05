"""Named model shapes for benchmarks and random-weight runs: `get_preset(name) -> ModelConfig`."""

from __future__ import annotations

import copy

from warpcode.model_runtime.config import ModelConfig

PRESETS: dict[str, ModelConfig] = {
    # qwen3_moe layout at toy size: runs on a CPU in well under a second
    "tiny": ModelConfig(
        model_type="qwen3_moe",
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        qk_norm="per_head",
        rope_theta=1e6,
        max_position_embeddings=4096,
    ),
    # Qwen/Qwen3-30B-A3B (also the shape of Qwen3-Coder-30B-A3B)
    "qwen3-30b-a3b": ModelConfig(
        model_type="qwen3_moe",
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        qk_norm="per_head",
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        max_position_embeddings=40960,
        bos_token_id=151643,
        eos_token_ids=[151645],
    ),
    # mistralai/Mixtral-8x7B-v0.1
    "mixtral-8x7b": ModelConfig(
        model_type="mixtral",
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        rope_theta=1e6,
        rms_norm_eps=1e-5,
        max_position_embeddings=32768,
        bos_token_id=1,
        eos_token_ids=[2],
    ),
    # allenai/OLMoE-1B-7B-0924
    "olmoe-1b-7b": ModelConfig(
        model_type="olmoe",
        vocab_size=50304,
        hidden_size=2048,
        intermediate_size=1024,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        num_experts=64,
        num_experts_per_tok=8,
        qk_norm="full",
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=4096,
        eos_token_ids=[50279],
        pad_token_id=1,
    ),
}


def get_preset(name: str) -> ModelConfig:
    """A fresh copy of the named preset's config (callers may modify it)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})")
    return copy.deepcopy(PRESETS[name])
