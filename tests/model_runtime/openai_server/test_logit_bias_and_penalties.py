"""logit_bias, presence_penalty and frequency_penalty through the real server and the official `openai` client,
checked against transformers' logits for the same token ids: every greedy token is the best of the reference's
logits changed as OpenAI and vLLM define it,

    logits[t] + logit_bias[t] - presence_penalty * (count[t] > 0) - frequency_penalty * count[t]

(counts over the tokens generated so far), while the logprobs reported stay those of the raw logits."""

from __future__ import annotations

from collections import Counter

import httpx
import openai
import pytest
import torch

from tests.model_runtime.openai_server.servers import CHAT_MODEL

MESSAGES = [{"role": "user", "content": "Show me a.py"}]
TOLERANCE = 2e-3  # fp32 forwards of two implementations


@pytest.fixture
def client(reference_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=reference_url, api_key="unused")


def greedy(client, max_tokens: int = 10, extra: dict | None = None, **body) -> list[int]:
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, max_tokens=max_tokens, temperature=0,
        extra_body={"return_token_ids": True, "ignore_eos": True, **(extra or {})}, **body,
    )  # fmt: skip
    return reply.choices[0].model_extra["token_ids"]


def assert_each_token_is_the_best_of(reference, prompt: list[int], generated: list[int], change) -> None:
    """change(logits [V], counts of the tokens generated before) -> the logits the token was chosen from."""
    logprobs = reference(prompt + generated)[len(prompt) - 1 : -1]
    for step, token in enumerate(generated):
        changed = change(logprobs[step].clone(), Counter(generated[:step]))
        assert changed[token] >= changed.max() - TOLERANCE, f"step {step}: {token} is not the best token"


def test_a_bias_of_minus_100_keeps_the_greedy_token_out(client, reference_engine, reference):
    plain = greedy(client)
    favourite = Counter(plain).most_common(1)[0][0]
    biased = greedy(client, logit_bias={str(favourite): -100})
    assert favourite not in biased

    def change(logits, _):
        logits[favourite] -= 100
        return logits

    prompt = reference_engine.tokenizer.chat_prompt_ids(MESSAGES)
    assert_each_token_is_the_best_of(reference, prompt, biased, change)


def test_a_bias_of_plus_100_forces_a_token_and_logprobs_stay_the_models(client, reference_engine, reference):
    plain = greedy(client, max_tokens=4)
    forced = next(t for t in reversed(range(reference_engine.config.vocab_size)) if t not in plain)
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, max_tokens=4, temperature=0, logit_bias={str(forced): 100},
        logprobs=True, extra_body={"return_token_ids": True, "ignore_eos": True},
    )  # fmt: skip
    assert reply.choices[0].model_extra["token_ids"] == [forced] * 4
    prompt = reference_engine.tokenizer.chat_prompt_ids(MESSAGES)
    raw = reference(prompt + [forced] * 4)[len(prompt) - 1 : -1, forced].tolist()
    got = [entry.logprob for entry in reply.choices[0].logprobs.content]
    assert got == pytest.approx(raw, abs=TOLERANCE)  # before the bias: what the model gives (vLLM's default)


@pytest.mark.parametrize(("presence", "frequency"), [(1.5, 0.0), (0.0, 0.8), (0.7, 0.5), (-2.0, 0.0)])
def test_penalties_change_the_logits_as_openai_defines_them(client, reference_engine, reference, presence, frequency):
    plain = greedy(client, max_tokens=12)
    penalised = greedy(client, max_tokens=12, presence_penalty=presence, frequency_penalty=frequency)

    def change(logits, counts):
        for token, count in counts.items():
            logits[token] -= presence + frequency * count
        return logits

    prompt = reference_engine.tokenizer.chat_prompt_ids(MESSAGES)
    assert_each_token_is_the_best_of(reference, prompt, penalised, change)
    if presence > 0:  # the random model repeats itself: a penalty changes what it says
        assert len(set(plain)) < len(plain) and penalised != plain


@pytest.mark.parametrize("penalty", [1.8, 0.5])
def test_the_repetition_penalty_scales_the_logits_of_tokens_seen_in_the_prompt_or_output(
    client, reference_engine, reference_logits, penalty
):
    """vLLM's extension: a seen token's logit divided by the penalty when positive, multiplied when negative."""
    prompt = reference_engine.tokenizer.chat_prompt_ids(MESSAGES)
    plain = greedy(client, max_tokens=12)
    penalised = greedy(client, max_tokens=12, extra={"repetition_penalty": penalty})
    logits = reference_logits(prompt + penalised)[len(prompt) - 1 : -1]
    for step, token in enumerate(penalised):
        changed = logits[step].clone()
        seen = list(set(prompt + penalised[:step]))
        changed[seen] = torch.where(changed[seen] > 0, changed[seen] / penalty, changed[seen] * penalty)
        assert changed[token] >= changed.max() - TOLERANCE, f"step {step}: {token} is not the best token"
    if penalty > 1:
        assert penalised != plain


def test_penalties_and_bias_apply_to_a_batch_and_to_one_row_only(client, reference_engine):
    """Requests decoding together keep their own changes: a penalised request beside plain ones does not change
    theirs (the engine batches them in one step)."""
    import concurrent.futures

    plain = greedy(client, max_tokens=8)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(greedy, client, 8, presence_penalty=2.0) if i == 1 else pool.submit(greedy, client, 8)
                   for i in range(4)]  # fmt: skip
        results = [future.result() for future in futures]
    assert results[0] == results[2] == results[3] == plain
    assert results[1] == greedy(client, max_tokens=8, presence_penalty=2.0) != plain


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"logit_bias": {"320": 5}}, "logit_bias"),  # the checkpoint's vocabulary is 320 tokens
        ({"logit_bias": {"-1": 5}}, "logit_bias"),
        ({"logit_bias": {"abc": 5}}, "logit_bias"),
        ({"logit_bias": {"3": 101}}, "logit_bias"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -3}, "frequency_penalty"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
    ],
)
def test_values_out_of_range_are_refused_naming_the_parameter(reference_url, body, param):
    for path, extra in (("chat/completions", {"messages": MESSAGES}), ("completions", {"prompt": "a"})):
        response = httpx.post(f"{reference_url}/{path}", json={**extra, **body, "max_tokens": 2}, timeout=30)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"].startswith(param) and param in error["message"]
