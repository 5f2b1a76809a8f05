"""Token-granular prefix caching in the serving engine: a sequence's partly filled last block, kept when it ends,
is copied into the next request that continues it (an agent's next turn prefills only its new tokens). Every
output is checked against greedy full forwards without a cache, and the cached token counts exactly."""

from __future__ import annotations

import torch

from tests.model_runtime.block_pool_books import check_pool
from tests.model_runtime.serving_reference import greedy_reference, wait_for
from warpcode.model_runtime import EngineConfig, load_random

SIZE = 16
START = [(5 * i + 2) % 500 + 1 for i in range(21)]  # one full block and 5 ids of the next
ANSWER = 6


def engine_with(**settings):
    return load_random("tiny", seed=4, serving=EngineConfig(block_size=SIZE, **settings))


def drained(engine) -> bool:
    return engine.core.held_blocks == 0 and engine.core.scheduler.idle


def kept_block(engine, token_ids: list[int]) -> int:
    """The pool's block that caches exactly these ids as a partial block."""
    (index,) = [b.index for b in engine.core.blocks.blocks if b.key is None and b.token_ids == tuple(token_ids)]
    return index


def snapshot(engine, index: int) -> list[torch.Tensor]:
    state = engine.core.state
    return [pool[index].clone() for pool in (*state.keys, *state.values)]


def test_each_turn_of_an_agent_session_prefills_only_its_new_tokens():
    engine = engine_with()
    prompt, previous = list(START), None
    for turn in range(4):
        handle = engine.submit(prompt, ANSWER, stop_token_ids=[])
        assert handle.result() == greedy_reference(engine, prompt, ANSWER)
        # The previous turn's ids are cached up to its last answer token, whose keys the engine never wrote.
        assert handle.stats.cached_tokens == (0 if previous is None else len(previous) + ANSWER - 1)
        previous, prompt = prompt, [*prompt, *handle.token_ids, *(7 * turn + k + 3 for k in range(5))]
    assert wait_for(lambda: drained(engine))
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_requests_diverging_inside_a_kept_block_share_it_copy_on_write():
    engine = engine_with()
    first = engine.submit(START, ANSWER, stop_token_ids=[])
    first.result()
    assert wait_for(lambda: drained(engine))
    kept_ids = [*START, *first.token_ids][SIZE : len(START) + ANSWER - 1]
    source = kept_block(engine, kept_ids)
    before = snapshot(engine, source)
    prompts = [[*START[:SIZE], *kept_ids[:4], 7, 7, 7], [*START[:SIZE], *kept_ids[:7], 8, 8]]  # leave it midway
    handles = [engine.submit(p, ANSWER, stop_token_ids=[]) for p in prompts]  # admitted together
    assert [h.result() for h in handles] == [greedy_reference(engine, p, ANSWER) for p in prompts]
    assert [h.stats.cached_tokens for h in handles] == [SIZE + 4, SIZE + 7]
    assert wait_for(lambda: drained(engine))
    assert kept_block(engine, kept_ids) == source  # still cached, never written
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(engine, source), strict=True))
    again = engine.submit(prompts[0], ANSWER, stop_token_ids=[])
    assert again.result() == greedy_reference(engine, prompts[0], ANSWER)
    assert again.stats.cached_tokens == len(prompts[0]) - 1  # its own kept block now: all but the last token
    # A request continuing past every kept id keeps a longer block, which supersedes the source.
    longer = [*START[:SIZE], *kept_ids, 9, 9, 9]
    assert engine.generate(longer, ANSWER, stop_token_ids=[]) == greedy_reference(engine, longer, ANSWER)
    assert wait_for(lambda: drained(engine))
    assert engine.core.blocks.blocks[source].token_ids != tuple(kept_ids)
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_a_prompt_the_cache_holds_whole_computes_only_its_last_token():
    engine = engine_with()
    for prompt in (START, [(3 * i + 1) % 500 + 1 for i in range(2 * SIZE)]):  # a partial end, a block boundary
        cold = engine.submit(prompt, ANSWER, stop_token_ids=[])
        assert cold.result() == greedy_reference(engine, prompt, ANSWER)
        warm = engine.submit(prompt, ANSWER, stop_token_ids=[])
        assert warm.result() == cold.token_ids
        assert (cold.stats.cached_tokens, warm.stats.cached_tokens) == (0, len(prompt) - 1)
    engine.shutdown()


def test_a_cancelled_request_leaves_what_it_computed_for_the_next():
    engine = engine_with()
    handle = engine.submit(START, 500, stop_token_ids=[])
    outputs = iter(handle)
    while len(handle.token_ids) < 3:
        next(outputs)
    handle.cancel()
    list(outputs)
    assert handle.finish_reason == "abort" and wait_for(lambda: drained(engine))
    prompt = [*START, *handle.token_ids, 11, 12]
    follow = engine.submit(prompt, ANSWER, stop_token_ids=[])
    assert follow.result() == greedy_reference(engine, prompt, ANSWER)
    assert follow.stats.cached_tokens == len(START) + len(handle.token_ids) - 1
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_an_evicted_kept_block_is_recomputed():
    engine = engine_with(num_blocks=4)
    first = engine.submit(START, ANSWER, stop_token_ids=[])
    first.result()
    other = [(11 * i + 5) % 500 + 1 for i in range(50)]
    assert engine.generate(other, ANSWER, stop_token_ids=[]) == greedy_reference(engine, other, ANSWER)  # all 4 blocks
    prompt = [*START, *first.token_ids, 3, 4, 5]
    turn = engine.submit(prompt, ANSWER, stop_token_ids=[])
    assert turn.result() == greedy_reference(engine, prompt, ANSWER)
    assert turn.stats.cached_tokens == 0
    assert wait_for(lambda: drained(engine))
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_sessions_crowding_a_small_pool_preempt_and_stay_exact():
    """Three agent sessions at once in a pool that holds about two of them: kept blocks are evicted, sequences
    preempted and re-admitted (reusing what they kept), and every turn is still the cold run's."""
    engine = engine_with(num_blocks=6)
    sessions = [[(k * 37 + 7 * i) % 500 + 1 for i in range(20 + 3 * k)] for k in range(3)]
    cached = 0
    for turn in range(3):
        handles = [engine.submit(p, 12, stop_token_ids=[]) for p in sessions]
        assert [h.result() for h in handles] == [greedy_reference(engine, p, 12) for p in sessions]
        cached += sum(h.stats.cached_tokens for h in handles)
        sessions = [[*p, *h.token_ids, turn + 1, k + 2] for k, (p, h) in enumerate(zip(sessions, handles, strict=True))]
    assert engine.core.counters.preemptions > 0 and cached > 0
    assert wait_for(lambda: drained(engine))
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_a_prompt_needing_the_whole_pool_again_is_served_not_starved():
    """Its own kept block would be the copy's source, but the pool has no block to spare for holding it: the
    request recomputes those ids instead of waiting for a block only it could free (the engine hung here)."""
    engine = engine_with(num_blocks=4)
    prompt = [(13 * i + 3) % 500 + 1 for i in range(55)]  # 4 blocks of 16 with its 5 new tokens
    for _ in range(2):
        handle = engine.submit(prompt, 5, stop_token_ids=[])
        assert wait_for(lambda h=handle: h.finished, 60), "the second request was never admitted"
        assert handle.result() == greedy_reference(engine, prompt, 5)
    assert wait_for(lambda: drained(engine))
    check_pool(engine.core.blocks)
    engine.shutdown()


def test_cached_tokens_never_exceed_the_prompt_after_a_preemption():
    engine = engine_with(num_blocks=6)
    prompts = [[(k * 41 + 5 * i) % 500 + 1 for i in range(20)] for k in range(3)]
    handles = [engine.submit(p, 40, stop_token_ids=[]) for p in prompts]
    assert [h.result() for h in handles] == [greedy_reference(engine, p, 40) for p in prompts]
    assert engine.core.counters.preemptions > 0
    assert all(h.stats.cached_tokens <= len(p) for h, p in zip(handles, prompts, strict=True))
    engine.shutdown()
