"""Token logprobs in OpenAI's two shapes: chat's `{"content": [{token, logprob, bytes, top_logprobs}]}` and
completions' legacy `{tokens, token_logprobs, top_logprobs, text_offset}` (where, as vLLM does, each position's
top_logprobs also holds the chosen token, so up to logprobs + 1 entries)."""

from __future__ import annotations

from typing import Any

from warpcode.model_runtime.serving.token_logprobs import TokenLogprob

LOWEST_LOGPROB = -9999.0  # vLLM's stand-in for -inf, which JSON cannot carry


class TokenText:
    """A token id's text as logprobs show it: its own decoding, or `token_id:N` (vLLM's form) without a tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __call__(self, token_id: int) -> str:
        if self._tokenizer is None:
            return f"token_id:{token_id}"
        return self._tokenizer.decode([token_id])


def _number(logprob: float) -> float:
    return max(logprob, LOWEST_LOGPROB)


def chat_logprobs(text: TokenText, logprobs: list[TokenLogprob]) -> dict[str, Any]:
    def entry(token_id: int, logprob: float) -> dict[str, Any]:
        token = text(token_id)
        return {"token": token, "logprob": _number(logprob), "bytes": list(token.encode())}

    content = [{**entry(lp.token_id, lp.logprob), "top_logprobs": [entry(t, v) for t, v in lp.top]} for lp in logprobs]
    return {"content": content, "refusal": None}


def completion_logprobs(text: TokenText, logprobs: list[TokenLogprob | None], ids: list[int], offset: int = 0):
    """`ids`: the tokens of `logprobs` (a None entry: the prompt's first token, which has none); `offset`: where
    the first token's text starts in the choice's text."""
    result: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token_id, lp in zip(ids, logprobs, strict=True):
        token = text(token_id)
        result["tokens"].append(token)
        result["text_offset"].append(offset)
        offset += len(token)
        if lp is None:
            result["token_logprobs"].append(None)
            result["top_logprobs"].append(None)
            continue
        result["token_logprobs"].append(_number(lp.logprob))
        top = {text(t): _number(v) for t, v in lp.top}
        top.setdefault(token, _number(lp.logprob))
        result["top_logprobs"].append(top)
    return result
