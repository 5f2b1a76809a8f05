"""The serving engine under test and what it is held to: a small random engine, prompts (two sharing a long prefix),
greedy tokens from full forwards without any cache, and clients on threads."""

from __future__ import annotations

import threading
import time

from warpcode.model_runtime import EngineConfig, load_random

# Prompts of several lengths; two share a long prefix so the prefix cache has something to find.
SHARED = [(7 * i + 3) % 500 + 1 for i in range(37)]
PROMPTS = [[1, 2, 3], [*SHARED, 9, 9], list(range(40, 90)), [*SHARED, 4], [11] * 13, [300, 200, 100, 5, 6]]
NEW_TOKENS = 10


def greedy_reference(engine, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy tokens from full forwards without any cache: shares no code with the engine's generation."""
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(engine.logits([ids])[0, -1].argmax()))
    return ids[len(prompt) :]


def wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def small_engine(**settings):
    settings.setdefault("block_size", 4)
    return load_random("tiny", seed=4, serving=EngineConfig(**settings))


def generate_from_threads(engine, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """Greedy `engine.generate` of every prompt, each on its own thread, all at once."""
    results: dict[int, list[int]] = {}

    def client(i: int) -> None:
        results[i] = engine.generate(prompts[i], new_tokens, stop_token_ids=[])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [results[i] for i in range(len(prompts))]
