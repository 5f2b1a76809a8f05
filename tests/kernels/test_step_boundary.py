"""The greedy decode step's last two launches (kernels/greedy.py) against the PyTorch ops they replace (CPU:
TRITON_INTERPRET=1; vocabularies cut into several slices, the last one masked)."""

import pytest
import torch

from warpcode.kernels import greedy
from warpcode.kernels.greedy import greedy_finish_reference, greedy_finish_triton


def logits_with_cross_slice_ties(rows: int, vocab: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(rows + vocab)
    logits = torch.randn(rows, vocab, generator=g).to(dtype)
    logits[0, [vocab - 1, vocab // 2]] = 9.0  # equal maxima (in two slices where V > 2 BLOCK_V): the lower wins
    logits[1, 7] = 9.0  # the maximum in the first slice
    if rows > 2:
        logits[2, vocab - 1] = 9.0  # in the last, masked slice
    return logits


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("rows", "vocab"), [(3, 2 * greedy.BLOCK_V + 37), (2, 1000)])
def test_greedy_finish_matches_torch(rows, vocab, dtype):
    logits = logits_with_cross_slice_ties(rows, vocab, dtype)
    tokens = torch.full((rows,), -1, dtype=torch.long)
    steps = torch.arange(rows, dtype=torch.long)
    seq_lens = torch.arange(rows, dtype=torch.int32) * 5
    expected = [t.clone() for t in (tokens, steps, seq_lens)]
    greedy_finish_reference(logits, expected[0], tuple(expected[1:]))
    assert greedy_finish_triton(logits, tokens, (steps, seq_lens)) is tokens
    assert torch.equal(tokens, expected[0]) and torch.equal(steps, expected[1]) and torch.equal(seq_lens, expected[2])
    assert tokens[:2].tolist() == [vocab // 2, 7]


def test_greedy_finish_takes_nan_as_the_maximum_like_torch():
    logits = torch.randn(2, 3000, generator=torch.Generator().manual_seed(2))
    logits[0, 2500] = float("nan")
    logits[1, :] = float("-inf")  # all -inf: index 0, as torch.argmax
    tokens = torch.empty(2, dtype=torch.int32)
    greedy_finish_triton(logits, tokens)
    assert tokens.tolist() == logits.argmax(-1).tolist() == [2500, 0]


def test_greedy_finish_checks_its_arguments():
    logits = torch.randn(2, 100)
    with pytest.raises(ValueError, match="tokens must be"):
        greedy_finish_triton(logits, torch.empty(3, dtype=torch.long))
    with pytest.raises(ValueError, match="counter must be"):
        greedy_finish_triton(logits, torch.empty(2, dtype=torch.long), (torch.empty(2),))
    with pytest.raises(ValueError, match="at most 2 counters"):
        greedy_finish_triton(logits, torch.empty(2, dtype=torch.long), (torch.empty(2, dtype=torch.long),) * 3)
    with pytest.raises(ValueError, match="logits must be"):
        greedy_finish_triton(logits.T, torch.empty(100, dtype=torch.long))
