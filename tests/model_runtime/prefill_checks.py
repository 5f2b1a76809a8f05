"""The graph-ready single-chunk prefill (model_runtime/prefill_graphs.py) run eagerly, checked against a cache-free
forward: shared by its tests on float and on MX weights."""

from __future__ import annotations

import torch

from warpcode.model_runtime.decode_step import SCRATCH_BLOCK, DecodeState
from warpcode.model_runtime.prefill import PrefillChunk, prefill_forward
from warpcode.model_runtime.prefill_graphs import ChunkBuffers, run_layers, token_bucket

BLOCK = 16
PROMPT = [(11 * i + 5) % 400 + 1 for i in range(45)]


def fresh_state(engine) -> DecodeState:
    state = DecodeState.allocate(engine.model.config, 1, 9, BLOCK, 6, torch.device("cpu"), torch.float32)
    for pool in (*state.keys, *state.values):
        pool.normal_()  # whatever an earlier sequence left
    return state


def assert_padded_chunk_matches_a_cache_free_forward(engine, cached: int) -> None:
    """A padded chunk after `cached` prompt tokens (prefilled first) gives the logits of a cache-free forward, and
    its padding rows write only the scratch block."""
    model = engine.model
    state = fresh_state(engine)
    table = [3, 7, 1, 5]  # blocks of the sequence, out of order; 0 is the scratch block
    with torch.inference_mode():
        if cached:
            prefill_forward(model, state, [PrefillChunk(PROMPT[:cached], 0, table)])
        untouched = [pool[[2, 4, 6, 8]].clone() for pool in (*state.keys, *state.values)]
        chunk = PROMPT[cached:]
        bucket = token_bucket(len(chunk))
        assert bucket > len(chunk)  # padding rows run too
        buffers = ChunkBuffers.allocate(model, 6, torch.device("cpu"), torch.float32)
        buffers.load(chunk, cached, table)
        layers = len(model.model.layers)
        for first, last in ((0, 1), (1, layers)):  # two graphs' worth, the state carried between them
            run_layers(model, state, buffers, bucket, first, last)
        expected = engine.logits([PROMPT])[0, -1]
    torch.testing.assert_close(buffers.logits[0], expected, atol=1e-4, rtol=1e-4)
    after = [pool[[2, 4, 6, 8]] for pool in (*state.keys, *state.values)]
    assert all(torch.equal(a, b) for a, b in zip(after, untouched, strict=True))  # only the table's and scratch
    assert SCRATCH_BLOCK not in table
