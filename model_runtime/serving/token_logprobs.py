"""The logprobs a request asks for (`logprobs` / `top_logprobs`): each chosen token's log-probability and the
most likely alternatives at that position.

They are of the distribution the model gives, log_softmax of its raw logits, before logit_bias, penalties,
temperature and top-k/top-p/min-p: vLLM's default (`logprobs_mode="raw_logprobs"`). So a token kept out by
`logit_bias` still shows its logprob as an alternative, and the numbers do not depend on how the token was drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from warpcode.model_runtime.model import MoeForCausalLM

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's top_logprobs (completions allow 5)
MAX_PROMPT_LOGPROBS_TOKENS = 8192  # the reference forward's causal mask is [T, T]: bounded prompts only
LM_HEAD_ROWS = 512  # prompt positions projected to the vocabulary at a time


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob), most likely first


def token_logprobs(logits: torch.Tensor, chosen: torch.Tensor, top: int) -> list[TokenLogprob]:
    """logits [rows, V] (raw), chosen int64 [rows] -> one TokenLogprob per row with `top` alternatives."""
    return StepLogprobs.of(logits, chosen, top).rows(chosen.tolist())


@dataclass(frozen=True)
class StepLogprobs:
    """A step's logprobs computed on the device when the step is launched, copied towards the host without waiting
    (pinned buffers on the GPU) and read as TokenLogprobs once the step's tokens are read."""

    picked: torch.Tensor  # fp32 [rows]: each chosen token's logprob
    top_values: torch.Tensor  # fp32 [rows, top], most likely first
    top_ids: torch.Tensor  # int64 [rows, top]

    @classmethod
    def of(cls, logits: torch.Tensor, chosen: torch.Tensor, top: int) -> StepLogprobs:
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        picked = logprobs.gather(-1, chosen[:, None]).squeeze(-1)
        values, ids = torch.topk(logprobs, min(top, logprobs.shape[-1]), dim=-1)
        return cls(*(_towards_host(t) for t in (picked, values, ids)))

    def rows(self, chosen: list[int]) -> list[TokenLogprob]:
        """One TokenLogprob per row (`chosen`: the rows' tokens, read from the same step)."""
        picked, ids, values = self.picked.tolist(), self.top_ids.tolist(), self.top_values.tolist()
        return [
            TokenLogprob(token, logprob, tuple(zip(ids[row], values[row], strict=True)))
            for row, (token, logprob) in enumerate(zip(chosen, picked, strict=True))
        ]


def _towards_host(tensor: torch.Tensor) -> torch.Tensor:
    """A host copy that lands when the device gets there (the reader waits for the step's event first)."""
    if not tensor.is_cuda:
        return tensor
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)  # from torch's cached pinned pool
    return host.copy_(tensor, non_blocking=True)


def prompt_logprobs(model: MoeForCausalLM, prompt_ids: list[int], top: int) -> list[TokenLogprob | None]:
    """Each prompt token's logprob given the tokens before it (the first has none: nothing comes before it), from
    the reference forward (model.py) over the prompt, its LM head applied a slice of rows at a time so that the
    prompt's [T, V] logits never exist at once. Only for requests that ask (echo with logprobs): the paged prefill
    keeps no logits but the last, and a prompt's cached blocks have none at all."""
    device = model.output_weight.device
    ids = torch.tensor([prompt_ids], device=device)
    positions = torch.arange(len(prompt_ids), device=device)[None]
    hidden = model.hidden_states(ids, positions, torch.ones_like(ids, dtype=torch.bool))[0]
    result: list[TokenLogprob | None] = [None]
    for start in range(0, len(prompt_ids) - 1, LM_HEAD_ROWS):
        end = min(start + LM_HEAD_ROWS, len(prompt_ids) - 1)
        logits = F.linear(hidden[start:end], model.output_weight)
        result += token_logprobs(logits, ids[0, start + 1 : end + 1], top)
    return result
