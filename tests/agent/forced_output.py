"""A tiny chat checkpoint whose greedy answer is text chosen by the test: reasoning, tool calls, anything a real model
writes, through the real engine, detokeniser and chat template.

Each piece of the answer is one added token of the tokenizer, and the model is wired so that the next token depends
only on the current one: every layer's weights are zero (the residual stream stays the token's embedding), each
piece's embedding is one-hot in a dimension of its own, and the LM head maps that dimension to the following piece
(by a margin no sampling temperature overturns).
The prompt's last token (the generation prompt's newline) leads to the first piece; the last leads to EOS.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import torch

from tests.model_runtime.checkpoints import EOS_TOKEN, build_hf_model, train_bpe

LAST_PROMPT_TOKEN = "\n"  # every Qwen generation prompt ends with it, whether or not it opened <think>


def save_forced_checkpoint(path: Path, template: str, answer: list[str], context: int = 32_768) -> Path:
    """A checkpoint in `path` with `template` as its chat template, answering every prompt that ends in a newline
    with the pieces of `answer` (each becomes one token, so they must differ from each other) and then EOS."""
    assert len(set(answer)) == len(answer), "each piece is a token of its own"
    tokenizer = train_bpe()
    tokenizer.add_tokens(answer)
    ids = [tokenizer.token_to_id(piece) for piece in answer]
    start = tokenizer.encode(LAST_PROMPT_TOKEN).ids
    assert len(start) == 1, start
    chain = [start[0], *ids, tokenizer.token_to_id(EOS_TOKEN)]
    vocab = 320
    assert tokenizer.get_vocab_size() <= vocab and len(chain) < 64  # the tiny model's vocabulary and hidden size
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": context // 4, "rope_theta": 1e6}
    model = build_hf_model(  # one layer: its weights are zero anyway, and fewer layers prefill faster on a CPU
        "qwen3_moe",
        vocab_size=vocab,
        tie_word_embeddings=False,
        max_position_embeddings=context,
        rope_parameters=rope,
        num_hidden_layers=1,
        mlp_only_layers=[],
    )
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".layers." in name:
                parameter.zero_()
        for dim, (token, following) in enumerate(itertools.pairwise(chain)):
            model.model.embed_tokens.weight[token] = 0
            model.model.embed_tokens.weight[token, dim] = 1.0
            model.lm_head.weight[:, dim] = 0
            model.lm_head.weight[following, dim] = 10.0  # a logit of 80 after the norm: chosen whatever the sampling
    model.save_pretrained(path)
    tokenizer.save(str(path / "tokenizer.json"))
    config = {"chat_template": template, "eos_token": EOS_TOKEN, "pad_token": "<|endoftext|>", "bos_token": None}
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [tokenizer.token_to_id(EOS_TOKEN)]}))
    return path
