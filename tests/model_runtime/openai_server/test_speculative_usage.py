"""Speculative decoding's per-request stats in serve-model's usage: `usage.speculative` (verify steps, tokens drafted
and accepted, tokens per verify step) beside OpenAI's fields, whole and streamed answers still conforming to the
spec; absent when nothing was verified. On random weights, whose greedy output falls into a loop that the suffix
drafter drafts from."""

from __future__ import annotations

import httpx

from tests.model_runtime.openai_server.openai_spec import COMPLETION_CHUNK, assert_conforms
from tests.model_runtime.openai_server.servers import serving, sse_chunks
from warpcode.model_runtime import EngineConfig, load_random

PROMPT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] * 4
BODY = {"model": "tiny", "prompt": PROMPT, "max_tokens": 240, "temperature": 0}


def test_usage_reports_what_speculation_did():
    engine = load_random("tiny", seed=1, serving=EngineConfig(block_size=4))  # speculation on: the default
    with serving(engine, "tiny") as url:
        reply = httpx.post(f"{url}/completions", json=BODY, timeout=120).json()
        assert_conforms(reply, "CreateCompletionResponse")
        speculative = reply["usage"]["speculative"]
        assert speculative["verify_steps"] > 0 and 0 < speculative["accepted_tokens"] <= speculative["draft_tokens"]
        per_step = (speculative["accepted_tokens"] + speculative["verify_steps"]) / speculative["verify_steps"]
        assert speculative["tokens_per_verify_step"] == round(per_step, 3) > 1
        short = {
            **BODY,
            "prompt": [1, 2, 3],
            "max_tokens": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with httpx.stream("POST", f"{url}/completions", json=short, timeout=120) as response:
            chunks = sse_chunks(response.iter_lines())
        assert "speculative" not in chunks[-1]["usage"]  # three tokens repeat nothing: nothing drafted
        assert_conforms(chunks[-1], COMPLETION_CHUNK)
    engine.shutdown()
