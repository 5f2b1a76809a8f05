"""The logprobs a request asks for (`logprobs` / `top_logprobs`): each chosen token's log-probability and the
most likely alternatives at that position.

They are of the distribution the model gives, log_softmax of its raw logits, before logit_bias, penalties,
temperature and top-k/top-p/min-p: vLLM's default (`logprobs_mode="raw_logprobs"`). So a token kept out by
`logit_bias` still shows its logprob as an alternative, and the numbers do not depend on how the token was drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's top_logprobs (completions allow 5)


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob), most likely first


def token_logprobs(logits: torch.Tensor, chosen: torch.Tensor, top: int) -> list[TokenLogprob]:
    """logits [rows, V] (raw), chosen int64 [rows] -> one TokenLogprob per row with `top` alternatives."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    picked = logprobs.gather(-1, chosen[:, None]).squeeze(-1).tolist()
    values, ids = torch.topk(logprobs, min(top, logprobs.shape[-1]), dim=-1) if top else (None, None)
    rows = []
    for row, (token, logprob) in enumerate(zip(chosen.tolist(), picked, strict=True)):
        alternatives = tuple(zip(ids[row].tolist(), values[row].tolist(), strict=True)) if top else ()
        rows.append(TokenLogprob(token, logprob, alternatives))
    return rows


def prompt_logprobs(logits: torch.Tensor, prompt_ids: list[int], top: int) -> list[TokenLogprob | None]:
    """The reference forward's logits [T, V] over a prompt -> each prompt token's logprob given the tokens before
    it; the first token has none (nothing comes before it)."""
    if len(prompt_ids) < 2:
        return [None] * len(prompt_ids)
    chosen = torch.tensor(prompt_ids[1:], device=logits.device)
    return [None, *token_logprobs(logits[:-1], chosen, top)]
