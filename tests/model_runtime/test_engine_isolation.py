"""One bad request fails alone: the serving engine refuses what it cannot represent at submit, and when an
iteration fails it finds the request to blame while every other request runs to the same tokens as without it."""

from __future__ import annotations

import pytest

from tests.model_runtime.serving_reference import NEW_TOKENS, PROMPTS, greedy_reference, small_engine, wait_for
from warpcode.model_runtime import RequestRefused, SamplingParams

POISON = 499  # a token id no clean prompt holds; the fault injected below fires whenever it is embedded


@pytest.fixture(scope="module")
def reference():
    engine = small_engine()
    return {tuple(p): greedy_reference(engine, p, NEW_TOKENS) for p in PROMPTS}


def poisoned(engine):
    """Makes every forward pass that embeds POISON raise, as a kernel fault tied to one request's data would."""

    def fault(module, inputs, output):
        if (inputs[0] == POISON).any():
            raise RuntimeError("injected fault")

    return engine.model.model.embed_tokens.register_forward_hook(fault)


@pytest.mark.parametrize(
    ("seed", "sampling"),
    [(2**63, SamplingParams()), (-(2**63) - 1, SamplingParams()), (None, SamplingParams(1.0, top_k=2**63))],
)
def test_values_the_rows_cannot_hold_are_refused_or_clamped_at_submit(seed, sampling):
    engine = small_engine()
    if seed is not None:
        with pytest.raises(RequestRefused, match="seed must be a 64-bit integer"):
            engine.submit([1, 2, 3], 2, sampling, seed)
    else:  # top_k past the vocabulary keeps every token: no filter at all
        assert len(engine.submit([1, 2, 3], 2, sampling, 5).result()) == 2
    assert engine.submit([1, 2, 3], 2, stop_token_ids=[]).result()  # the engine still serves
    assert engine.core.failure is None
    engine.shutdown()


def test_a_request_whose_forward_pass_fails_fails_alone(reference):
    engine = small_engine()
    assert not any(POISON in p or POISON in reference[tuple(p)] for p in PROMPTS)
    hook = poisoned(engine)
    handles = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS[:3]]
    bad = engine.submit([5, POISON, 6], NEW_TOKENS, stop_token_ids=[])
    handles += [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in PROMPTS[3:]]
    with pytest.raises(RuntimeError, match="injected fault"):
        bad.result()
    assert [h.result() for h in handles] == [reference[tuple(p)] for p in PROMPTS]
    assert engine.core.failure is None
    assert engine.submit(PROMPTS[0], NEW_TOKENS, stop_token_ids=[]).result() == reference[tuple(PROMPTS[0])]
    hook.remove()
    assert wait_for(lambda: engine.core.active_requests == 0 and engine.core.held_blocks == 0)  # nothing leaked
    engine.shutdown()


def test_a_request_failing_mid_decode_fails_alone(reference):
    engine = small_engine()
    prompt = PROMPTS[2]
    doomed_after = reference[tuple(prompt)][3]  # the fourth generated token of this prompt poisons its next step
    others = [p for p in PROMPTS if doomed_after not in p and doomed_after not in reference[tuple(p)][:-1]]

    def fault(module, inputs, output):
        if inputs[0].dim() == 1 and inputs[0].numel() <= 8 and (inputs[0] == doomed_after).any():
            raise RuntimeError("injected decode fault")

    hook = engine.model.model.embed_tokens.register_forward_hook(fault)
    doomed = engine.submit(prompt, NEW_TOKENS, stop_token_ids=[])
    handles = [engine.submit(p, NEW_TOKENS, stop_token_ids=[]) for p in others]
    with pytest.raises(RuntimeError, match="injected decode fault"):
        doomed.result()
    assert [h.result() for h in handles] == [reference[tuple(p)] for p in others]
    assert engine.core.failure is None
    hook.remove()
    engine.shutdown()


def test_failures_no_request_explains_stop_the_engine_and_say_why():
    engine = small_engine()
    assert engine.submit([1, 2], 2, stop_token_ids=[]).result()
    core = engine.core

    def broken(*args, **kwargs):
        raise RuntimeError("scheduler bug")

    core.scheduler.admit = broken
    handle = engine.submit([1, 2], 2, stop_token_ids=[])
    with pytest.raises(RuntimeError, match="scheduler bug"):
        handle.result()
    assert "scheduler bug" in core.failure
    with pytest.raises(RequestRefused, match="stopped after an error"):
        engine.submit([1, 2], 2)
    engine.shutdown()
