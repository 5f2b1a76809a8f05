"""logprobs through the real server and the official `openai` client, against an independent reference: the
checkpoint's logits from transformers' own forward over the same token ids (log_softmax of the raw logits, vLLM's
default logprobs mode). Chat's `logprobs` / `top_logprobs`, streamed and not; completions' legacy `logprobs`;
`echo` with the prompt's logprobs; the limits (400s naming the parameter)."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.model_runtime.openai_server.servers import CHAT_MODEL

MESSAGES = [{"role": "user", "content": "Show me a.py"}]
TOLERANCE = 2e-3  # fp32 forwards of two implementations (paged decode kernels vs transformers' eager attention)


def chat_prompt(reference_engine) -> list[int]:
    return reference_engine.tokenizer.chat_prompt_ids(MESSAGES)


@pytest.fixture
def client(reference_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=reference_url, api_key="unused")


def test_chat_logprobs_are_the_models_own_and_top_logprobs_its_most_likely_tokens(client, reference_engine, reference):
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, max_tokens=8, temperature=0, logprobs=True, top_logprobs=5,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    choice = reply.choices[0]
    generated = choice.model_extra["token_ids"]
    content = choice.logprobs.content
    assert len(content) == len(generated) >= 1
    prompt = chat_prompt(reference_engine)
    expected = reference(prompt + generated)[len(prompt) - 1 : -1]  # position i predicts token i + 1
    tokenizer = reference_engine.tokenizer
    for position, (entry, token) in enumerate(zip(content, generated, strict=True)):
        row = expected[position]
        assert entry.token == tokenizer.decode([token]) and entry.bytes == list(entry.token.encode())
        assert entry.logprob == pytest.approx(row[token].item(), abs=TOLERANCE)
        assert len(entry.top_logprobs) == 5
        top = [alternative.logprob for alternative in entry.top_logprobs]
        assert top == sorted(top, reverse=True)
        assert top == pytest.approx(row.topk(5).values.tolist(), abs=TOLERANCE)
        assert entry.top_logprobs[0].token == entry.token  # greedy picks the most likely token
    without = client.chat.completions.create(model=CHAT_MODEL, messages=MESSAGES, max_tokens=8, temperature=0)
    assert without.choices[0].logprobs is None and without.choices[0].message.content == choice.message.content


def test_streamed_chunks_carry_the_same_logprobs(client):
    body = dict(model=CHAT_MODEL, messages=MESSAGES, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**body).choices[0].logprobs.content
    chunks = list(client.chat.completions.create(**body, stream=True))
    streamed = [entry for c in chunks if c.choices[0].logprobs for entry in c.choices[0].logprobs.content]
    # the same tokens; logprobs to float rounding: the second request reads the prompt's blocks from the prefix cache,
    # so its prefill sums in another order
    assert [e.token for e in streamed] == [e.token for e in whole]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in whole], abs=1e-5)
    assert [[t.token for t in e.top_logprobs] for e in streamed] == [[t.token for t in e.top_logprobs] for e in whole]
    assert any(c.choices[0].delta.content and c.choices[0].logprobs.content for c in chunks)


def test_logprobs_of_a_sampled_answer_are_those_of_the_tokens_it_drew(client, reference_engine, reference):
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, max_tokens=6, temperature=1.5, seed=3, logprobs=True,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    generated = reply.choices[0].model_extra["token_ids"]
    prompt = chat_prompt(reference_engine)
    expected = reference(prompt + generated)[len(prompt) - 1 : -1]
    got = [entry.logprob for entry in reply.choices[0].logprobs.content]
    assert got == pytest.approx([expected[i, t].item() for i, t in enumerate(generated)], abs=TOLERANCE)
    assert all(entry.top_logprobs == [] for entry in reply.choices[0].logprobs.content)


def test_completion_logprobs_and_echo_return_the_prompt_and_its_logprobs(reference_url, reference_engine, reference):
    client = openai.OpenAI(base_url=reference_url, api_key="unused")
    prompt = "def add(a, b):"
    prompt_ids = reference_engine.tokenizer.encode(prompt)
    reply = client.completions.create(
        model=CHAT_MODEL, prompt=prompt, max_tokens=5, temperature=0, logprobs=3, echo=True,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    choice = reply.choices[0]
    generated = choice.model_extra["token_ids"]
    assert choice.text.startswith(prompt) and len(choice.text) > len(prompt)
    logprobs = choice.logprobs
    ids = prompt_ids + generated
    assert logprobs.tokens == [reference_engine.tokenizer.decode([t]) for t in ids]
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    expected = reference(ids)
    for position in range(1, len(ids)):
        wanted = expected[position - 1, ids[position]].item()
        assert logprobs.token_logprobs[position] == pytest.approx(wanted, abs=TOLERANCE)
        top = logprobs.top_logprobs[position]
        assert 3 <= len(top) <= 4 and logprobs.tokens[position] in top  # vLLM: the chosen token is always there
    offsets = [0]
    for token in logprobs.tokens[:-1]:
        offsets.append(offsets[-1] + len(token))
    assert logprobs.text_offset == offsets
    # without echo: only the completion, and without logprobs none
    plain = client.completions.create(model=CHAT_MODEL, prompt=prompt, max_tokens=5, temperature=0, logprobs=0)
    assert plain.choices[0].text == choice.text[len(prompt) :]
    expected_plain = logprobs.token_logprobs[len(prompt_ids) :]
    assert plain.choices[0].logprobs.token_logprobs == pytest.approx(expected_plain, abs=TOLERANCE)
    echoed = client.completions.create(model=CHAT_MODEL, prompt=prompt, max_tokens=5, temperature=0, echo=True)
    assert echoed.choices[0].text == choice.text and echoed.choices[0].logprobs is None
    # streamed: the prompt (and its logprobs) first, then the completion's
    chunks = list(client.completions.create(model=CHAT_MODEL, prompt=prompt, max_tokens=5, temperature=0,
                                            logprobs=3, echo=True, stream=True))  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks) == choice.text
    streamed = [v for c in chunks for v in c.choices[0].logprobs.token_logprobs]
    assert streamed[0] is None and streamed[1:] == pytest.approx(logprobs.token_logprobs[1:], abs=TOLERANCE)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("chat/completions", {"messages": MESSAGES, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("chat/completions", {"messages": MESSAGES, "top_logprobs": 2}, "top_logprobs"),
        ("completions", {"prompt": "a", "logprobs": 6}, "logprobs"),
    ],
)
def test_logprobs_beyond_the_limits_are_refused_naming_the_parameter(reference_url, path, body, param):
    response = httpx.post(f"{reference_url}/{path}", json={**body, "max_tokens": 2}, timeout=30)
    assert response.status_code == 400
    assert param in response.json()["error"]["message"]
