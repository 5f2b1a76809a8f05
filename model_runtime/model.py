"""The decoder: embeddings, N x (attention + MoE or dense MLP), final norm, LM head.

`MoeForCausalLM.forward` is the runtime's reference forward: cache-free, unfused, the model's own layers (run by
`Engine.logits`), held to transformers by tests/model_runtime/test_parity.py. The three forward paths that generate
run other code for speed, and each is tested against this one (tests/model_runtime/):
- prefill.py: several sequences' new tokens in one pass, into the paged KV cache (test_prefill.py);
- prefill_graphs.py: one sequence's chunk, padded for CUDA graphs (test_prefill_graphs.py);
- decode_step.py: one token per row through fused kernels, eager or replayed as a CUDA graph by decode_runner.py
  (test_decode.py, test_decode_gpu.py; the fused kernels against their fallbacks in test_decode_fused.py);
and the serving engine's generations against greedy decoding with this forward (test_serving.py and
test_partial_blocks.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from warpcode.kernels.mx import is_mx
from warpcode.model_runtime.attention import Attention, attention_bias
from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.layers import DenseMLP, RMSNorm, RotaryEmbedding
from warpcode.model_runtime.moe_block import SparseMoeBlock
from warpcode.model_runtime.mx_weights import empty_mx, fill_, named_weights, set_weight
from warpcode.model_runtime.weight_formats import WEIGHT_FORMATS


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.self_attn = Attention(config, layer)
        self.mlp = (
            SparseMoeBlock(config)
            if config.is_moe_layer(layer)
            else DenseMLP(config.hidden_size, config.intermediate_size)
        )
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary = RotaryEmbedding(config)


class MoeForCausalLM(nn.Module):
    """Parameter names follow the Hugging Face checkpoints (`model.layers.N.self_attn.q_proj.weight`, ...), except
    the routed experts, stacked as `model.layers.N.mlp.experts.w13` / `.w2`."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.model = Decoder(config)
        # Tied checkpoints reuse the embedding matrix as the LM head (see output_weight).
        self.lm_head = (
            None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )

    @property
    def output_weight(self) -> torch.Tensor:  # [V, H]
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(
        self,
        input_ids: torch.Tensor,  # int64 [B, T]
        positions: torch.Tensor,  # int64 [B, T]: rotary positions, counted from each sequence's first real token
        token_valid: torch.Tensor,  # bool [B, T]: False for padding
    ) -> torch.Tensor:  # fp [B, T, V]
        """The reference forward, without a cache (Engine.logits; module docstring); generation runs prefill.py
        and decode_step.py, tested against it."""
        return F.linear(self.hidden_states(input_ids, positions, token_valid), self.output_weight)

    def hidden_states(
        self, input_ids: torch.Tensor, positions: torch.Tensor, token_valid: torch.Tensor
    ) -> torch.Tensor:  # fp [B, T, H]
        """`forward` before the LM head: the final norm's output, for callers that project a few rows at a time."""
        x = self.model.embed_tokens(input_ids)
        mask = attention_bias(token_valid, x.dtype)
        cos, sin = self.model.rotary(positions, x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x)


def build_model(
    config: ModelConfig, device: torch.device | str, dtype: torch.dtype, weights: str = "bf16"
) -> MoeForCausalLM:
    """Allocates the parameters, uninitialised, directly on `device` in `dtype`: no fp32 copy on the CPU first.
    weights="mxfp8": the projections and experts as MXTensors (mx_weights.py), never allocated in `dtype`."""
    check_weight_format(weights)
    device = torch.device(device)
    with torch.device("meta"):
        model = MoeForCausalLM(config)
    model.to(dtype=dtype)
    if weights == "mxfp8":
        use_mx_weights(model, device)
    return model.to_empty(device=device).eval().requires_grad_(False)


def check_weight_format(weights: str) -> None:
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weights format {weights!r} (known: {', '.join(WEIGHT_FORMATS)})")


def mx_weight_owners(model: nn.Module) -> Iterator[tuple[nn.Module, str]]:
    """(module, attribute) of every weight weights="mxfp8" stores in MXFP8 (listed in mx_weights.py)."""

    def dense(mlp: DenseMLP) -> Iterator[tuple[nn.Module, str]]:
        for projection in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
            yield projection, "weight"

    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        for projection in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
            yield projection, "weight"
        if isinstance(mlp, SparseMoeBlock):
            yield mlp.experts, "w13"
            yield mlp.experts, "w2"
            if mlp.shared_expert is not None:
                yield from dense(mlp.shared_expert)
        else:
            yield from dense(mlp)


def use_mx_weights(model: nn.Module, device: torch.device) -> None:
    """Replaces each weight `mx_weight_owners` lists (on the meta device, before allocation) with an uninitialised
    MXTensor on `device`, so that the model's plain-dtype copy of it never exists."""
    for module, name in mx_weight_owners(model):
        set_weight(module, name, empty_mx(getattr(module, name).shape, device))


@torch.no_grad()
def init_random_weights(model: MoeForCausalLM, seed: int = 0, std: float = 0.02) -> None:
    """Norm weights 1, everything else N(0, std), generated on the weights' own device; MX weights generated in the
    model dtype and quantised one expert (one [N, K] slice) at a time."""
    embedding = model.model.embed_tokens.weight
    generator = torch.Generator(device=embedding.device).manual_seed(seed)

    def normal(shape: torch.Size) -> torch.Tensor:
        return torch.empty(shape, dtype=embedding.dtype, device=embedding.device).normal_(0.0, std, generator=generator)

    for name, weight in named_weights(model):
        if name.endswith("norm.weight"):
            weight.fill_(1.0)
        elif name.endswith(".bias"):
            weight.zero_()
        elif is_mx(weight):
            fill_(weight, normal)
        else:
            weight.normal_(0.0, std, generator=generator)
