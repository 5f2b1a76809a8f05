"""What a request asks to change in the model's logits before its next token is chosen: OpenAI's (and vLLM's)
`logit_bias`, `presence_penalty` and `frequency_penalty`, and vLLM's `repetition_penalty`, in vLLM's order.

For a row with generated-token counts c (over the tokens this request generated, not its prompt, as vLLM counts):

    logits[t] += logit_bias[t]
    logits[t] = logits[t] / r if logits[t] > 0 else logits[t] * r      for t in the prompt or generated (r: repetition)
    logits[t] -= presence_penalty * (c[t] > 0) + frequency_penalty * c[t]

Temperature, top-k/top-p/min-p and greedy then work on the changed logits. Rows that ask for none of this never
reach this module: their decode steps stay the captured graphs they were.
"""

from __future__ import annotations

from collections.abc import Sequence as Rows
from dataclasses import dataclass

import torch

MAX_PENALTY = 2.0  # OpenAI's range for both penalties: [-2, 2]
MAX_BIAS = 100.0  # OpenAI's range for a logit bias: [-100, 100]
MAX_REPETITION_PENALTY = 1e4  # vLLM asks only > 0; a bound keeps the division finite


@dataclass(frozen=True)
class LogitsProcessing:
    """One request's changes to its logits, and the logprobs it wants reported (token_logprobs.py)."""

    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0  # > 1 discourages tokens already in the prompt or the output; 1: off
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias)
    logprobs: int | None = None  # report each generated token's logprob and this many alternatives; None: none
    prompt_logprobs: int | None = None  # the same for the prompt's tokens (the first has none); None: none

    def check(self, vocab_size: int) -> None:
        """ValueError naming the field of a value the engine cannot serve."""
        for name in ("presence_penalty", "frequency_penalty"):
            if not -MAX_PENALTY <= getattr(self, name) <= MAX_PENALTY:
                raise ValueError(f"{name} must be in [-{MAX_PENALTY}, {MAX_PENALTY}], got {getattr(self, name)}")
        if not 0 < self.repetition_penalty <= MAX_REPETITION_PENALTY:
            raise ValueError(
                f"repetition_penalty must be in (0, {MAX_REPETITION_PENALTY}], got {self.repetition_penalty}"
            )
        for token, bias in self.logit_bias:
            if not 0 <= token < vocab_size:
                raise ValueError(f"logit_bias: token id {token} is outside the vocabulary [0, {vocab_size})")
            if not -MAX_BIAS <= bias <= MAX_BIAS:
                raise ValueError(f"logit_bias: the bias of token {token} must be in [-100, 100], got {bias}")

    @property
    def changes_logits(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1 or self.logit_bias)


NO_PROCESSING = LogitsProcessing()


class RowProcessors:
    """The changes of a batch of rows as device tensors [rows, V], built once per set of rows, with the counts
    of each row's generated tokens kept on the device (a step counts its own tokens, so steps in flight need no
    host round trip)."""

    def __init__(
        self,
        processing: Rows[LogitsProcessing],
        prompts: Rows[list[int]],
        outputs: Rows[list[int]],
        vocab: int,
        device: torch.device,
    ) -> None:
        rows = len(processing)
        self.bias = torch.zeros(rows, vocab, device=device)
        for row, p in enumerate(processing):
            if p.logit_bias:
                tokens, biases = zip(*p.logit_bias, strict=True)
                self.bias[row, list(tokens)] = torch.tensor(biases, device=device)
        self.presence = torch.tensor([[p.presence_penalty] for p in processing], device=device)
        self.frequency = torch.tensor([[p.frequency_penalty] for p in processing], device=device)
        self.counts = torch.zeros(rows, vocab, device=device)
        for row, ids in enumerate(outputs):
            if ids:
                self.counts[row] = torch.bincount(torch.tensor(ids, device=device), minlength=vocab).float()
        self.penalises = any(p.presence_penalty or p.frequency_penalty for p in processing)
        self.repeats = any(p.repetition_penalty != 1 for p in processing)
        if self.repeats:  # which tokens each prompt holds: the repetition penalty counts them too
            self.repetition = torch.tensor([[p.repetition_penalty] for p in processing], device=device)
            self.in_prompt = torch.zeros(rows, vocab, dtype=torch.bool, device=device)
            for row, ids in enumerate(prompts):
                if ids and processing[row].repetition_penalty != 1:
                    self.in_prompt[row, torch.tensor(ids, device=device)] = True

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """The changed logits (fp32) of rows [0, rows) of `logits`."""
        changed = logits[: self.bias.shape[0]].float() + self.bias
        if self.repeats:
            seen = self.in_prompt | (self.counts > 0)
            penalised = torch.where(changed > 0, changed / self.repetition, changed * self.repetition)
            changed = torch.where(seen, penalised, changed)
        if self.penalises:
            changed = changed - self.presence * (self.counts > 0) - self.frequency * self.counts
        return changed

    def count(self, tokens: torch.Tensor) -> None:
        """Adds each row's newly sampled token (int64 [rows]) to its counts."""
        if self.penalises or self.repeats:
            self.counts.scatter_add_(1, tokens[:, None], torch.ones_like(tokens[:, None], dtype=torch.float32))
