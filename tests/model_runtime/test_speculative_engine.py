"""Speculative decoding in the serving engine (issue 50), held to plain decoding: with speculation on, greedy outputs
are the tokens of the same engine with speculation off, token for token, and seeded sampling too (verify.py draws
each position with the request's own randomness for that step), for one request, several at once, with
cancellations, preemptions (a cache far too small) and prefix-cache hits on what a speculating request cached; stop
tokens and max_tokens cut where plain decoding stops. Every case also asserts that drafts were verified and
accepted, so it tests the verify path and not only plain decoding beside it.

The tiny random model copies nothing, but its greedy output falls into loops after a hundred-odd tokens, which the
suffix drafter then drafts from its own output.
"""

from __future__ import annotations

import threading

import pytest

from tests.model_runtime.block_pool_books import check_pool
from tests.model_runtime.serving_reference import wait_for
from warpcode.model_runtime import EngineConfig, load_random
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.logits_processors import LogitsProcessing
from warpcode.model_runtime.speculative import SpeculativeConfig

PROMPTS = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] * 4, [40 + i % 7 for i in range(30)], [300, 200, 100] * 9]
NEW_TOKENS = 240


def engine(mode: str, max_running: int = 1, **settings):
    settings.setdefault("block_size", 4)
    speculative = SpeculativeConfig(mode, max_running)
    return load_random("tiny", seed=1, serving=EngineConfig(speculative=speculative, **settings))


@pytest.fixture(scope="module")
def plain():
    """Plain decoding, the reference: the same model and cache without speculation."""
    reference = engine("off")
    yield reference
    reference.shutdown()


def run(engine_, prompt, new_tokens=NEW_TOKENS, **options):
    handle = engine_.submit(prompt, new_tokens, stop_token_ids=options.pop("stop_token_ids", []), **options)
    return handle.result(), handle


def drained(engine_) -> bool:
    return engine_.core.held_blocks == 0 and engine_.core.scheduler.idle


@pytest.mark.parametrize("mode", ["suffix", "ngram"])
def test_greedy_outputs_are_plain_decodings_token_for_token(plain, mode):
    speculating = engine(mode)
    for prompt in PROMPTS:
        output, handle = run(speculating, prompt)
        assert output == run(plain, prompt)[0]
        assert handle.stats.verify_steps > 0 and handle.stats.accepted_tokens > 0
        assert handle.stats.tokens_per_verify_step > 1
    assert plain.core.counters.verify_steps == 0  # off is the engine as it was
    assert wait_for(lambda: drained(speculating))
    check_pool(speculating.core.blocks)
    speculating.shutdown()


def test_concurrent_requests_each_verify_their_own_drafts(plain):
    speculating = engine("suffix", max_running=4)
    handles = [speculating.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS]  # decoding side by side
    results: dict[int, list[int]] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, handles[i].result())) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(3)] == [run(plain, p)[0] for p in PROMPTS]
    assert sum(h.stats.accepted_tokens for h in handles) > 0
    assert wait_for(lambda: drained(speculating))
    speculating.shutdown()


def test_speculation_steps_aside_while_more_requests_run_than_max_running(plain):
    speculating = engine("suffix", max_running=1)
    handles = [speculating.submit(p, 60, stop_token_ids=[]) for p in PROMPTS[:2]]
    assert [h.result() for h in handles] == [run(plain, p, 60)[0] for p in PROMPTS[:2]]
    assert speculating.core.counters.verify_steps == 0  # two admitted at once from the first step to the last
    speculating.shutdown()


def test_a_cancelled_request_frees_its_blocks_and_leaves_the_others_unchanged(plain):
    speculating = engine("suffix", max_running=4)
    doomed = speculating.submit(PROMPTS[0], 1000, stop_token_ids=[])
    kept = speculating.submit(PROMPTS[1], NEW_TOKENS, stop_token_ids=[])
    assert wait_for(lambda: doomed.stats.verify_steps > 0)
    doomed.cancel()
    assert kept.result() == run(plain, PROMPTS[1])[0]
    doomed.result()
    assert doomed.finish_reason == "abort" and kept.stats.accepted_tokens > 0
    assert wait_for(lambda: drained(speculating))
    check_pool(speculating.core.blocks)
    speculating.shutdown()


def test_preempted_speculating_requests_resume_exactly(plain):
    # 100 blocks of 4 tokens for three requests of up to 288 tokens (72 blocks each): the newest gets preempted
    speculating = engine("suffix", max_running=4, num_blocks=100)
    handles = [speculating.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS]
    assert [h.result() for h in handles] == [run(plain, p)[0] for p in PROMPTS]
    assert speculating.core.counters.preemptions > 0
    assert sum(h.stats.accepted_tokens for h in handles) > 0
    assert wait_for(lambda: drained(speculating))
    check_pool(speculating.core.blocks)
    speculating.shutdown()


def test_the_prefix_cache_holds_only_committed_tokens(plain):
    """A speculating request's blocks, reused by a request that continues its output: had a block been registered
    with a rejected token's keys, or a rolled-back slot counted as computed, the continuation would differ."""
    speculating = engine("suffix")
    first, handle = run(speculating, PROMPTS[0])
    assert handle.stats.draft_tokens > handle.stats.accepted_tokens > 0  # some drafted tokens were rejected
    assert wait_for(lambda: drained(speculating))
    check_pool(speculating.core.blocks)
    cut = 200
    again, handle = run(speculating, [*PROMPTS[0], *first[:cut]], NEW_TOKENS - cut)
    assert handle.stats.cached_tokens >= len(PROMPTS[0]) + cut - 4  # all but its last (partial) block
    assert again == first[cut:]
    speculating.shutdown()


def test_stop_tokens_and_max_tokens_cut_where_plain_decoding_stops(plain):
    speculating = engine("suffix")
    reference = run(plain, PROMPTS[0])[0]
    late = next(i for i in range(150, NEW_TOKENS) if reference[i] not in reference[:i])  # first seen that late
    output, handle = run(speculating, PROMPTS[0], stop_token_ids=[reference[late]])
    assert output == reference[: late + 1] and handle.finish_reason == "stop"
    for limit in (131, 157, 173):  # inside the repeating part, where verify steps commit several tokens
        output, handle = run(speculating, PROMPTS[0], limit)
        assert output == reference[:limit] and handle.finish_reason == "length"
        assert handle.stats.accepted_tokens > 0
    speculating.shutdown()


def test_seeded_sampling_draws_the_tokens_plain_decoding_draws(plain):
    # the random model's distributions are flat: a low temperature lets its loops form (and drafts be accepted)
    speculating = engine("suffix")
    sampling, accepted, outputs = SamplingParams(temperature=0.02, top_p=0.95), 0, set()
    for seed in range(4):
        output, handle = run(speculating, PROMPTS[0], 200, sampling=sampling, seed=seed)
        assert output == run(plain, PROMPTS[0], 200, sampling=sampling, seed=seed)[0]
        accepted += handle.stats.accepted_tokens
        outputs.add(tuple(output))
    assert accepted > 0 and len(outputs) > 1  # drafts verified, and the seeds drew different tokens
    speculating.shutdown()


def test_penalties_and_logprobs_hold_per_committed_token(plain):
    speculating = engine("suffix")
    processing = LogitsProcessing(presence_penalty=0.05, frequency_penalty=0.01, logit_bias=((7, 0.5),), logprobs=2)
    expected = plain.submit(PROMPTS[0], NEW_TOKENS, stop_token_ids=[], processing=processing)
    handle = speculating.submit(PROMPTS[0], NEW_TOKENS, stop_token_ids=[], processing=processing)
    got = [out for out in handle]
    wanted = [out for out in expected]
    assert handle.token_ids == expected.token_ids and handle.stats.accepted_tokens > 0
    got_logprobs = [lp for out in got for lp in out.logprobs or []]
    wanted_logprobs = [lp for out in wanted for lp in out.logprobs or []]
    assert [lp.token_id for lp in got_logprobs] == handle.token_ids
    for mine, theirs in zip(got_logprobs, wanted_logprobs, strict=True):
        assert mine.logprob == pytest.approx(theirs.logprob, abs=1e-4)
        assert [t for t, _ in mine.top] == [t for t, _ in theirs.top]
    speculating.shutdown()


def test_a_bad_speculative_setting_is_a_clear_error():
    with pytest.raises(ValueError, match="one of off, ngram, suffix; got 'eagle'"):
        SpeculativeConfig("eagle")
    with pytest.raises(ValueError, match="max_running must be a positive integer"):
        SpeculativeConfig("suffix", 0)


def test_a_document_holding_what_the_model_writes_is_drafted_from_and_changes_no_token(plain):
    # The document is the output itself, given apart (as an agent's backend gives the plain text of a file the model
    # is about to copy): once the output's first tokens match its start, whole drafts come from it and are accepted.
    prompt, new_tokens = PROMPTS[1], 60  # before the tiny model's output falls into a loop of its own
    expected = run(plain, prompt, new_tokens)[0]
    speculating = engine("suffix")
    alone, alone_handle = run(speculating, prompt, new_tokens)
    copied, handle = run(speculating, prompt, new_tokens, documents=[expected])
    assert alone == copied == expected
    assert handle.stats.accepted_tokens >= new_tokens - 10 > alone_handle.stats.accepted_tokens
    assert handle.stats.tokens_per_verify_step > 8
    speculating.shutdown()
