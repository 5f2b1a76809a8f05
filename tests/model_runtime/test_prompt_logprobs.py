"""The serving engine's prompt logprobs (what completions' echo with logprobs returns): each prompt token's
logprob under the reference forward's log_softmax over the tokens before it, the first None, across more than one
slice of the LM head; prompts past the bound are refused with a message naming echo."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime.serving.logits_processors import LogitsProcessing
from warpcode.model_runtime.serving.request import RequestRefused
from warpcode.model_runtime.serving.token_logprobs import LM_HEAD_ROWS, MAX_PROMPT_LOGPROBS_TOKENS


@pytest.fixture(scope="module")
def engine():
    from warpcode.model_runtime import load_random

    engine = load_random("tiny", device="cpu")
    yield engine
    engine.shutdown()


def test_prompt_logprobs_are_the_reference_forwards_over_every_slice(engine):
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, engine.config.vocab_size, (LM_HEAD_ROWS + 40,), generator=generator).tolist()
    handle = engine.submit(prompt, 2, processing=LogitsProcessing(prompt_logprobs=3))
    handle.result()
    got = handle.prompt_logprobs
    assert len(got) == len(prompt) and got[0] is None
    reference = torch.log_softmax(engine.logits(prompt)[0], dim=-1)
    expected = reference[torch.arange(len(prompt) - 1), torch.tensor(prompt[1:])]
    assert torch.allclose(torch.tensor([lp.logprob for lp in got[1:]]), expected, atol=1e-4)
    assert [lp.token_id for lp in got[1:]] == prompt[1:]
    last = got[-1].top
    assert [t for t, _ in last] == reference[-2].topk(3).indices.tolist()


def test_a_prompt_past_the_bound_is_refused_naming_echo(engine):
    prompt = [1] * (MAX_PROMPT_LOGPROBS_TOKENS + 1)
    with pytest.raises(RequestRefused, match="echo"):
        engine.submit(prompt, 1, processing=LogitsProcessing(prompt_logprobs=0))
