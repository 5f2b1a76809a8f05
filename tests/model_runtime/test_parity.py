"""Logits and greedy generation match transformers for every architecture and every checkpoint layout."""

from __future__ import annotations

import json

import pytest
import torch

from warpcode.kernels import route
from warpcode.model_runtime import load

VOCAB, PROMPT_LEN, NEW_TOKENS = 128, 11, 32  # VOCAB: conftest's tiny models


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).norm() / expected.norm()).item()


def prompt(seed: int, length: int = PROMPT_LEN) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(seed))


def hf_greedy(hf_model, ids: torch.Tensor, new_tokens: int = NEW_TOKENS) -> list[int]:
    out = hf_model.generate(ids, max_new_tokens=new_tokens, do_sample=False, attention_mask=torch.ones_like(ids))
    return out[0, ids.shape[1] :].tolist()


def test_logits_and_greedy_match_transformers(arch, hf_checkpoints):
    hf_model, path = hf_checkpoints[arch]
    engine = load(path, device="cpu", dtype=torch.float32, show_progress=False)
    ids = torch.cat([prompt(1), prompt(2)])
    with torch.no_grad():
        expected = hf_model(ids).logits
    assert relative_error(engine.logits(ids), expected) < 1e-5
    for seed in (3, 4):
        ids = prompt(seed)
        assert engine.generate(ids[0].tolist(), NEW_TOKENS, stop_token_ids=[]) == hf_greedy(hf_model, ids)


@pytest.mark.parametrize("model_type", ["qwen3_moe", "mixtral"])
def test_sharded_checkpoint_loads_identically(model_type, tmp_path, hf_checkpoints):
    hf_model, single_path = hf_checkpoints[model_type]
    hf_model.save_pretrained(tmp_path, max_shard_size="40KB")
    assert len(json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]) > 0
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 3
    sharded = load(tmp_path, dtype=torch.float32, show_progress=False)
    single = load(single_path, dtype=torch.float32, show_progress=False)
    ids = prompt(5)
    assert torch.equal(sharded.logits(ids), single.logits(ids))


@pytest.mark.parametrize("model_type", ["qwen2_moe", "mixtral"])
def test_fused_expert_layout_of_transformers_5_loads(model_type, tmp_path, hf_checkpoints):
    hf_model, _ = hf_checkpoints[model_type]
    hf_model.save_pretrained(tmp_path, save_original_format=False)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert any(name.endswith("mlp.experts.gate_up_proj") for name in f.keys())  # noqa: SIM118
    engine = load(tmp_path, dtype=torch.float32, show_progress=False)
    ids = prompt(6)
    with torch.no_grad():
        assert relative_error(engine.logits(ids), hf_model(ids).logits) < 1e-5


def test_parity_check_catches_swapped_gate_and_up(hf_checkpoints):
    """Negative control: the 1e-5 bound is tight enough to see a wrong expert layout."""
    hf_model, path = hf_checkpoints["qwen3_moe"]
    engine = load(path, dtype=torch.float32, show_progress=False)
    w13 = engine.model.model.layers[0].mlp.experts.w13
    w13.copy_(torch.cat(w13.chunk(2, dim=1)[::-1], dim=1))
    ids = prompt(7)
    with torch.no_grad():
        assert relative_error(engine.logits(ids), hf_model(ids).logits) > 1e-3


def test_router_is_not_degenerate(arch, hf_checkpoints):
    """Different tokens pick different experts with decisive weights, so routing bugs change the logits."""
    engine = load(hf_checkpoints[arch][1], dtype=torch.float32, show_progress=False)
    layer = next(layer for layer in engine.model.model.layers if hasattr(layer.mlp, "experts"))
    hidden = layer.post_attention_layernorm(engine.model.model.embed_tokens.weight)  # one row per vocabulary token
    weights, ids = route(layer.mlp.gate(hidden), layer.mlp.top_k, layer.mlp.normalize)
    assert len(set(ids[:, 0].tolist())) >= 6  # of 8 experts
    assert weights[:, 0].mean() > 1.5 * weights[:, 1].mean()


def test_batch_of_different_lengths_equals_one_at_a_time(hf_checkpoints):
    hf_model, path = hf_checkpoints["qwen2_moe"]
    engine = load(path, dtype=torch.float32, show_progress=False)
    prompts = [prompt(10, 3)[0].tolist(), prompt(11, 14)[0].tolist(), prompt(12, 7)[0].tolist()]
    batched = engine.generate_batch(prompts, 20, stop_token_ids=[])
    assert batched == [engine.generate(p, 20, stop_token_ids=[]) for p in prompts]
    assert batched[1] == hf_greedy(hf_model, torch.tensor([prompts[1]]), 20)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_logits_equal_unpadded(side, hf_checkpoints):
    engine = load(hf_checkpoints["olmoe"][1], dtype=torch.float32, show_progress=False)
    short, long = prompt(20, 5)[0], prompt(21, 9)[0]
    pad = torch.zeros(4, dtype=torch.long)
    padded = torch.cat([pad, short]) if side == "left" else torch.cat([short, pad])
    mask = (torch.arange(9) >= 4) if side == "left" else (torch.arange(9) < 5)
    logits = engine.logits(torch.stack([padded, long]), attention_mask=torch.stack([mask, torch.ones(9, dtype=bool)]))
    torch.testing.assert_close(logits[0, mask], engine.logits(short[None])[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[1], engine.logits(long[None])[0], rtol=1e-5, atol=1e-5)


def test_stop_token_ends_generation(hf_checkpoints):
    engine = load(hf_checkpoints["mixtral"][1], dtype=torch.float32, show_progress=False)
    ids = prompt(30)[0].tolist()
    free = engine.generate(ids, 12, stop_token_ids=[])
    stop = free[4]
    assert engine.generate(ids, 12, stop_token_ids=[stop]) == free[: free.index(stop) + 1]


def test_dense_only_and_tied_checkpoint_without_lm_head(tmp_path, make_hf_model):
    hf_model = make_hf_model("qwen3_moe", seed=1, mlp_only_layers=[0, 1, 2])
    hf_model.save_pretrained(tmp_path)
    engine = load(tmp_path, dtype=torch.float32, show_progress=False)
    assert engine.model.lm_head is None
    ids = prompt(40)
    with torch.no_grad():
        assert relative_error(engine.logits(ids), hf_model(ids).logits) < 1e-5
