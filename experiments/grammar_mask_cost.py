"""Per-token mask cost of llguidance and xgrammar on CPU for one JSON schema, over the tests' tiny BPE (300 tokens)
and a 150K-token byte-level vocabulary (words of the Python standard library's sources, the size of Qwen's).

Run: PYTHONPATH=/tmp/tt python experiments/grammar_mask_cost.py (the tiny tokenizer comes from tests/)."""

from __future__ import annotations

import collections
import json
import pathlib
import re
import sysconfig
import time

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from tests.model_runtime.checkpoints import EOS_TOKEN, SPECIAL, train_bpe

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
        "point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "tags", "point"],
    "additionalProperties": False,
}
ANSWER = '{"name":"the quick brown fox","tags":["a","ccc","bb"],"point":{"x":12345,"y":-7}}'


def big_tokenizer(size: int = 150_000) -> Tokenizer:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))[:3000]:
        text = path.read_text(errors="ignore")
        counts.update(re.findall(r" ?[A-Za-z_]+| ?\d{1,3}| ?[^\sA-Za-z_\d]+|\s+", text))
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_map = {b: c for b, c in zip(range(256), _bytes_to_unicode(), strict=True)}
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    for word, _ in counts.most_common():
        if len(vocab) >= size - len(SPECIAL):
            break
        vocab.setdefault("".join(byte_map[b] for b in word.encode()), len(vocab))
    for special in SPECIAL:
        vocab[special] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab, []))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIAL)
    return tokenizer


def _bytes_to_unicode() -> list[str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def answer_tokens(tokenizer: Tokenizer) -> list[int]:
    return [*tokenizer.encode(ANSWER, add_special_tokens=False).ids, tokenizer.token_to_id(EOS_TOKEN)]


def llguidance_cost(tokenizer: Tokenizer) -> tuple[float, float]:
    import llguidance
    import llguidance.numpy

    start = time.perf_counter()
    lltok = llguidance.LLTokenizer(tokenizer.to_str(), eos_token=tokenizer.token_to_id(EOS_TOKEN))
    setup = time.perf_counter() - start
    grammar = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA)
    tokens, times = answer_tokens(tokenizer), []
    mask = llguidance.numpy.allocate_token_bitmask(1, lltok.vocab_size)
    for _ in range(3):
        matcher = llguidance.LLMatcher(lltok, grammar)
        for token in tokens:
            t = time.perf_counter()
            llguidance.numpy.fill_next_token_bitmask(matcher, mask)
            assert (mask[0, token // 32] >> (token % 32)) & 1, "the answer's token is masked out"
            assert matcher.consume_token(token), matcher.get_error()
            times.append(time.perf_counter() - t)
    return setup, float(np.median(times))


def llguidance_batch_cost(tokenizer: Tokenizer, batch: int = 32) -> float:
    """One step's masks for `batch` requests at once, on llguidance's thread pool (as the engine computes them)."""
    import llguidance

    from warpcode.model_runtime.serving.grammar import fill_masks, mask_words

    lltok = llguidance.LLTokenizer(tokenizer.to_str(), eos_token=tokenizer.token_to_id(EOS_TOKEN))
    grammar = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA)
    from warpcode.model_runtime.serving.grammar import GrammarMatcher

    matchers = [GrammarMatcher(llguidance.LLMatcher(lltok, grammar), []) for _ in range(batch)]
    masks = np.full((batch, mask_words(lltok.vocab_size)), -1, dtype=np.int32)
    times = []
    for token in answer_tokens(tokenizer):
        t = time.perf_counter()
        fill_masks(list(enumerate(matchers)), masks)
        for matcher in matchers:
            matcher.accept(token)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def xgrammar_cost(tokenizer: Tokenizer) -> tuple[float, float]:
    import xgrammar
    from transformers import PreTrainedTokenizerFast

    start = time.perf_counter()
    hf = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS_TOKEN)
    info = xgrammar.TokenizerInfo.from_huggingface(
        hf, vocab_size=tokenizer.get_vocab_size(), stop_token_ids=[tokenizer.token_to_id(EOS_TOKEN)]
    )
    compiler = xgrammar.GrammarCompiler(info)
    compiled = compiler.compile_json_schema(json.dumps(SCHEMA), any_whitespace=False, separators=(",", ":"))
    setup = time.perf_counter() - start
    tokens, times = answer_tokens(tokenizer), []
    mask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    for _ in range(3):
        matcher = xgrammar.GrammarMatcher(compiled)
        for token in tokens:
            t = time.perf_counter()
            matcher.fill_next_token_bitmask(mask)
            assert matcher.accept_token(token), token
            times.append(time.perf_counter() - t)
    return setup, float(np.median(times))


if __name__ == "__main__":
    for label, tokenizer in (("tiny BPE", train_bpe()), ("150K byte-level", big_tokenizer())):
        print(f"{label}: {tokenizer.get_vocab_size()} tokens, answer {len(answer_tokens(tokenizer))} tokens")
        for name, cost in (("llguidance", llguidance_cost), ("xgrammar", xgrammar_cost)):
            setup, per_token = cost(tokenizer)
            print(f"  {name}: setup {setup * 1e3:.0f} ms, mask + advance per token {per_token * 1e6:.0f} us (median)")
        print(
            f"  llguidance, 32 requests per step (parallel): {llguidance_batch_cost(tokenizer) * 1e6:.0f} us (median)"
        )
