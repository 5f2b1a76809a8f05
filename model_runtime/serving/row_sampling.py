"""The sampling variant of a set of rows, and tokens sampled outside the decode step (the first after a prefill,
those of a verify step), by the same per-row parameters, seeds and step counts, so a request's tokens do not depend
on where they were drawn."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from warpcode.model_runtime.sampling import SamplingTensors, sample_on_device
from warpcode.model_runtime.serving.grammar import fill_masks, mask_words
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, RowProcessors
from warpcode.model_runtime.serving.sequence import Sequence
from warpcode.model_runtime.token_mask import apply_token_mask


def variant(rows: list[Sequence]) -> str:
    """The decode step's static sampling variant that serves every row ("greedy", "sample" or "filtered")."""
    if all(s.sampling.greedy for s in rows):
        return "greedy"
    filtered = any(s.sampling.top_k > 0 or s.sampling.top_p < 1 for s in rows if not s.sampling.greedy)
    return "filtered" if filtered else "sample"


def sample(seqs: list[Sequence], logits: torch.Tensor) -> list[int]:
    """The next token of each sequence from its logits [n, V], as the decode step would sample it: after the
    rows' logit_bias and penalties, when they ask for them, then inside its grammar, if it has one."""
    if any(s.processing.changes_logits for s in seqs):
        logits = row_processors(seqs, len(seqs), logits.shape[-1], logits.device)(logits)
    if any(s.grammar is not None for s in seqs):
        masks = np.empty((len(seqs), mask_words(logits.shape[-1])), dtype=np.int32)
        grammar_masks(seqs, masks)
        logits = apply_token_mask(logits, torch.from_numpy(masks).to(logits.device))
    kind = variant(seqs)
    if kind == "greedy":
        return logits.argmax(dim=-1).tolist()
    device = logits.device
    params = SamplingTensors.allocate(len(seqs), device)
    params.set_rows([s.sampling for s in seqs])
    seeds = torch.tensor([s.seed for s in seqs], device=device)
    steps = torch.tensor([len(s.output_ids) for s in seqs], device=device)
    return sample_on_device(logits, params, seeds, steps, kind == "filtered").tolist()


def chooser(seq: Sequence, logits: torch.Tensor) -> Callable[[int], int]:
    """Position j -> the token `seq` takes from logits[j] (a verify step's [k + 1, V]) as `sample` would take it
    given the tokens it holds when asked (its grammar, penalties and step count advance as tokens are committed).
    Plain greedy rows read every position's argmax at once."""
    if seq.sampling.greedy and seq.grammar is None and not seq.processing.changes_logits:
        return logits.argmax(dim=-1).tolist().__getitem__
    return lambda position: sample([seq], logits[position : position + 1])[0]


def row_processors(rows: list[Sequence], bucket: int, vocab: int, device: torch.device) -> RowProcessors:
    """The logits processors of `rows`, padded with rows that change nothing up to `bucket` rows."""
    padding = bucket - len(rows)
    processing = [s.processing for s in rows] + [NO_PROCESSING] * padding
    prompts, outputs = [s.prompt_ids for s in rows] + [[]] * padding, [s.output_ids for s in rows] + [[]] * padding
    return RowProcessors(processing, prompts, outputs, vocab, device)


def grammar_masks(rows: list[Sequence], masks: np.ndarray) -> None:
    """Writes the rows' token masks into `masks` (int32 [bucket, words], bucket >= rows): each grammar's next
    tokens, all ones for rows without one and for the padding rows. The grammars need the last token: the host
    builds these after reading the step before, while the device runs the forward they apply to."""
    masks.fill(-1)
    fill_masks([(row, seq.grammar) for row, seq in enumerate(rows) if seq.grammar is not None], masks)
