"""One request inside the engine: its tokens, what of them the KV cache holds, its blocks and its stop rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.grammar import GrammarMatcher
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, LogitsProcessing
from warpcode.model_runtime.serving.request import FinishReason, RequestHandle
from warpcode.model_runtime.serving.token_logprobs import TokenLogprob
from warpcode.model_runtime.speculative import Speculator


@dataclass(eq=False)  # one object per request: compared by identity
class Sequence:
    handle: RequestHandle
    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingParams
    seed: int
    stop_token_ids: frozenset[int]
    stop_string_seen: Callable[[int], bool] | None  # token id -> True once the text holds a stop string
    processing: LogitsProcessing = NO_PROCESSING
    grammar: GrammarMatcher | None = None  # structured generation: the tokens each step may sample
    speculator: Speculator | None = None  # its drafter and draft policy; None: it never speculates
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)  # one per output id, when the request asked
    computed: int = 0  # leading tokens whose keys and values are in the cache
    block_table: list[int] = field(default_factory=list)
    block_keys: list[int] = field(default_factory=list)  # prefix keys of the leading registered blocks
    registered: int = 0  # leading blocks registered for prefix caching
    in_flight: int = 0  # decode steps launched for it whose tokens are not read yet
    finish_reason: FinishReason | None = None
    delivered: int = 0  # output ids already handed to the handle
    suspect: bool = False  # was computing when an iteration failed: runs alone until it gets past that

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    def tokens(self, start: int, end: int) -> list[int]:
        """token_ids[start:end] without joining the whole prompt and output first (prompts run to 40K tokens)."""
        prompt = len(self.prompt_ids)
        if end <= prompt:
            return self.prompt_ids[start:end]
        return self.prompt_ids[start:] + self.output_ids[max(start - prompt, 0) : end - prompt]

    @property
    def last_token(self) -> int:
        return self.output_ids[-1] if self.output_ids else self.prompt_ids[-1]

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def pending(self) -> int:
        """Tokens whose keys and values are not in the cache yet. One: the decode step's input (the last token);
        more: a prompt, or a preempted sequence, to prefill first."""
        return self.length - self.computed

    def append(self, token: int, logprob: TokenLogprob | None = None) -> None:
        """Records a sampled token (and its logprob, when the request asked) and decides whether the sequence is
        done."""
        self.output_ids.append(token)
        if (top := self.processing.logprobs) is not None and logprob is not None:
            self.logprobs.append(TokenLogprob(logprob.token_id, logprob.logprob, logprob.top[:top]))
        if self.grammar is not None:
            self.grammar.accept(token)
        if token in self.stop_token_ids or (self.stop_string_seen is not None and self.stop_string_seen(token)):
            self.finish_reason = "stop"
        elif self.grammar is not None and self.grammar.finished:
            self.finish_reason = "stop"  # nothing but the end can follow (ignore_eos does not apply)
        elif len(self.output_ids) >= self.max_new_tokens:
            self.finish_reason = "length"
