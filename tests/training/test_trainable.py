"""The model that trains: the built-in shape fits its budget and is a config the runtime accepts, and the training
forward computes what the runtime's reference forward computes, with the gradients of sparse routing."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.training import trainable
from warpcode.training.checkpoint import hf_config
from warpcode.training.model_config import BUILTIN, SMOKE, parameter_count

MEGABYTES_ALLOWED = 32_000_000  # the package's budget for the weights on disk, bf16


@pytest.mark.parametrize("config", [BUILTIN, SMOKE], ids=["builtin", "smoke"])
def test_parameter_count_and_size(config):
    with torch.device("meta"):
        model = MoeForCausalLM(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())
    assert parameter_count(config) * 2 <= MEGABYTES_ALLOWED


def test_builtin_shape():
    assert parameter_count(BUILTIN) == 15_242_496
    assert ModelConfig.from_dict(hf_config(BUILTIN)) == BUILTIN  # config.json reads back as the same shape


def test_training_forward_is_the_runtime_reference_forward():
    model = trainable.new_model(SMOKE, seed=3)
    ids = torch.randint(0, SMOKE.vocab_size, (2, 37), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, balance = trainable.forward(model, ids)
        positions = torch.arange(37).expand(2, 37)
        reference = model(ids, positions, torch.ones_like(ids, dtype=torch.bool))
    torch.testing.assert_close(logits, reference, rtol=1e-5, atol=1e-5)
    assert 1.0 <= balance.item() < SMOKE.num_experts / SMOKE.num_experts_per_tok


def test_a_token_trains_only_the_experts_it_was_routed_to():
    model = trainable.new_model(SMOKE, seed=4)
    layer = model.model.layers[0]
    seen = []
    layer.post_attention_layernorm.register_forward_hook(lambda module, args, out: seen.append(out.detach()))
    logits, _ = trainable.forward(model, torch.tensor([[7]]))
    logits[0, 0, 11].backward()
    routed = torch.softmax(layer.mlp.gate(seen[0][0]), dim=-1).topk(SMOKE.num_experts_per_tok).indices[0]
    trained = {e for e in range(SMOKE.num_experts) if layer.mlp.experts.w13.grad[e].abs().sum() > 0}
    assert trained == set(routed.tolist())
    assert {e for e in range(SMOKE.num_experts) if layer.mlp.experts.w2.grad[e].abs().sum() > 0} == trained
    assert layer.mlp.gate.weight.grad.abs().sum() > 0  # the router learns through the routing weights


def test_balance_loss_is_switch_transformers_and_one_when_balanced():
    block = trainable.new_model(SMOKE, seed=5).model.layers[0].mlp
    x = torch.randn(1, 50, SMOKE.hidden_size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, balance = trainable._experts(block, x, SMOKE)
        probabilities = torch.softmax(block.gate(x[0]), dim=-1)
        picks = probabilities.topk(SMOKE.num_experts_per_tok).indices.tolist()
        share = [sum(e in row for row in picks) / (50 * SMOKE.num_experts_per_tok) for e in range(SMOKE.num_experts)]
        expected = SMOKE.num_experts * sum(f * p for f, p in zip(share, probabilities.mean(0).tolist(), strict=True))
        assert balance.item() == pytest.approx(expected, rel=1e-5)
        block.gate.weight.zero_()  # every expert equally likely, whichever top-k is picked
        assert trainable._experts(block, x, SMOKE)[1].item() == pytest.approx(1.0)
