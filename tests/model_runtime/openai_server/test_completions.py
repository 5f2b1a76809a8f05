"""/v1/completions against a real server: greedy results equal the engine's own, streaming adds up to the whole
response, usage and prefix-cache counts, token-id prompts on random weights, stop strings, seeds, defaults."""

from __future__ import annotations

import httpx
import openai

from tests.model_runtime.openai_server.servers import CHAT_MODEL, RANDOM_MODEL, sse_chunks


def complete(url: str, **body) -> dict:
    response = httpx.post(f"{url}/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_health_and_models(chat_url, chat_engine):
    assert httpx.get(chat_url.removesuffix("/v1") + "/health").status_code == 200
    listing = httpx.get(f"{chat_url}/models").json()
    assert listing["object"] == "list" and [m["id"] for m in listing["data"]] == [CHAT_MODEL]
    assert listing["data"][0]["max_model_len"] == chat_engine.context_length
    client = openai.OpenAI(base_url=chat_url, api_key="unused")
    assert [m.id for m in client.models.list()] == [CHAT_MODEL]
    assert client.models.retrieve(CHAT_MODEL).id == CHAT_MODEL


def test_greedy_completion_returns_the_engines_own_tokens_and_usage(chat_url, chat_engine):
    tokenizer = chat_engine.tokenizer
    prompt_ids = tokenizer.encode("def add(a, b):")
    reply = complete(chat_url, model=CHAT_MODEL, prompt=prompt_ids, max_tokens=12, temperature=0, return_token_ids=True)
    [choice] = reply["choices"]
    expected = chat_engine.generate(prompt_ids, 12)
    assert choice["token_ids"] == expected
    shown = [t for t in expected if t not in chat_engine.eos_token_ids]
    assert choice["text"] == tokenizer.decode(shown, skip_special_tokens=True)
    assert choice["finish_reason"] == ("length" if shown == expected else "stop")
    assert reply["object"] == "text_completion" and reply["model"] == CHAT_MODEL and reply["id"].startswith("cmpl-")
    usage = reply["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (len(prompt_ids), len(expected))
    assert usage["total_tokens"] == len(prompt_ids) + len(expected)
    # the same text as a string prompt is the same prompt
    same = complete(chat_url, prompt="def add(a, b):", max_tokens=12, temperature=0, return_token_ids=True)
    assert same["choices"][0]["token_ids"] == expected


def test_a_streamed_completion_adds_up_to_the_whole_one(chat_url):
    body = {"model": CHAT_MODEL, "prompt": "import os", "max_tokens": 24, "temperature": 0, "return_token_ids": True}
    whole = complete(chat_url, **body)
    with httpx.stream("POST", f"{chat_url}/completions", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        chunks = sse_chunks(response.iter_lines())
    choices = [c["choices"][0] for c in chunks]
    assert "".join(c["text"] for c in choices) == whole["choices"][0]["text"]
    assert [t for c in choices for t in c["token_ids"]] == whole["choices"][0]["token_ids"]
    assert [c["finish_reason"] for c in choices][-1] == whole["choices"][0]["finish_reason"]
    assert all(c["finish_reason"] is None for c in choices[:-1])
    assert len({c["id"] for c in chunks}) == 1 and "usage" not in chunks[0]

    client = openai.OpenAI(base_url=chat_url, api_key="unused")
    stream = client.completions.create(
        model=CHAT_MODEL, prompt="import os", max_tokens=24, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    streamed = list(stream)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == whole["choices"][0]["text"]
    assert streamed[-1].choices == [] and streamed[-1].usage.completion_tokens == whole["usage"]["completion_tokens"]
    assert all(c.usage is None for c in streamed[:-1])


def test_a_repeated_prompt_is_served_from_the_prefix_cache(chat_url):
    prompt = "the quick brown fox jumps over the lazy dog; print('hello world') " * 2
    first = complete(chat_url, prompt=prompt, max_tokens=2, temperature=0)["usage"]
    second = complete(chat_url, prompt=prompt, max_tokens=2, temperature=0)["usage"]
    assert first["prompt_tokens"] == second["prompt_tokens"]
    assert 0 < second["prompt_tokens_details"]["cached_tokens"] <= second["prompt_tokens"]
    assert first["prompt_tokens_details"]["cached_tokens"] <= second["prompt_tokens_details"]["cached_tokens"]


def test_token_id_prompts_work_without_a_tokenizer(random_url, random_engine):
    reply = complete(
        random_url, model=RANDOM_MODEL, prompt=[1, 2, 3], max_tokens=8, temperature=0, return_token_ids=True
    )
    assert reply["choices"][0]["token_ids"] == random_engine.generate([1, 2, 3], 8)
    assert reply["choices"][0]["text"] == "" and reply["choices"][0]["finish_reason"] == "length"


def test_stop_strings_end_the_text_before_them(chat_url, chat_engine):
    whole = complete(chat_url, prompt="print(", max_tokens=30, temperature=0)["choices"][0]["text"]
    stop = whole[len(whole) // 2 : len(whole) // 2 + 2]
    cut = complete(chat_url, prompt="print(", max_tokens=30, temperature=0, stop=[stop, "never-there"])
    assert cut["choices"][0]["text"] == whole[: whole.index(stop)]
    assert cut["choices"][0]["finish_reason"] == "stop"


def test_sampling_follows_openai_defaults_and_a_seed_repeats_itself(chat_url):
    seeded = [complete(chat_url, prompt="def", max_tokens=16, seed=7, return_token_ids=True) for _ in range(2)]
    assert seeded[0]["choices"][0]["token_ids"] == seeded[1]["choices"][0]["token_ids"]
    explicit = complete(chat_url, prompt="def", max_tokens=16, seed=7, temperature=1, top_p=1, return_token_ids=True)
    assert explicit["choices"][0]["token_ids"] == seeded[0]["choices"][0]["token_ids"]  # temperature 1 is the default
    filtered = complete(chat_url, prompt="def", max_tokens=4, temperature=0.7, top_k=5, top_p=0.9, min_p=0.05)
    assert filtered["usage"]["completion_tokens"] <= 4


def test_max_tokens_defaults_to_the_room_the_context_leaves(chat_url, chat_engine):
    context = chat_engine.context_length
    prompt_ids = [5 + i % 200 for i in range(context - 6)]
    reply = complete(chat_url, prompt=prompt_ids, temperature=0)
    usage, finish = reply["usage"], reply["choices"][0]["finish_reason"]
    assert usage["prompt_tokens"] == context - 6
    assert usage["completion_tokens"] <= 6 and (finish != "length" or usage["completion_tokens"] == 6)
