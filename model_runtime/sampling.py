"""Next-token selection: greedy at temperature 0, otherwise temperature + top-k + top-p + min-p sampling.

`sample_on_device` takes per-row parameters held in device tensors (`SamplingTensors`) and runs with fixed shapes and
no host round trip, so it can be captured in a CUDA graph and replayed while the host rewrites the parameters in
place between replays. Its randomness is a hash of (row seed, row step, token id), not a generator's state: a
replayed graph draws fresh numbers at every step and a seed reproduces a generation exactly, graph or not.
`filter_logits` is the readable definition of the filters for one set of parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOAT32_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy (argmax)
    top_k: int = 0  # keep the k most likely tokens; 0: off
    top_p: float = 1.0  # keep the smallest set whose probability reaches top_p; 1: off
    min_p: float = 0.0  # drop tokens less likely than min_p * p(most likely token); 0: off

    def __post_init__(self) -> None:
        if not 0 <= self.temperature <= FLOAT32_MAX:  # the rows hold it in fp32 (NaN fails the test too)
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


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


@dataclass
class SamplingTensors:
    """Per-row sampling parameters on the device. Captured graphs read these tensors, so update them in place."""

    temperature: torch.Tensor  # fp32 [B]; 0: greedy for that row
    top_k: torch.Tensor  # int32 or int64 [B]; 0: off
    top_p: torch.Tensor  # fp32 [B]; 1: off
    min_p: torch.Tensor  # fp32 [B]; 0: off

    def __post_init__(self) -> None:
        fields = (self.temperature, self.top_k, self.top_p, self.min_p)
        if any(t.dim() != 1 or t.shape != self.temperature.shape for t in fields):
            raise ValueError(f"sampling tensors must all be [B], got {[tuple(t.shape) for t in fields]}")
        if any(t.device != self.temperature.device for t in fields):
            raise ValueError("sampling tensors must all be on one device")
        if self.top_k.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"top_k must be int32 or int64, got {self.top_k.dtype}")
        if any(t.dtype != torch.float32 for t in (self.temperature, self.top_p, self.min_p)):
            raise ValueError("temperature, top_p and min_p must be float32")

    @classmethod
    def allocate(cls, batch: int, device: torch.device | str) -> SamplingTensors:
        """Every row greedy."""
        return cls(
            temperature=torch.zeros(batch, dtype=torch.float32, device=device),
            top_k=torch.zeros(batch, dtype=torch.int64, device=device),
            top_p=torch.ones(batch, dtype=torch.float32, device=device),
            min_p=torch.zeros(batch, dtype=torch.float32, device=device),
        )

    @property
    def batch(self) -> int:
        return self.temperature.shape[0]

    def rows(self, batch: int) -> SamplingTensors:
        """Views of the first `batch` rows: they share storage, so set_rows on the whole still reaches them."""
        if not 0 < batch <= self.batch:
            raise ValueError(f"batch must be in [1, {self.batch}], got {batch}")
        return SamplingTensors(self.temperature[:batch], self.top_k[:batch], self.top_p[:batch], self.min_p[:batch])

    def set_rows(self, params: list[SamplingParams]) -> None:
        """Row i takes params[i]; rows beyond len(params) become greedy. Copies in place, never reallocates."""
        if len(params) > self.batch:
            raise ValueError(f"{len(params)} rows of sampling parameters for a batch of {self.batch}")
        rows = list(params) + [SamplingParams()] * (self.batch - len(params))
        for target, values in (
            (self.temperature, [p.temperature for p in rows]),
            (self.top_k, [p.top_k for p in rows]),
            (self.top_p, [p.top_p for p in rows]),
            (self.min_p, [p.min_p for p in rows]),
        ):
            target.copy_(torch.tensor(values, dtype=target.dtype))


def sample_on_device(
    logits: torch.Tensor, tensors: SamplingTensors, seeds: torch.Tensor, steps: torch.Tensor, filtered: bool
) -> torch.Tensor:
    """logits [B, V] (any float dtype) -> token ids int64 [B], each row by its own parameters in `tensors`.

    Rows with temperature 0 take logits.argmax(-1). The others sample from softmax(logits / temperature) restricted as
    `filter_logits` does (top-k, then min-p, then top-p), by the exponential race: argmax(probs / E), E ~ Exp(1) from
    `exponential_noise(seeds, steps)` (int64 [B] each). Fixed shapes, no host synchronisation: safe to capture in a
    CUDA graph. `filtered` is static: False promises every row has top_k 0 and top_p 1
    (min_p may be set) and skips the sort over the vocabulary; True applies the sorted filters.
    """
    if logits.dim() != 2 or logits.shape[0] != tensors.batch:
        raise ValueError(f"logits must be [{tensors.batch}, V], got {tuple(logits.shape)}")
    greedy = tensors.temperature == 0
    temperature = torch.where(greedy, 1.0, tensors.temperature)  # greedy rows are computed, then discarded
    scaled = logits.float() / temperature[:, None]
    min_p = tensors.min_p[:, None]
    if not filtered:
        probs = torch.softmax(scaled, dim=-1)
        probs = torch.where(probs < min_p * probs.amax(dim=-1, keepdim=True), 0.0, probs)
        sampled = _race(probs, seeds, steps)
    else:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        vocab = scaled.shape[-1]
        # top-k keeps every token at least as likely as the k-th (ties included), as filter_logits does
        k = tensors.top_k.long()
        k = torch.where((k <= 0) | (k > vocab), vocab, k)
        kth_largest = sorted_logits.gather(-1, (k - 1)[:, None])
        sorted_logits = sorted_logits.masked_fill(sorted_logits < kth_largest, float("-inf"))
        # min-p against the most likely token, which sits in column 0
        probs = torch.softmax(sorted_logits, dim=-1)
        sorted_logits = sorted_logits.masked_fill(probs < min_p * probs[:, :1], float("-inf"))
        # top-p on the renormalised survivors: drop a token once the tokens ranked above it reach top_p
        probs = torch.softmax(sorted_logits, dim=-1)
        top_p = tensors.top_p[:, None]
        drop = (probs.cumsum(dim=-1) - probs >= top_p) & (top_p < 1)
        probs = probs.masked_fill(drop, 0.0)
        sampled = order.gather(-1, _race(probs, seeds, steps)[:, None]).squeeze(-1)
    return torch.where(greedy, logits.argmax(dim=-1), sampled)


def _race(probs: torch.Tensor, seeds: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """argmax(probs / E), E ~ Exp(1) per entry: a draw from probs (unnormalised is fine). [B, V] -> int64 [B]."""
    race = exponential_noise(seeds, steps, probs.shape[-1])
    # E = 0 would make an excluded token's 0 / 0 a NaN, which argmax would pick; the most likely token's score
    # is positive, so a dropped token (score 0) never wins.
    return (probs / race.clamp_min_(torch.finfo(probs.dtype).tiny)).argmax(dim=-1)


_MASK32 = 0xFFFFFFFF


def exponential_noise(seeds: torch.Tensor, steps: torch.Tensor, vocab: int) -> torch.Tensor:
    """Exp(1) draws fp32 [B, vocab] that depend only on (seeds[b], steps[b], column): counter-based randomness.

    Integer hashing in int64 tensors, every product kept below 2^63: a row key from (seed, step), one 32-bit hash per
    column (Mueller's xorshift-multiply mix, three rounds), its top 24 bits as a uniform in (0, 1), then -log.
    """
    row = (seeds & 0x7FFFFFFF) * 0x9E3779B1 & _MASK32
    row = _mix(row ^ (steps & 0x7FFFFFFF))
    columns = torch.arange(vocab, device=seeds.device, dtype=torch.int64)
    bits = _mix((row[:, None] + columns * 0x9E3779B1) & _MASK32)
    uniform = ((bits >> 8).float() + 0.5) * (1.0 / 2**24)
    return -torch.log(uniform)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash with good avalanche (x < 2^32 in, < 2^32 out; products stay below 2^59)."""
    x = x ^ (x >> 16)
    x = x * 0x45D9F3B & _MASK32
    x = x ^ (x >> 16)
    x = x * 0x45D9F3B & _MASK32
    return x ^ (x >> 16)
