"""Structured generation on the GPU (graphs, two steps in flight without a grammar): every json_schema answer
validates, and decode tok/s with and without a schema at batch 1 and 32, same requests (random weights).

Run: python experiments/grammar_gpu_cost.py [--preset qwen3-30b-a3b] (on the GPU machine)."""

from __future__ import annotations

import argparse
import json
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from warpcode.model_runtime import load_random
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.grammar import Grammars

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
        "n": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": ["name", "tags", "n"],
    "additionalProperties": False,
}
CORPUS = ["def add(a, b):\n    return a + b\n", "the quick brown fox jumps over the lazy dog", '{"name": "x", "n": 1}']


def tokenizer() -> Tokenizer:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    bpe.train_from_iterator(CORPUS, trainer)
    return bpe


def valid(text: str) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    return set(value) == {"name", "tags", "n"}


def run(engine, grammars, bpe, batch: int, constrained: bool, tokens: int) -> tuple[float, int, list[str]]:
    prompt = list(range(1, 33))
    start = time.perf_counter()
    schema = grammars.json_schema(SCHEMA)
    handles = [
        engine.submit(
            prompt, tokens, SamplingParams(1.0), seed, (), (), grammar=grammars.matcher(schema) if constrained else None
        )
        for seed in range(batch)
    ]
    outputs = [h.result() for h in handles]
    elapsed = time.perf_counter() - start
    count = sum(map(len, outputs))
    texts = [bpe.decode(ids) for ids in outputs] if constrained else []
    return count / elapsed, count, texts


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    bpe = tokenizer()
    engine = load_random(args.preset, device=args.device)

    grammars = Grammars(bpe, engine.config.vocab_size, [bpe.token_to_id("<|im_end|>")])
    for batch in (1, 32):
        run(engine, grammars, bpe, batch, False, 16)  # graphs captured outside the timing
        run(engine, grammars, bpe, batch, True, 16)
        free_rate, free_count, _ = run(engine, grammars, bpe, batch, False, 64)
        rate, count, texts = run(engine, grammars, bpe, batch, True, 64)
        good = sum(map(valid, texts))
        print(
            f"batch {batch}: free {free_rate:.0f} tok/s ({free_count} tokens), json_schema {rate:.0f} tok/s "
            f"({count} tokens; {good}/{len(texts)} valid); sample {texts[0]!r}",
            flush=True,
        )
    engine.shutdown()
