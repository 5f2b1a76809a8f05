"""Requests over their lifetime: a client that leaves (mid-stream, or while waiting for a whole answer) has its
sequences (every choice of every prompt) freed at once, and greedy answers do not depend on what else the server is
running."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from tests.model_runtime.openai_server.servers import serving

LONG = 60_000  # tokens: minutes of CPU decoding, unless the request is cancelled


@pytest.fixture(scope="module")
def roomy_engine():
    """Random weights with room for a request far longer than any test waits."""
    from warpcode.model_runtime import get_preset, load_random

    config = get_preset("tiny")
    config.max_position_embeddings = LONG + 64
    engine = load_random(config, device="cpu")
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def roomy_url(roomy_engine):
    with serving(roomy_engine, "tiny") as url:
        yield url


def wait_idle(engine, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while engine.core.active_requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine.core.active_requests == 0, "the abandoned request is still running"


def test_a_client_that_disconnects_mid_stream_frees_its_sequence(roomy_url, roomy_engine):
    body = {"prompt": [1, 2, 3], "max_tokens": LONG, "stream": True, "return_token_ids": True}
    with httpx.stream("POST", f"{roomy_url}/completions", json=body, timeout=60) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        assert roomy_engine.core.active_requests == 1
    wait_idle(roomy_engine)
    reply = httpx.post(f"{roomy_url}/completions", json={"prompt": [4], "max_tokens": 2}, timeout=60)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 2


def test_a_client_that_stops_waiting_for_a_whole_answer_frees_its_sequence(roomy_url, roomy_engine):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{roomy_url}/completions", json={"prompt": [1, 2], "max_tokens": LONG}, timeout=1.0)
    wait_idle(roomy_engine)


def test_a_client_that_leaves_frees_every_choice_of_every_prompt(roomy_url, roomy_engine):
    # two prompts, three choices each: the later choices join once their prompt's first has its first token
    body = {"prompt": [[1, 2, 3], [4, 5]], "n": 3, "max_tokens": LONG, "stream": True, "return_token_ids": True}
    with httpx.stream("POST", f"{roomy_url}/completions", json=body, timeout=60) as response:
        # held, not left to a for loop: a line iterator dropped before the response is read closes the connection
        # (httpcore), so the server would already be cancelling the choices being counted
        lines, seen = response.iter_lines(), set()
        while len(seen) < 6:
            if (line := next(lines)).startswith("data: "):
                seen.add(json.loads(line[len("data: ") :])["choices"][0]["index"])
        assert roomy_engine.core.active_requests == 6
    wait_idle(roomy_engine)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{roomy_url}/completions", json={**body, "stream": False}, timeout=1.0)
    wait_idle(roomy_engine)


async def test_concurrent_greedy_requests_match_one_at_a_time(chat_url):
    prompts = [f"def f{i}(x):" + " return x" * i for i in range(8)]
    body = {"max_tokens": 16, "temperature": 0, "return_token_ids": True}
    async with httpx.AsyncClient(base_url=chat_url, timeout=120) as client:

        async def ids(prompt: str) -> list[int]:
            response = await client.post("/completions", json={**body, "prompt": prompt})
            assert response.status_code == 200, response.text
            return response.json()["choices"][0]["token_ids"]

        alone = [await ids(prompt) for prompt in prompts]
        together = await asyncio.gather(*(ids(prompt) for prompt in prompts))
    assert together == alone
