"""Tiny random Hugging Face checkpoints of every supported architecture, saved once per test session."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

VOCAB = 128
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_experts_per_tok=2,
    max_position_embeddings=256,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
    # large enough that the router's softmax is decisive and next-token distributions are peaked: near-ties would
    # make greedy comparisons fragile, and a near-uniform router would hide routing bugs
    initializer_range=0.1,
)

# Each architecture exercises its own options: dense layers, head_dim != hidden / heads, tied embeddings,
# RoPE scaling, shared expert, q/k norm variants, clip_qkv.
HF_CONFIGS = {
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        **COMMON,
        num_hidden_layers=3,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_experts=8,
        head_dim=24,
        mlp_only_layers=[1],
        norm_topk_prob=True,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 1e6},
    ),
    "qwen2_moe": lambda: transformers.Qwen2MoeConfig(
        **COMMON,
        num_hidden_layers=3,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_experts=8,
        shared_expert_intermediate_size=48,
        decoder_sparse_step=2,
        norm_topk_prob=False,
        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    ),
    "mixtral": lambda: transformers.MixtralConfig(
        **COMMON,
        num_hidden_layers=2,
        intermediate_size=32,
        num_local_experts=8,
    ),
    "olmoe": lambda: transformers.OlmoeConfig(
        **COMMON,
        num_hidden_layers=2,
        intermediate_size=32,
        num_experts=8,
        clip_qkv=2.0,
    ),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking an `arch` argument runs once per supported architecture."""
    if "arch" in metafunc.fixturenames:
        metafunc.parametrize("arch", list(HF_CONFIGS))


def build_hf_model(arch: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    config = HF_CONFIGS[arch]()
    for key, value in overrides.items():
        setattr(config, key, value)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("mlp.gate.weight"):  # the routers: sharpen them so each token has clear favourites
                param.mul_(4.0)
    return model


@pytest.fixture(scope="session")
def make_hf_model():
    """(arch, seed=0, **config overrides) -> a random float32 transformers model."""
    return build_hf_model


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory) -> dict[str, tuple[torch.nn.Module, Path]]:
    """arch -> (transformers model, directory it was saved to with save_pretrained)."""
    out = {}
    for arch in HF_CONFIGS:
        model = build_hf_model(arch)
        path = tmp_path_factory.mktemp(arch)
        model.save_pretrained(path)
        out[arch] = (model, path)
    return out


@pytest.fixture
def run_cli():
    """Runs `warpcode generate ARGV...` through its own argparse registration; returns the exit code."""
    from warpcode.agent.cli import generate as cli_generate

    def run(argv: list[str]) -> int:
        parser = argparse.ArgumentParser()
        cli_generate.register(parser.add_subparsers())
        args = parser.parse_args(argv)
        return args.handler(args)

    return run
