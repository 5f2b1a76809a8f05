"""Next-token selection: greedy at temperature 0, otherwise temperature + top-k + top-p + min-p sampling."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy (argmax)
    top_k: int = 0  # keep the k most likely tokens; 0: off
    top_p: float = 1.0  # keep the smallest set whose probability reaches top_p; 1: off
    min_p: float = 0.0  # drop tokens less likely than min_p * p(most likely token); 0: off

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> torch.Tensor:
    """logits [B, V] -> token ids int64 [B]."""
    if params.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filter_logits(logits.float() / params.temperature, params), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def filter_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Sets the logits of tokens that top-k, top-p and min-p exclude to -inf ([B, V] fp32, already tempered)."""
    if params.top_k and params.top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if params.min_p > 0:
        probs = torch.softmax(logits, dim=-1)
        logits = logits.masked_fill(probs < params.min_p * probs.max(dim=-1, keepdim=True).values, float("-inf"))
    if params.top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the tokens ranked above it already reach top_p; the most likely token always stays.
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= params.top_p
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return logits
