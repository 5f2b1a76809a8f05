"""Completions' `echo`: each prompt's text comes back before the generated text of each of its choices (and, with
`logprobs`, the prompt's tokens' logprobs before the generated ones', the first token's null: nothing comes before
it)."""

from __future__ import annotations

from typing import Any

from warpcode.model_runtime.openai_server.logprobs import TokenText
from warpcode.model_runtime.openai_server.schemas import CompletionRequest


class Echo:
    """What one prompt's choices start with: nothing without `echo`."""

    def __init__(self, request: CompletionRequest, prompt: str | list[int], prompt_ids: list[int], tokenizer: Any):
        self.token_text = TokenText(tokenizer)
        self.prompt_ids = prompt_ids if request.echo else []
        self.text = ""
        if request.echo:  # the prompt as sent; token ids as their text (none without a tokenizer)
            if isinstance(prompt, str):
                self.text = prompt
            elif tokenizer is not None:
                self.text = tokenizer.decode(prompt_ids)
