"""The sampling variant of a set of rows, and a first token sampled outside the decode step (after a prefill),
by the same per-row parameters, seeds and step counts, so a request's tokens do not depend on where they were drawn."""

from __future__ import annotations

import torch

from warpcode.model_runtime.sampling import SamplingTensors, sample_on_device
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, RowProcessors
from warpcode.model_runtime.serving.sequence import Sequence


def variant(rows: list[Sequence]) -> str:
    """The decode step's static sampling variant that serves every row ("greedy", "sample" or "filtered")."""
    if all(s.sampling.greedy for s in rows):
        return "greedy"
    filtered = any(s.sampling.top_k > 0 or s.sampling.top_p < 1 for s in rows if not s.sampling.greedy)
    return "filtered" if filtered else "sample"


def sample(seqs: list[Sequence], logits: torch.Tensor) -> list[int]:
    """The next token of each sequence from its logits [n, V], as the decode step would sample it (after the
    rows' logit_bias and penalties, when they ask for them)."""
    if any(s.processing.changes_logits for s in seqs):
        logits = row_processors(seqs, len(seqs), logits.shape[-1], logits.device)(logits)
    kind = variant(seqs)
    if kind == "greedy":
        return logits.argmax(dim=-1).tolist()
    device = logits.device
    params = SamplingTensors.allocate(len(seqs), device)
    params.set_rows([s.sampling for s in seqs])
    seeds = torch.tensor([s.seed for s in seqs], device=device)
    steps = torch.tensor([len(s.output_ids) for s in seqs], device=device)
    return sample_on_device(logits, params, seeds, steps, kind == "filtered").tolist()


def row_processors(rows: list[Sequence], bucket: int, vocab: int, device: torch.device) -> RowProcessors:
    """The logits processors of `rows`, padded with rows that change nothing up to `bucket` rows."""
    padding = bucket - len(rows)
    processing = [s.processing for s in rows] + [NO_PROCESSING] * padding
    prompts, outputs = [s.prompt_ids for s in rows] + [[]] * padding, [s.output_ids for s in rows] + [[]] * padding
    return RowProcessors(processing, prompts, outputs, vocab, device)
