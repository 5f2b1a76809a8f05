"""The serving engine's decode steps under a grammar: every constrained token is the best of the model's logits that
the grammar allows (reference: the model's own forward over the tokens so far, and llguidance's mask of a second
matcher advanced beside it), rows without a grammar decode in the same steps exactly as they do alone, and the host
builds a step's masks while that step's forward runs (after the forward's launch, once the step before is read)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from warpcode.model_runtime.serving import engine_core
from warpcode.model_runtime.serving.grammar import mask_words

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engine(chat_checkpoint):
    from warpcode.model_runtime import load
    from warpcode.model_runtime.speculative import SpeculativeConfig

    # these tests follow the decode step's pipeline: speculation would step a lone request out of it to verify drafts
    engine = load(chat_checkpoint, device="cpu", speculative=SpeculativeConfig("off"))
    yield engine
    engine.shutdown()


def allowed(matcher, vocab: int) -> torch.Tensor:
    """bool [V]: the tokens `matcher` allows next."""
    words = np.empty(mask_words(vocab), dtype=np.int32)
    matcher.fill(words)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]
    return torch.from_numpy(bits.astype(bool))


def assert_best_inside_the_grammar(engine, prompt: list[int], output: list[int], grammar: str) -> None:
    reference, ids = engine.grammars.matcher(grammar), list(prompt)
    for token in output:
        logits = engine.logits(ids)[0, -1]
        inside = logits.masked_fill(~allowed(reference, engine.config.vocab_size), float("-inf"))
        assert inside[token] > float("-inf"), f"token {token} is outside the grammar"
        assert inside[token] >= inside.max() - 1e-4, f"token {token} is not the best the grammar allows"
        reference.accept(token)
        ids.append(token)


def test_constrained_rows_pick_the_best_allowed_token_and_free_rows_are_untouched(engine):
    grammar = engine.grammars.json_schema(SCHEMA)
    prompts = [engine.tokenizer.encode(text) for text in ("def add(a, b):", "the quick brown fox", "name ok")]
    free_prompt = engine.tokenizer.encode("return a + b")
    alone = engine.submit(free_prompt, 24, stop_token_ids=()).result()

    constrained = [engine.submit(p, 40, grammar=engine.grammars.matcher(grammar)) for p in prompts]
    beside = engine.submit(free_prompt, 24, stop_token_ids=())
    assert beside.result() == alone
    for prompt, handle in zip(prompts, constrained, strict=True):
        output = handle.result()
        assert_best_inside_the_grammar(engine, prompt, output, grammar)


def test_the_masks_of_a_step_are_built_while_its_forward_runs(engine, monkeypatch):
    core = engine.core
    events: list[str] = []
    forward_function, choose_function, read = core.runner.forward_function, core.runner.choose_function, core._read

    def recorded(name, function):
        def run(*args, **kwargs):
            events.append(name)
            return function(*args, **kwargs)

        return run

    monkeypatch.setattr(core.runner, "forward_function", lambda *a: recorded("forward", forward_function(*a)))
    monkeypatch.setattr(core.runner, "choose_function", lambda *a: recorded("choose", choose_function(*a)))
    monkeypatch.setattr(core, "_read", recorded("read", read))
    monkeypatch.setattr(engine_core, "grammar_masks", recorded("masks", engine_core.grammar_masks))

    grammar = engine.grammars.json_schema(SCHEMA)
    output = engine.submit(engine.tokenizer.encode("name"), 12, grammar=engine.grammars.matcher(grammar)).result()
    assert len(output) >= 4
    steps = "".join(event[0] for event in events)  # f(orward), r(ead), m(asks), c(hoose)
    # The first step has nothing to read; from then on each forward is launched before the step before it is read
    # and its masks are built, and each step's choice comes last. The answer is complete once a read finds its end:
    # the engine thread may still be inside that step (fr, frm) or past it (frmc, then the last step's read).
    assert re.fullmatch(r"fmc(frmc)+(f|fr|frm|r)?", steps), steps
