"""The trained model as a Hugging Face checkpoint directory, the form the runtime (and transformers) load:

config.json             qwen3_moe, Qwen3MoeForCausalLM; the fields as the Hub's Qwen3 MoE configs spell them
                        (rope_theta at the top: transformers 4 and 5 both read it that way)
generation_config.json  the end-of-generation ids (<|im_end|>, then <|endoftext|>) and the padding id
model.safetensors       bf16, one tensor per expert projection as the Hub checkpoints store them
                        (model.layers.N.mlp.experts.E.gate_proj.weight, ...); no lm_head (tied embeddings)
tokenizer.json          the BPE (tokenizer.py)
tokenizer_config.json   the chat template (chat_template.jinja), eos_token <|im_end|>, pad_token <|endoftext|>
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from warpcode.model_runtime.config import ModelConfig
from warpcode.training.tokenizer import CHAT_TEMPLATE, END_OF_TEXT, IM_END

CHECKPOINT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                    "tokenizer_config.json")  # fmt: skip


def write_checkpoint(weights: dict[str, torch.Tensor], config: ModelConfig, tokenizer: Tokenizer, path: Path) -> None:
    """`weights`: the state dict of the runtime's MoeForCausalLM (stacked experts), any float dtype."""
    path.mkdir(parents=True, exist_ok=True)
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens, the model {config.vocab_size}")
    end_of_turn, end_of_text = tokenizer.token_to_id(IM_END), tokenizer.token_to_id(END_OF_TEXT)
    (path / "config.json").write_text(json.dumps(hf_config(config), indent=2) + "\n")
    generation = {"eos_token_id": [end_of_turn, end_of_text], "pad_token_id": end_of_text}
    (path / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    save_file(hub_tensors(weights, config), str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "model.safetensors").chmod(0o644)  # safetensors writes it private; it ships, readable like the rest
    tokenizer.save(str(path / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "eos_token": IM_END,
        "pad_token": END_OF_TEXT,
        "bos_token": None,
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": config.max_position_embeddings,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")


def hf_config(config: ModelConfig) -> dict[str, Any]:
    if config.model_type != "qwen3_moe" or config.mlp_only_layers or config.decoder_sparse_step != 1:
        raise ValueError("the built-in model is qwen3_moe with every layer MoE")
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "moe_intermediate_size": config.moe_intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "num_experts": config.num_experts,
        "num_experts_per_tok": config.num_experts_per_tok,
        "norm_topk_prob": config.norm_topk_prob,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "rope_scaling": None,
        "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.0,
        "initializer_range": 0.02,
        "bos_token_id": None,
        "eos_token_id": config.eos_token_ids[0],
        "pad_token_id": config.pad_token_id,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }


def hub_tensors(weights: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The runtime's parameters under the Hub's names, in bf16: each layer's stacked experts (w13 [E, 2I, H] = gate
    rows then up rows, w2 [E, H, I]) split into per-expert gate_proj, up_proj and down_proj."""
    width = config.expert_intermediate_size
    out = {}
    for name, tensor in weights.items():
        tensor = tensor.detach().to("cpu", torch.bfloat16)
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if name.endswith(".experts.w13"):
            prefix = name.removesuffix(".w13")
            for expert in range(tensor.shape[0]):
                out[f"{prefix}.{expert}.gate_proj.weight"] = tensor[expert, :width].contiguous()
                out[f"{prefix}.{expert}.up_proj.weight"] = tensor[expert, width:].contiguous()
        elif name.endswith(".experts.w2"):
            prefix = name.removesuffix(".w2")
            for expert in range(tensor.shape[0]):
                out[f"{prefix}.{expert}.down_proj.weight"] = tensor[expert].contiguous()
        else:
            out[name] = tensor.contiguous()
    return out
