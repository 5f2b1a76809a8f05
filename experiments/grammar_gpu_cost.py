"""What structured generation and logits processing cost a decode step on the GPU: decode tok/s of the same rows
free, inside a json_schema grammar, inside the agent's tool-call grammar (the `local:` backend's: free text, calls
held to the agent's tool schemas), with logprobs, and with a logit_bias, alternating over rounds in one process
(qwen3-30b-a3b random weights, graphs warm).

Every row decodes exactly --tokens tokens (the schema's answer, a long array of records, runs past them, and no
token stops a free row), and the rate is the decode phase's alone: tokens after each row's first, over the time from
the last row's first token to the last row's end (prefill excluded). The grammar runs over a large byte-level
vocabulary (grammar_mask_cost.py's, 113K words of the standard library, near Qwen's 151K): llguidance's mask work
grows with the vocabulary. Each constrained answer is checked to stay inside its grammar.

At batch 32 the arms' tokens differ, and so do the experts their rows share (random weights route similar tokens
alike), which moves a step's time by more than the grammar does: so each arm also reports the host's time building
a step's masks (mask_ms) beside the step's own (step_ms). The forward hides the masks while mask_ms < step_ms.

Run (GPU machine, repository root on PYTHONPATH for the tokenizer's special tokens):
    PYTHONPATH=. python3 experiments/grammar_gpu_cost.py [--batch 1,32] [--tokens 256] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from grammar_mask_cost import big_tokenizer

from tests.model_runtime.checkpoints import EOS_TOKEN
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime import load_random
from warpcode.model_runtime.chat.toolcall_grammars import HERMES, text_with_calls
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving import engine_core
from warpcode.model_runtime.serving.grammar import Grammars
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, LogitsProcessing

RECORD = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
        "n": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": ["name", "tags", "n"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {"records": {"type": "array", "items": RECORD, "minItems": 1000}},
    "required": ["records"],
    "additionalProperties": False,
}
ARMS = {
    "free": NO_PROCESSING,
    "json_schema": NO_PROCESSING,
    "tool_calls": NO_PROCESSING,
    "logprobs": LogitsProcessing(logprobs=5),
    "logit_bias": LogitsProcessing(logit_bias=((7, 2.0), (11, -2.0))),
}


MASK_SECONDS: list[float] = []  # the host's time in each masked step's grammar_masks


def timed_masks(rows, masks) -> None:
    start = time.perf_counter()
    build_masks(rows, masks)
    MASK_SECONDS.append(time.perf_counter() - start)


build_masks, engine_core.grammar_masks = engine_core.grammar_masks, timed_masks


def decode_rate(engine, grammars, grammars_of_arms: dict[str, str], arm: str, batch: int, tokens: int) -> float:
    prompt = list(range(1, 33))
    grammar = grammars_of_arms.get(arm)
    constrained = grammar is not None
    sampling, processing = SamplingParams(1.0), ARMS[arm]
    matchers = [grammars.matcher(grammar) if constrained else None for _ in range(batch)]
    handles = [
        engine.submit(prompt, tokens, sampling, seed, (), (), processing, matcher)
        for seed, matcher in enumerate(matchers)
    ]
    outputs = [handle.result() for handle in handles]
    assert all(len(ids) == tokens for ids in outputs), [len(ids) for ids in outputs]
    if constrained:
        for ids in outputs:  # every token inside the grammar
            check = grammars.matcher(grammar)
            for token in ids:
                check.accept(token)
            assert not check.broken, "a constrained answer left its grammar"
    stats = [handle.stats for handle in handles]
    seconds = max(s.finished_at for s in stats) - max(s.first_token_at for s in stats)
    return sum(s.completion_tokens - 1 for s in stats) / seconds


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--batch", default="1,32")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    engine = load_random(args.preset, device=args.device)
    engine.warm_up(max(batches), 32 + args.tokens + 2)
    tokenizer = big_tokenizer(min(150_000, engine.config.vocab_size))
    grammars = Grammars(tokenizer, engine.config.vocab_size, [tokenizer.token_to_id(EOS_TOKEN)])
    tools = [(t["function"]["name"], t["function"]["parameters"]) for t in tool_schemas()]
    grammar = {
        "json_schema": grammars.json_schema(SCHEMA),
        "tool_calls": grammars.lark(text_with_calls(HERMES, tools, specials=grammars.specials)),
    }
    for batch in batches:
        for arm in ARMS:  # the choice graphs of every arm captured outside the timing
            decode_rate(engine, grammars, grammar, arm, batch, 8)
        rates: dict[str, list[float]] = {arm: [] for arm in ARMS}
        masks: dict[str, list[float]] = {arm: [] for arm in ARMS}
        for _ in range(args.rounds):
            for arm in ARMS:
                MASK_SECONDS.clear()
                rates[arm].append(decode_rate(engine, grammars, grammar, arm, batch, args.tokens))
                masks[arm] += MASK_SECONDS
        free = statistics.median(rates["free"])
        for arm, values in rates.items():
            rate = statistics.median(values)
            row = {"batch": batch, "arm": arm, "tokens_per_second": round(rate, 1), "ratio_to_free": rate / free}
            row["step_ms"] = 1000 * batch / rate
            row["mask_ms"] = 1000 * statistics.median(masks[arm]) if masks[arm] else 0.0
            print(json.dumps({**row, "rounds": [round(v, 1) for v in values]}), flush=True)
    engine.shutdown()
