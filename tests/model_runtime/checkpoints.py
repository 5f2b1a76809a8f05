"""Tiny random Hugging Face checkpoints of every supported architecture, and a chat checkpoint with a byte-level BPE
trained here and a Qwen-style chat template (the conftest's fixtures save them once per session; tests that need
their own variant call these)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer as FastTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

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


SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "the quick brown fox jumps over the lazy dog",
    "café naïve résumé",
    "print('hello world')",
    "import os\nimport sys\n",
] * 20

# A Qwen-style template: system prompt with a tools section, tool calls, tool results, generation prompt.
CHAT_TEMPLATE = """{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role not in ['system', 'user', 'assistant', 'tool'] %}
{{- raise_exception('unknown role ' + message.role) }}
{%- endif %}
{%- if message.role != 'system' %}
{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}
{%- for call in message.tool_calls or [] %}
{{- '\\n<tool_call>\\n' + (call.function | tojson) + '\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""
EOS_TOKEN = "<|im_end|>"


def train_bpe(corpus: list[str] = CORPUS, vocab_size: int = 300) -> FastTokenizer:
    """A byte-level BPE over `corpus` with the template's special tokens."""
    tokenizer = FastTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


def save_chat_checkpoint(path: Path, tokenizer: FastTokenizer, ends_at_once: bool = False, **overrides) -> Path:
    """A tiny qwen3_moe checkpoint with tokenizer files and CHAT_TEMPLATE in `path`. Tokens that decode to part of a
    character (or are special) get zero LM-head rows, so greedy text is clean and comparisons with a one-shot decode
    are exact. `ends_at_once`: the model answers every prompt with EOS_TOKEN, whatever the sampling (every
    embedding carries a large constant feature that only EOS's LM-head row reads), so an agent's turn ends."""
    vocab = 320
    if "max_position_embeddings" in overrides:  # YaRN 4x stays the whole context (ModelConfig.context_length)
        rope = {**HF_CONFIGS["qwen3_moe"]().rope_parameters}
        rope["original_max_position_embeddings"] = overrides["max_position_embeddings"] // 4
        overrides.setdefault("rope_parameters", rope)
    model = build_hf_model("qwen3_moe", vocab_size=vocab, tie_word_embeddings=False, **overrides)
    with torch.no_grad():
        for token in range(vocab):
            text = tokenizer.decode([token], skip_special_tokens=False)
            if token >= tokenizer.get_vocab_size() or "\ufffd" in text or text in SPECIAL or not text:
                model.lm_head.weight[token] = 0
        if ends_at_once:
            eos = tokenizer.token_to_id(EOS_TOKEN)
            model.model.embed_tokens.weight[:, 0] = 100.0
            model.lm_head.weight[:, 0] = 0
            model.lm_head.weight[eos, 0] = 10.0
    model.save_pretrained(path)
    tokenizer.save(str(path / "tokenizer.json"))
    config = {"chat_template": CHAT_TEMPLATE, "eos_token": EOS_TOKEN}
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0]}))
    return path


def save_agent_checkpoint(path: Path, tokenizer: FastTokenizer) -> Path:
    """A chat checkpoint that ends its answer at once, with room for an agent's whole prompt (tools included)."""
    return save_chat_checkpoint(path, tokenizer, ends_at_once=True, max_position_embeddings=32_768)
