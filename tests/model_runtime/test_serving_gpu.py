"""The serving engine on the device, decode steps replayed from CUDA graphs: the CPU tests' guarantees again
(run on the GPU machine: pytest -m gpu tests/model_runtime/test_serving_gpu.py).

In fp32 the streams are exactly those of one request at a time. In bf16 they are not: a batch runs other matrix
product shapes (cuBLAS against the one-row GEMV, another M), whose rounding differs, so two streams may part where
two logits nearly tie. There every token is checked instead to be the greedy choice of a cache-free forward over
its own sequence, up to bf16 rounding: a corrupted neighbour or a wrong cache block fails that at once."""

from __future__ import annotations

import pytest
import torch

from tests.model_runtime.serving_reference import generate_from_threads
from warpcode.model_runtime import EngineConfig, load_random

pytestmark = pytest.mark.gpu

SHARED = [(13 * i + 5) % 500 + 1 for i in range(150)]
PROMPTS = [[1, 2, 3], [*SHARED, 9, 9], list(range(40, 250)), [*SHARED, 4], [11] * 70, [300, 200, 100, 5, 6]]
NEW_TOKENS = 40


def assert_greedy(engine, prompt: list[int], tokens: list[int]) -> None:
    """Each token is (within bf16 rounding: 2% of the logits' range) the argmax of a forward without a cache."""
    logits = engine.logits([prompt + tokens[:-1]])[0, len(prompt) - 1 :].float()  # [len(tokens), V]
    chosen = logits.gather(1, torch.tensor(tokens, device=logits.device)[:, None])[:, 0]
    top, bottom = logits.max(dim=1).values, logits.min(dim=1).values
    assert ((top - chosen) <= 0.02 * (top - bottom)).all(), (top - chosen).max()


def check(engine, prompts: list[list[int]], outputs: list[list[int]], expected: list[list[int]]) -> None:
    """Exact in fp32; each token greedy for its own sequence in bf16 (see the module docstring)."""
    if engine.dtype == torch.float32:
        assert outputs == expected
    else:
        for prompt, tokens in zip(prompts, outputs, strict=True):
            assert_greedy(engine, prompt, tokens)


def greedy_reference(engine, prompt: list[int], new_tokens: int) -> list[int]:
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(engine.logits([ids])[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def served(request):
    engine = load_random("tiny", device="cuda", dtype=request.param, seed=4, serving=EngineConfig(block_size=16))
    reference = {tuple(p): greedy_reference(engine, p, NEW_TOKENS) for p in PROMPTS}
    yield engine, reference
    engine.shutdown()


def test_graphs_are_used(served):
    engine, _ = served
    engine.generate([1, 2], 3)
    assert engine.core.runner.use_graphs and engine.core.runner._graphs
    assert engine.core.prefill_graphs._graphs  # the prompt's chunk replayed the prefill graphs


def test_concurrent_threads_match_one_at_a_time(served):
    engine, reference = served
    alone = [engine.generate(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS]
    check(engine, PROMPTS, generate_from_threads(engine, PROMPTS, NEW_TOKENS), alone)
    check(engine, PROMPTS, alone, [reference[tuple(p)] for p in PROMPTS])


def test_prefix_hit_equals_cold_and_cancel_leaves_others(served):
    engine, _ = served
    cold = load_random("tiny", device="cuda", dtype=engine.dtype, seed=4, serving=EngineConfig(block_size=16))
    expected = cold.generate([*SHARED, 4], NEW_TOKENS, stop_token_ids=[])
    cold.shutdown()
    engine.generate([*SHARED, 9, 9], 4, stop_token_ids=[])
    long = engine.submit(PROMPTS[2], 2000, stop_token_ids=[])
    hit = engine.submit([*SHARED, 4], NEW_TOKENS, stop_token_ids=[])
    next(iter(long))
    long.cancel()
    check(engine, [[*SHARED, 4]], [hit.result()], [expected])
    assert hit.stats.cached_tokens == 150  # 9 full blocks, then 6 ids copied from the next cached one
    assert long.result() and long.finish_reason == "abort"


def test_an_agent_turn_copies_the_last_partial_block_and_prefills_only_its_new_tokens(served):
    engine, _ = served
    prompt = [(29 * i + 3) % 500 + 1 for i in range(37)]
    first = engine.submit(prompt, NEW_TOKENS, stop_token_ids=[])
    first.result()
    turns = [[*prompt, *first.token_ids, 5, 6, 7], [*prompt, *first.token_ids[:5], 8]]  # all of it, and part
    cold = load_random("tiny", device="cuda", dtype=engine.dtype, seed=4, serving=EngineConfig(block_size=16))
    expected = [cold.generate(t, NEW_TOKENS, stop_token_ids=[]) for t in turns]
    cold.shutdown()
    hits = [engine.submit(t, NEW_TOKENS, stop_token_ids=[]) for t in turns]
    check(engine, turns, [h.result() for h in hits], expected)
    assert [h.stats.cached_tokens for h in hits] == [len(prompt) + NEW_TOKENS - 1, len(prompt) + 5]


def test_cache_exhaustion_preempts_and_completes(served):
    engine, _ = served
    small = load_random(
        "tiny", device="cuda", dtype=engine.dtype, seed=4, serving=EngineConfig(block_size=16, num_blocks=40)
    )
    alone = [small.generate(p, 120, stop_token_ids=[]) for p in PROMPTS]
    handles = [small.submit(p, 120, stop_token_ids=[]) for p in PROMPTS]
    check(small, PROMPTS, [h.result() for h in handles], alone)
    assert small.core.counters.preemptions > 0
    small.shutdown()


def test_qwen3_shape_concurrent_streams_are_independent():
    engine = load_random("qwen3-30b-a3b", device="cuda", kv_cache_gb=4)
    prompts = [[7, 3, 9] * 40, [5] * 300, list(range(100, 600))]
    together = engine.generate_batch(prompts, 48, stop_token_ids=[])
    for prompt, tokens in zip(prompts, together, strict=True):
        assert_greedy(engine, prompt, tokens)
    engine.shutdown()
    del engine
    torch.cuda.empty_cache()
