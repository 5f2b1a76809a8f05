"""Devices: a CPU decode step, verify step or short prefill runs on one intra-op thread, a long prefill on every
thread, and the thread count comes back afterwards."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime.devices import ONE_THREAD_TOKENS, one_thread_on_cpu


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_one_thread_on_the_cpu_and_the_count_restored_even_after_an_error(two_threads):
    with one_thread_on_cpu(torch.device("cpu")):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), one_thread_on_cpu(torch.device("cpu")):
        raise RuntimeError("a failing step")
    assert torch.get_num_threads() == 2


def test_other_devices_and_long_passes_keep_their_threads(two_threads):
    with one_thread_on_cpu(torch.device("cuda")):  # a device object needs no GPU
        assert torch.get_num_threads() == 2
    with one_thread_on_cpu(torch.device("cpu"), ONE_THREAD_TOKENS - 1):
        assert torch.get_num_threads() == 1
    with one_thread_on_cpu(torch.device("cpu"), ONE_THREAD_TOKENS):
        assert torch.get_num_threads() == 2


def test_the_engine_prefills_short_prompts_on_one_thread_and_long_ones_on_every_thread(two_threads, monkeypatch):
    from warpcode.model_runtime import load_random
    from warpcode.model_runtime.serving import engine_core

    engine = load_random("tiny", seed=1)
    seen = []
    steps = engine_core.prefill_in_steps

    def counting(model, state, chunks, layers):  # each step of a pass: (its tokens, the threads it runs on)
        tokens, inner = sum(len(chunk.token_ids) for chunk in chunks), steps(model, state, chunks, layers)
        while True:
            seen.append((tokens, torch.get_num_threads()))
            try:
                next(inner)
            except StopIteration as done:
                return done.value
            yield

    monkeypatch.setattr(engine_core, "prefill_in_steps", counting)
    short, long = ONE_THREAD_TOKENS // 2, ONE_THREAD_TOKENS * 2
    engine.generate([1] + [7] * (short - 1), 1, stop_token_ids=[])
    engine.generate([2] + [9] * (long - 1), 1, stop_token_ids=[])  # shares no prefix with the first
    engine.shutdown()
    assert set(seen) == {(short, 1), (long, 2)} and torch.get_num_threads() == 2


def test_the_engine_decodes_on_one_thread_on_the_cpu(two_threads, monkeypatch):
    from warpcode.model_runtime import load_random

    engine = load_random("tiny", seed=1)
    seen = []
    forward = engine.core.runner.forward_function

    def recording(*args):
        run = forward(*args)
        return lambda: (seen.append(torch.get_num_threads()), run())[1]

    monkeypatch.setattr(engine.core.runner, "forward_function", recording)
    engine.generate([1, 2, 3], 4, stop_token_ids=[])
    engine.shutdown()
    assert seen and set(seen) == {1} and torch.get_num_threads() == 2
