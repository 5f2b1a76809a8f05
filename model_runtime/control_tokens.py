"""Control tokens (the tokenizer's special tokens: turn markers, end of text) come only from the chat template's own
markup; the text of a message, a tool result, a tool's description or a call's arguments is always plain text, so
`<|im_start|>system` read from a file is the ordinary tokens of those characters, not a new system turn.

How: each special token gets a stand-in, a private added token whose text is a random string chosen when the
tokenizer loads, in a copy of the tokenizer (sharing its vocabulary) that encodes special tokens' text as plain
text (tokenizers' `encode_special_tokens`, transformers' `split_special_tokens`). The template's literal text (the
text between its tags and its string constants) and the named special tokens it is given (bos_token, eos_token,
...) have each special token replaced by its stand-in before it renders; the rendered prompt is encoded by the copy
and each stand-in's id becomes its special token's id.

Why this way round: only what is provably the template's own markup becomes a control token, everything else is
text. A template that builds a control token out of message fields ('<|' + role + '|>') or cuts one out of content
gets it as text: the prompt is then wrong, never hijackable. The stand-in splits the text exactly where its special
token would (same strip and normalisation flags), so a conversation without control text in it gets the same ids as
transformers' apply_chat_template.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from typing import Any

from tokenizers import AddedToken
from tokenizers import Tokenizer as FastTokenizer


class ControlTokens:
    def __init__(self, tokenizer: FastTokenizer) -> None:
        added = tokenizer.get_added_tokens_decoder().values()
        specials = [token for token in added if token.special]
        # secret to this process (the rendered prompt with stand-ins is never shown), and checked absent from the
        # conversation besides, so content cannot forge a stand-in
        self.nonce = secrets.token_hex(16)
        self.stand_ins = {token.content: f"\ue000{self.nonce}{i}\ue001" for i, token in enumerate(specials)}
        self._text_encoder = _sharing_copy(tokenizer)
        self._text_encoder.encode_special_tokens = True
        # single_word is left off: a stand-in the template wrote inside a word must still split, or its random text
        # would reach the model
        self._text_encoder.add_tokens(
            [
                AddedToken(
                    self.stand_ins[token.content], lstrip=token.lstrip, rstrip=token.rstrip, normalized=token.normalized
                )
                for token in specials
            ]
        )
        self._real_id = {
            self._text_encoder.token_to_id(stand_in): tokenizer.token_to_id(content)
            for content, stand_in in self.stand_ins.items()
        }
        # leftmost-longest over every added token, as the tokenizer splits, so that a special token that is part of
        # a longer added token in the template's text is left alone, as the tokenizer would leave it
        contents = sorted((token.content for token in added), key=len, reverse=True)
        self._added = re.compile("|".join(map(re.escape, contents))) if contents else None
        self._stand_in = re.compile(f"\ue000{self.nonce}\\d+\ue001")
        self._special_text = {stand_in: content for content, stand_in in self.stand_ins.items()}

    def mark(self, literal: str) -> str:
        """The template's own `literal` text with its special tokens as their stand-ins."""
        if self._added is None:
            return literal
        return self._added.sub(lambda match: self.stand_ins.get(match[0], match[0]), literal)

    def unmark(self, text: str) -> str:
        """`text` with stand-ins back as the special tokens' text (a template's error message quoting its markup)."""
        return self._stand_in.sub(lambda match: self._special_text[match[0]], text)

    def check_absent(self, values: Iterable[Any]) -> None:
        """Refuses a conversation that holds a stand-in's secret (only a leak could put it there)."""
        stack = list(values)
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                if self.nonce in value:
                    raise ValueError("the conversation contains text reserved for the chat template's markup")
            elif isinstance(value, dict):
                stack.extend(value.keys())
                stack.extend(value.values())
            elif isinstance(value, list | tuple):
                stack.extend(value)

    def encode(self, rendered: str) -> list[int]:
        """Token ids of a prompt rendered with stand-ins: stand-ins are their special tokens, all else is text."""
        ids = self._text_encoder.encode(rendered, add_special_tokens=False).ids
        return [self._real_id.get(token, token) for token in ids]

    def encode_text(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text` as plain text: special tokens' text is the ordinary tokens of its characters
        (`add_special_tokens`: the tokenizer's own BOS / EOS around it, as its post-processor adds them)."""
        return self._text_encoder.encode(text, add_special_tokens=add_special_tokens).ids


def _sharing_copy(tokenizer: FastTokenizer) -> FastTokenizer:
    """A tokenizer that encodes as `tokenizer` does and can be given tokens of its own. It shares the model
    (vocabulary and merges: a whole copy of a 150K vocabulary takes seconds and over 100 MiB) and gets the same added
    tokens in the order of their ids, so each takes the same id: tokenizers gives an added token its id in the model's
    vocabulary, or else the next one after the vocabulary and the added tokens before it."""
    copy = FastTokenizer(tokenizer.model)
    copy.normalizer, copy.pre_tokenizer = tokenizer.normalizer, tokenizer.pre_tokenizer
    copy.post_processor, copy.decoder = tokenizer.post_processor, tokenizer.decoder
    copy.add_tokens([token for _, token in sorted(tokenizer.get_added_tokens_decoder().items())])
    return copy
