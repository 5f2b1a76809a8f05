"""Speculative decoding end to end through the serving engine: one request at a time (batch 1), the same prompts with
speculation off, `suffix` and `ngram`, greedy; wall tok/s from submission to the last token, verify steps and the
tokens each committed, and whether the tokens are plain decoding's (they must be).

The prompts ask the model to copy a source file of this package (the answer repeats text it has seen: the file's,
or its own when it loops, as the built-in model does) and, as free text, to describe one. On the built-in model by
default (CPU figures unless --device says otherwise):

    python -m warpcode.bench.speculative_engine                           # the built-in model, on the CPU
    python -m warpcode.bench.speculative_engine --model DIR --device cuda --new-tokens 512
"""

from __future__ import annotations

import argparse
import inspect
import time

from warpcode.model_runtime import load
from warpcode.model_runtime.builtin_model import model_directory
from warpcode.model_runtime.chat.messages import Message
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.serving.request import tokens_per_verify_step
from warpcode.model_runtime.speculative import MODES, SpeculativeConfig, drafter, policy

QUESTIONS = {
    "copy": "Copy this file exactly into copy.py:\n\n{source}",
    "free": "In a few sentences, what is this file for?\n\n{source}",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="builtin", help="checkpoint directory, or builtin (default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--new-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    sources = [inspect.getsource(module)[:2000] for module in (drafter, policy)]
    print(f"{'prompt':<8} {'mode':<7} {'tokens':>6} {'tok/s':>7} {'speed-up':>8} {'verify steps':>12} "
          f"{'accepted/drafted':>16} {'tok/step':>8}  same as off")  # fmt: skip
    for kind, question in QUESTIONS.items():
        reference, baseline = None, None
        for mode in MODES:
            engine = load(model_directory(args.model), device=args.device, show_progress=False,
                          speculative=SpeculativeConfig(mode))  # fmt: skip
            engine.generate(engine.tokenizer.encode("warm up"), 4)  # starts the engine thread, compiles nothing
            tokens, seconds, stats = [], 0.0, []
            for source in sources:
                messages = [Message(role="user", content=question.format(source=source))]
                prompt = conversation_prompt_ids(engine.tokenizer, messages, [])
                start = time.perf_counter()
                handle = engine.submit(prompt, args.new_tokens, stop_token_ids=[])
                tokens.append(handle.result())
                seconds += time.perf_counter() - start
                stats.append(handle.stats)
            engine.shutdown()
            count = sum(len(t) for t in tokens)
            rate = count / seconds
            reference, baseline = (tokens, rate) if mode == "off" else (reference, baseline)
            steps = sum(s.verify_steps for s in stats)
            accepted, drafted = sum(s.accepted_tokens for s in stats), sum(s.draft_tokens for s in stats)
            per_step = f"{tokens_per_verify_step(accepted, steps):.2f}" if steps else "-"
            print(f"{kind:<8} {mode:<7} {count:>6} {rate:>7.1f} {rate / baseline:>7.2f}x {steps:>12} "
                  f"{f'{accepted}/{drafted}':>16} {per_step:>8}  {tokens == reference}")  # fmt: skip


if __name__ == "__main__":
    main()
