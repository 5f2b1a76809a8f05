"""The graph-ready single-chunk prefill (model_runtime/prefill_graphs.py) run eagerly on the CPU: a padded chunk
after a cached prefix gives the logits of a cache-free forward, and its padding rows write only the scratch block."""

from __future__ import annotations

import pytest

from tests.model_runtime.prefill_checks import assert_padded_chunk_matches_a_cache_free_forward
from warpcode.model_runtime import load_random
from warpcode.model_runtime.decode_step import prepare_for_decode
from warpcode.model_runtime.prefill_graphs import token_bucket


@pytest.fixture(scope="module")
def engine():
    engine = load_random("tiny", seed=3)
    prepare_for_decode(engine.model)  # the fused q/k/v projection prefill reads
    return engine


@pytest.mark.parametrize("cached", [0, 20, 32])
def test_a_padded_chunk_after_a_cached_prefix_matches_a_cache_free_forward(engine, cached):
    assert_padded_chunk_matches_a_cache_free_forward(engine, cached)


def test_token_buckets():
    assert [token_bucket(n) for n in (1, 16, 17, 300, 321, 1000, 1024)] == [16, 16, 32, 320, 384, 1024, 1024]
    assert token_bucket(1025) is None
