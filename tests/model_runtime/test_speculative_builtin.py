"""Speculative decoding on the built-in model (a trained checkpoint with its tokenizer), held to plain decoding of the
same model: greedy answers to prompts holding text to copy are the same token for token with drafts accepted, one
request alone and three at once, and so are a stop string's cut and an answer inside a grammar (structured
generation), whose masks apply to every verified position."""

from __future__ import annotations

import inspect

import pytest

from tests.model_runtime.serving_reference import generate_from_threads
from warpcode.model_runtime import load
from warpcode.model_runtime.builtin_model import builtin_model_dir
from warpcode.model_runtime.chat.messages import Message
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.speculative import SpeculativeConfig, drafter, policy, verify

NEW_TOKENS = 120


def engine_with(mode: str, max_running: int = 1):
    return load(
        builtin_model_dir(), device="cpu", show_progress=False, speculative=SpeculativeConfig(mode, max_running)
    )


@pytest.fixture(scope="module")
def plain():
    engine = engine_with("off")
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def prompts(plain) -> list[list[int]]:
    """Chat prompts asking to copy a file: the model's answer repeats text (the file's, or its own)."""
    texts = [inspect.getsource(module)[:1500] for module in (drafter, policy, verify)]
    conversations = [[Message(role="user", content=f"Copy this file exactly into copy.py:\n\n{t}")] for t in texts]
    return [conversation_prompt_ids(plain.tokenizer, conversation, []) for conversation in conversations]


def test_greedy_answers_are_plain_decodings_and_drafts_are_accepted(plain, prompts):
    speculating = engine_with("suffix")
    for prompt in prompts:
        handle = speculating.submit(prompt, NEW_TOKENS)
        assert handle.result() == plain.generate(prompt, NEW_TOKENS)
        assert handle.stats.accepted_tokens > 0
    speculating.shutdown()


def test_three_speculating_requests_at_once(plain, prompts):
    speculating = engine_with("suffix", max_running=3)
    assert generate_from_threads(speculating, prompts, NEW_TOKENS) == generate_from_threads(plain, prompts, NEW_TOKENS)
    assert speculating.core.counters.accepted_tokens > 0
    speculating.shutdown()


def test_a_stop_string_cuts_the_verified_run_where_plain_decoding_stops(plain, prompts):
    speculating = engine_with("suffix")
    accepted = 0
    for prompt in prompts:
        text = plain.tokenizer.decode(plain.generate(prompt, NEW_TOKENS, stop_token_ids=[]))
        firsts: dict[str, int] = {}
        for at in range(len(text) - 5):
            firsts.setdefault(text[at : at + 6], at)
        stop = max(firsts, key=firsts.__getitem__)  # the six characters first seen last: the answer's new text ends
        expected = plain.generate(prompt, NEW_TOKENS, stop_token_ids=[], stop_strings=[stop])
        handle = speculating.submit(prompt, NEW_TOKENS, stop_token_ids=[], stop_strings=[stop])
        assert handle.result() == expected and handle.finish_reason == "stop" and len(expected) < NEW_TOKENS
        accepted += handle.stats.accepted_tokens
    assert accepted > 0  # drafts were verified before a stop
    speculating.shutdown()


def test_an_answer_inside_a_grammar_is_the_same(plain, prompts):
    speculating = engine_with("suffix")
    # Lower-case words only: the copy's code punctuation is the model's best token at many positions, so the masks
    # decide many tokens, verified ones too; the answer still repeats itself, so drafts are accepted.
    grammar = plain.grammars.lark(r"start: /[a-z ]{300,}/")
    expected = plain.submit(prompts[0], NEW_TOKENS, grammar=plain.grammars.matcher(grammar)).result()
    handle = speculating.submit(prompts[0], NEW_TOKENS, grammar=speculating.grammars.matcher(grammar))
    assert handle.result() == expected and handle.stats.accepted_tokens > 0
    speculating.shutdown()
