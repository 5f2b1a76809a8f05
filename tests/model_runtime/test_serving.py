"""The serving engine on the CPU: continuous batching from real threads, the paged cache with prefix caching,
chunked prefill, cancellation, cache exhaustion and admission control, against full forwards without a cache."""

from __future__ import annotations

import asyncio

import pytest

from tests.model_runtime.serving_reference import (
    NEW_TOKENS,
    PROMPTS,
    SHARED,
    generate_from_threads,
    greedy_reference,
    small_engine,
    wait_for,
)
from warpcode.model_runtime import EngineConfig, RequestRefused, SamplingParams, load_random


@pytest.fixture(scope="module")
def reference():
    engine = load_random("tiny", seed=4)
    return {tuple(p): greedy_reference(engine, p, NEW_TOKENS) for p in PROMPTS}


def test_concurrent_requests_from_threads_match_one_at_a_time(reference):
    engine = small_engine()
    assert generate_from_threads(engine, PROMPTS, NEW_TOKENS) == [reference[tuple(p)] for p in PROMPTS]
    assert engine.core.active_requests == 0
    engine.shutdown()


def test_a_prefix_cache_hit_gives_the_tokens_of_a_cold_run(reference):
    engine = small_engine()
    first = engine.submit([*SHARED, 9, 9], NEW_TOKENS, stop_token_ids=[])
    assert first.result() == reference[tuple([*SHARED, 9, 9])]
    assert first.stats.cached_tokens == 0
    second = engine.submit([*SHARED, 4], NEW_TOKENS, stop_token_ids=[])
    assert second.result() == reference[tuple([*SHARED, 4])]
    # The shared prompt's nine full 4-token blocks, and the first id of the next one: all but the last token.
    assert second.stats.cached_tokens == 37
    # An agent's next turn: the previous prompt and answer, then more tokens: only the new tail is prefilled.
    turn = [*SHARED, 9, 9, *first.token_ids, 17, 18, 19]
    third = engine.submit(turn, NEW_TOKENS, stop_token_ids=[])
    assert third.result() == greedy_reference(engine, turn, NEW_TOKENS)
    assert third.stats.cached_tokens == (len(SHARED) + 2 + NEW_TOKENS - 1) // 4 * 4
    engine.shutdown()


def test_chunked_prefill_and_interleaving_give_the_same_tokens(reference):
    engine = small_engine(max_prefill_tokens=7, interleaved_prefill_tokens=3)
    handles = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS]
    assert [h.result() for h in handles] == [reference[tuple(p)] for p in PROMPTS]
    engine.shutdown()


def test_cancelling_one_request_leaves_the_others_unchanged(reference):
    engine = small_engine()
    long = engine.submit(PROMPTS[2], 200, stop_token_ids=[])
    others = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS[:2]]
    outputs = iter(long)
    got = next(outputs).token_ids
    long.cancel()
    rest = list(outputs)
    assert rest[-1].finish_reason == "abort"
    assert len(got) + sum(len(o.token_ids) for o in rest) < 200
    assert [h.result() for h in others] == [reference[tuple(p)] for p in PROMPTS[:2]]
    assert engine.core.active_requests == 0
    assert wait_for(lambda: engine.core.held_blocks == 0)  # every block is free or cached again
    engine.shutdown()


def test_a_full_cache_queues_or_preempts_and_every_request_completes(reference):
    # 24 blocks of 4 tokens: far less than six sequences of up to 60 tokens need at once.
    engine = small_engine(num_blocks=24)
    handles = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS]
    assert [h.result() for h in handles] == [reference[tuple(p)] for p in PROMPTS]
    long = engine.submit(PROMPTS[2], 40, stop_token_ids=[])
    racing = [engine.submit(p, 40, stop_token_ids=[]) for p in (PROMPTS[1], PROMPTS[3])]
    assert long.result() == greedy_reference(engine, PROMPTS[2], 40)
    assert [h.result() for h in racing] == [greedy_reference(engine, p, 40) for p in (PROMPTS[1], PROMPTS[3])]
    assert engine.core.counters.preemptions > 0
    engine.shutdown()


def test_requests_that_can_never_fit_are_refused():
    engine = small_engine(num_blocks=8, max_model_len=64)
    with pytest.raises(RequestRefused, match="exceed the context of 64 tokens"):
        engine.submit([1] * 60, 10)
    with pytest.raises(RequestRefused, match="whole KV cache"):
        engine.submit([1] * 30, 10)
    with pytest.raises(RequestRefused, match="at least one token"):
        engine.submit([], 4)
    with pytest.raises(RequestRefused, match=r"token ids must be in \[0, 512\)"):
        engine.submit([1, 512], 4)
    with pytest.raises(RequestRefused, match="token ids must be integers"):
        engine.submit([1, 2.0], 4)
    assert len(engine.generate([1, 2, 3], 4, stop_token_ids=[])) == 4  # and it keeps serving
    engine.shutdown()


def test_seeded_sampling_does_not_depend_on_the_neighbours():
    engine = small_engine()
    sampling = SamplingParams(temperature=0.9, top_k=20)
    alone = engine.submit(PROMPTS[0], 12, sampling, seed=5, stop_token_ids=[]).result()
    crowd = [engine.submit(p, 12, sampling, seed=i, stop_token_ids=[]) for i, p in enumerate(PROMPTS[1:])]
    again = engine.submit(PROMPTS[0], 12, sampling, seed=5, stop_token_ids=[])
    assert again.result() == alone
    assert all(len(h.result()) == 12 for h in crowd)
    engine.shutdown()


def test_outputs_stream_to_an_event_loop(reference):
    engine = small_engine()

    async def collect(prompt: list[int]) -> list[int]:
        ids = []
        async for output in engine.submit(prompt, NEW_TOKENS, stop_token_ids=[]):
            ids += output.token_ids
        return ids

    async def main() -> list[list[int]]:
        return await asyncio.gather(*(collect(p) for p in PROMPTS[:3]))

    assert asyncio.run(main()) == [reference[tuple(p)] for p in PROMPTS[:3]]
    engine.shutdown()


def test_stop_tokens_end_a_request_with_reason_stop(reference):
    engine = small_engine()
    expected = reference[tuple(PROMPTS[0])]
    handle = engine.submit(PROMPTS[0], NEW_TOKENS, stop_token_ids=[expected[3]])
    assert handle.result() == expected[: expected.index(expected[3]) + 1]
    assert handle.finish_reason == "stop"
    engine.shutdown()


def test_shutdown_ends_running_requests():
    engine = small_engine()
    handle = engine.submit([1, 2, 3], 2000, stop_token_ids=[])
    next(iter(handle))
    core = engine.core
    engine.shutdown()
    assert handle.result()[:1] and handle.finish_reason == "abort"
    with pytest.raises(RequestRefused, match="shut down"):
        core.submit([1], 1, SamplingParams(), None, None, ())


def test_a_bad_setting_is_a_clear_error():
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        EngineConfig(block_size=0)
    with pytest.raises(ValueError, match="unknown serving engine setting"):
        load_random("tiny", kv_cache_size=3)


def test_the_static_runner_and_the_engine_agree():
    engine = small_engine()
    runner = engine.runner
    runner.reserve(2, 32)
    first = runner.prefill([PROMPTS[0], PROMPTS[4]], SamplingParams(), seed=0)
    steps = runner.decode(2, SamplingParams())
    later = [next(steps) for _ in range(NEW_TOKENS - 1)]
    steps.close()
    static = [[token, *(step[row] for step in later)] for row, token in enumerate(first)]
    assert static == engine.generate_batch([PROMPTS[0], PROMPTS[4]], NEW_TOKENS, stop_token_ids=[])
    engine.shutdown()


def test_warm_up_is_refused_while_serving_and_harmless_off_the_gpu(reference):
    engine = small_engine()
    assert engine.warm_up(8, 4096) == 0  # no graphs on the CPU
    assert engine.generate(PROMPTS[0], NEW_TOKENS, stop_token_ids=[]) == reference[tuple(PROMPTS[0])]
    handle = engine.submit(PROMPTS[1], 500, stop_token_ids=[])
    next(iter(handle))
    with pytest.raises(RuntimeError, match="before it serves requests"):
        engine.warm_up(1, 64)
    engine.shutdown()


def test_bench_serve_command_on_cpu(capsys):
    import json

    from warpcode.agent.cli import main

    argv = ["bench", "serve", "--preset", "tiny", "--random-weights", "--device", "cpu", "--concurrency", "1,3"]
    options = ["--prompt", "40", "--new-tokens", "12", "--trace-max", "900", "--long-prompt", "1200"]
    assert main([*argv, *options, "--cold-prefill", "300", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["scenario"], r["streams"]) for r in rows if r["scenario"] in ("static", "concurrency")] == [
        ("static", 1), ("static", 3), ("concurrency", 1), ("concurrency", 3)
    ]  # fmt: skip
    trace = [r for r in rows if r["scenario"] == "trace"]
    assert trace[1]["cache_hit_rate"] > 0.5 and trace[-1]["cache_hit_rate"] == 0  # a cached turn, then cold
    # Turns of 450 and 814 tokens: the second prefills its 300 new tokens and the first's last answer token only.
    (median,) = [r for r in rows if r["scenario"] == "trace-median"]
    assert [r["prefill_tokens_p50"] for r in trace] == [450, 301, 814] and median["prefill_tokens_p50"] == 301
    assert all(r["tokens_per_second"] > 0 for r in rows if r["scenario"] in ("static", "concurrency"))
    # Every TTFT but the trace's later turns is of a prompt the prefix cache has not seen, not one token of it.
    cold = [r for r in rows if r["scenario"] in ("concurrency", "long-prompt", "cold-prefill")] + trace[:1] + trace[-1:]
    assert len(cold) == 6 and all(r["cached_tokens"] == 0 for r in cold), cold


def test_prompts_prefilled_a_layer_at_a_time_between_decode_steps(reference):
    engine = small_engine(interleaved_prefill_tokens=5, prefill_layers_per_step=1)
    running = engine.submit(PROMPTS[0], 30, stop_token_ids=[])
    next(iter(running))  # it decodes from here: the other prompts' passes now run a layer per step
    handles = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS[1:]]
    dropped = engine.submit(list(range(100, 400)), 5, stop_token_ids=[])
    dropped.cancel()  # while its pass may be writing its blocks
    assert [h.result() for h in handles] == [reference[tuple(p)] for p in PROMPTS[1:]]
    assert running.result() == greedy_reference(engine, PROMPTS[0], 30)
    assert dropped.result() == [] and dropped.finish_reason == "abort"
    assert wait_for(lambda: engine.core.held_blocks == 0)
    engine.shutdown()


def test_a_consumer_whose_event_loop_closed_does_not_stop_the_engine(reference):
    engine = small_engine()
    handle = engine.submit(PROMPTS[1], 300, stop_token_ids=[])
    loop = asyncio.new_event_loop()
    iterator = handle.__aiter__()
    loop.run_until_complete(iterator.__anext__())
    loop.close()  # the handle still lists that loop among its waiters
    other = engine.submit(PROMPTS[0], NEW_TOKENS, stop_token_ids=[])
    assert wait_for(lambda: other.finished)
    assert other.result() == reference[tuple(PROMPTS[0])]
    handle.cancel()
    engine.shutdown()


def test_a_tight_cache_with_streams_ending_at_stop_tokens_drains_cleanly(reference):
    """Streams that end (stop tokens) while others grow and get preempted: a finished sequence is never preempted
    or admitted again, every output is the reference's up to its stop, and every block comes back."""
    engine = small_engine(num_blocks=24)
    cases = []
    for round_ in range(3):
        for prompt in PROMPTS:
            expected = reference[tuple(prompt)]
            stop = expected[(round_ * 3 + len(prompt)) % NEW_TOKENS]
            cases.append((prompt, stop, expected[: expected.index(stop) + 1]))
    handles = [engine.submit(prompt, NEW_TOKENS, stop_token_ids=[stop]) for prompt, stop, _ in cases]
    assert [h.result() for h in handles] == [want for _, _, want in cases]
    assert wait_for(lambda: engine.core.held_blocks == 0 and engine.core.scheduler.idle)
    engine.shutdown()
