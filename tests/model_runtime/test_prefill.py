"""The packed prefill over the paged cache (model_runtime/prefill.py) against the reference forward
(`MoeForCausalLM.forward`, which `Engine.logits` runs and tests/model_runtime/test_parity.py holds to transformers):
several sequences' chunks in one pass, one of them continuing a prefix already in the cache, give each chunk's
last-token logits of a cache-free forward over its whole sequence, whether the layers run in one pass or in groups."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime import load_random
from warpcode.model_runtime.decode_step import DecodeState, prepare_for_decode
from warpcode.model_runtime.prefill import PrefillChunk, prefill_forward, prefill_in_steps

BLOCK = 16
FIRST = [(7 * i + 3) % 400 + 1 for i in range(37)]  # 20 tokens cached first, 17 prefilled with the second sequence
SECOND = [(13 * i + 1) % 400 + 1 for i in range(23)]


@pytest.fixture(scope="module")
def engine():
    engine = load_random("tiny", seed=5)
    prepare_for_decode(engine.model)  # the fused q/k/v projection prefill reads
    return engine


@pytest.mark.parametrize("layers_per_step", [None, 1])
def test_packed_chunks_match_the_reference_forward(engine, layers_per_step):
    model = engine.model
    state = DecodeState.allocate(model.config, 2, 8, BLOCK, 4, torch.device("cpu"), torch.float32)
    for pool in (*state.keys, *state.values):
        pool.normal_()  # whatever an earlier sequence left
    first_table, second_table = [5, 2, 7], [1, 6]  # out of order; 0 is the scratch block
    chunks = [PrefillChunk(FIRST[20:], 20, first_table), PrefillChunk(SECOND, 0, second_table)]
    with torch.inference_mode():
        prefill_forward(model, state, [PrefillChunk(FIRST[:20], 0, first_table)])
        if layers_per_step is None:
            logits = prefill_forward(model, state, chunks)
        else:
            steps = prefill_in_steps(model, state, chunks, layers_per_step)
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    logits = done.value
                    break
        expected = torch.stack([engine.logits([FIRST])[0, -1], engine.logits([SECOND])[0, -1]])
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
