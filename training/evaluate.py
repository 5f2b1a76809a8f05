"""Held-out perplexity of a checkpoint directory as the runtime serves it (`load(..., weights=...)`): what the
training measured, re-measured on the shipped bf16 file, and with the runtime's MXFP8 weights beside it."""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from warpcode.model_runtime import load
from warpcode.training.corpus import TokenWindows

EVAL_BATCH = 8


def checkpoint_perplexity(
    model_dir: Path, tokens: Path, weights: str, device: str, windows: int, length: int
) -> dict[str, float | int | str]:
    """Perplexity over the first `windows` windows of `length` tokens of a packed stream (corpus.py)."""
    engine = load(model_dir, device=device, weights=weights, show_progress=False)
    stream = TokenWindows(tokens, length)
    count = min(windows, len(stream))
    total, scored = 0.0, 0
    for start in range(0, count, EVAL_BATCH):
        rows = torch.stack([torch.from_numpy(stream.window(i)) for i in range(start, min(count, start + EVAL_BATCH))])
        logits = engine.logits(rows[:, :-1])
        targets = rows[:, 1:].to(logits.device)
        total += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
        scored += targets.numel()
    engine.shutdown()
    return {"weights": weights, "tokens": scored, "loss": round(total / scored, 4),
            "perplexity": round(math.exp(total / scored), 3)}  # fmt: skip
