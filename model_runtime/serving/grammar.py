"""Structured generation: a request's grammar as a token mask before each sample (llguidance).

A `Grammars` holds the tokenizer's token trie (built once, about a second on a 150K vocabulary) and compiles
JSON schemas and Lark grammars; a `GrammarMatcher` is one request's state: the mask of tokens that keep the output
inside the grammar, advanced by each accepted token. Once the grammar is complete the mask holds only the
end-of-sequence ids, so a constrained answer always ends by itself.

llguidance was picked over xgrammar (experiments/grammar_mask_cost.py): xgrammar's masks are faster on the CPU
(about 2-5 us a token against 16-37 us, from its precomputed token cache), but both are far below a decode step;
llguidance has no dependencies (xgrammar pulls transformers, triton and a TVM runtime into the serving path),
takes our tokenizer.json as it is, and compiles Lark grammars with JSON schemas inside them (%json), which is
what a tool call in a template's own format needs.
"""

from __future__ import annotations

from typing import Any

import llguidance
import numpy as np
from tokenizers import Tokenizer as FastTokenizer

from warpcode.model_runtime.chat.toolcall_grammars import JSON_OPTIONS, special_markers


class GrammarError(ValueError):
    """A schema or grammar llguidance cannot compile; its message says what is wrong."""


def mask_words(vocab_size: int) -> int:
    """32-bit words of one row's mask (bit t of word t // 32: token t allowed)."""
    return (vocab_size + 31) // 32


_EXECUTOR: llguidance.LLExecutor | None = None  # llguidance's thread pool, shared by every engine


def fill_masks(grammars: list[tuple[int, GrammarMatcher]], masks: np.ndarray) -> None:
    """Writes each (row, grammar)'s next tokens into masks[row] (int32 [rows, mask_words]), the rows in parallel on
    llguidance's threads (without the GIL)."""
    global _EXECUTOR
    healthy = []
    for row, grammar in grammars:
        if grammar.broken:
            grammar.fill(masks[row])
        else:
            healthy.append((grammar._matcher, row))
    if len(healthy) == 1:
        matcher, row = healthy[0]
        matcher.unsafe_compute_mask_ptr(masks[row].ctypes.data, masks[row].nbytes)
    elif healthy:
        if _EXECUTOR is None:
            _EXECUTOR = llguidance.LLExecutor()
        _EXECUTOR.unsafe_compute_mask_ptr(healthy, masks.ctypes.data, masks[0].nbytes, len(masks))


class GrammarMatcher:
    """One request's grammar state: `fill` its next mask, `accept` each sampled token."""

    def __init__(self, matcher: llguidance.LLMatcher, eos_ids: list[int]) -> None:
        self._matcher, self._eos_ids = matcher, eos_ids

    @property
    def broken(self) -> bool:
        """Took a token outside the grammar (masked sampling never gives one): only the end may follow."""
        return self._matcher.is_error()

    def fill(self, words: np.ndarray) -> None:
        """Writes the allowed tokens into `words` (int32 [mask_words], contiguous)."""
        if self.broken:
            words[:] = 0
            bits = words.view(np.uint32)
            for eos in self._eos_ids:
                bits[eos // 32] |= np.uint32(1 << (eos % 32))
            return
        self._matcher.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)

    def copy(self) -> GrammarMatcher:
        """A matcher in this one's state over the same compiled grammar (llguidance's deep_copy compiles nothing):
        one for each choice of a request, each then advanced by its own tokens."""
        return GrammarMatcher(self._matcher.deep_copy(), self._eos_ids)

    def accept(self, token: int) -> None:
        self._matcher.consume_token(token)

    @property
    def finished(self) -> bool:
        """True once nothing but the end of the answer can follow (the grammar is complete, or broken)."""
        return self._matcher.is_stopped()


class Grammars:
    """Compiles grammars over one tokenizer and vocabulary (the model's, which may be larger than the tokenizer's:
    the padding ids are never allowed)."""

    def __init__(self, tokenizer: FastTokenizer, vocab_size: int, eos_ids: list[int]) -> None:
        self.vocab_size, self.eos_ids = vocab_size, list(eos_ids)
        self._tokenizer = llguidance.LLTokenizer(tokenizer.to_str(), n_vocab=vocab_size, eos_token=self.eos_ids)

        def special(text: str) -> bool:
            token = tokenizer.token_to_id(text)
            return token is not None and self._tokenizer.is_special_token(token)

        # the tool-call and reasoning markers the tokenizer holds as special tokens (Qwen's <tool_call>, <think>)
        self.specials = special_markers(special)

    @staticmethod
    def json_schema(schema: dict[str, Any]) -> str:
        """The grammar of JSON documents valid against `schema` (compact, strict about unknown properties only
        where the schema says additionalProperties: false)."""
        try:
            return llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=JSON_OPTIONS)
        except ValueError as exc:
            raise GrammarError(f"the JSON schema cannot be compiled: {exc}") from None

    @staticmethod
    def lark(text: str) -> str:
        return llguidance.LLMatcher.grammar_from_lark(text)

    def check(self, grammar: str) -> None:
        """Raises GrammarError when `grammar` does not compile (an unsupported schema keyword, a bad regex)."""
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self._tokenizer)
        if is_error:
            raise GrammarError(messages[0])

    def matcher(self, grammar: str) -> GrammarMatcher:
        matcher = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarError(matcher.get_error())
        return GrammarMatcher(matcher, self.eos_ids)
