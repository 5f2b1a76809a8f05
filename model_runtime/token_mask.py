"""A grammar's token mask on the logits: bit t of a row's 32-bit words allows token t; every other token gets -inf,
so greedy and sampled picks alike stay inside the grammar. Rows without a grammar carry all ones."""

from __future__ import annotations

import torch


def apply_token_mask(logits: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """logits [B, V], words int32 [B, ceil(V / 32)] -> the logits with disallowed tokens at -inf."""
    vocab = logits.shape[-1]
    token = torch.arange(vocab, device=logits.device)
    # an arithmetic shift keeps the sign of bit 31, and `& 1` then still reads that bit right
    allowed = (words[:, token >> 5] >> (token & 31)) & 1
    return logits.masked_fill(allowed == 0, float("-inf"))
