"""Devices: a CPU decode step runs on one intra-op thread, and the thread count comes back afterwards."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime.devices import one_thread_on_cpu


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


def test_other_devices_keep_their_threads(two_threads):
    with one_thread_on_cpu(torch.device("cuda")):  # a device object needs no GPU
        assert torch.get_num_threads() == 2


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
