"""The bridge to the engine: a request's prompt ids, limits and sampling checked and submitted, its outputs read
(choices.py merges the choices of a request, collects them and counts their usage). A request whose client goes
away is cancelled, so its sequence and cache blocks are freed within one engine step instead of generating for
nobody."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request

from warpcode.model_runtime.openai_server.errors import ApiError, bad_request
from warpcode.model_runtime.openai_server.schemas import Sampling
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.grammar import GrammarMatcher
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, LogitsProcessing


def completion_prompt_ids(engine: Any, prompt: str | list[int]) -> list[int]:
    if isinstance(prompt, list):
        return prompt  # the engine refuses ids outside the vocabulary (a 400 below)
    if engine.tokenizer is None:
        raise bad_request(
            "this model has no tokenizer (random weights?): send the prompt as a list of token ids",
            "prompt",
            "no_tokenizer",
        )
    return engine.tokenizer.encode(prompt)


def engine_stopped(engine: Any) -> ApiError | None:
    """The 503 every request gets once the engine has stopped serving after an error; None while it serves."""
    if (failure := engine.failure) is None:
        return None
    message = f"the engine stopped serving after an error ({failure}): restart serve-model"
    return ApiError(503, message, code="engine_failed")


class Generation:
    """One request in the engine: its handle, and whether the engine has finished it."""

    def __init__(
        self,
        engine: Any,
        prompt_ids: list[int],
        request: Sampling,
        max_tokens: int | None,
        param: str,
        seed: int | None = None,
        processing: LogitsProcessing = NO_PROCESSING,
        grammar: GrammarMatcher | None = None,
    ) -> None:
        """`seed`, `processing` and `grammar`: this choice's own (choices.py derives them from the request's)."""
        if (stopped := engine_stopped(engine)) is not None:
            raise stopped
        context, length = engine.context_length, len(prompt_ids)
        if not prompt_ids:
            raise bad_request(f"{param}: the prompt is empty", param)
        wanted = context - length if max_tokens is None else max_tokens  # default: all the room the context leaves
        if length + max(wanted, 1) > context:
            needed = length + max(wanted, 1)
            raise bad_request(
                f"this model's maximum context length is {context} tokens, but the request needs {needed} ({length} "
                f"in the prompt, {needed - length} to generate): shorten the {param} or lower max_tokens",
                param,
                "context_length_exceeded",
            )
        stops = request.stop_strings()
        if stops and engine.tokenizer is None:
            raise bad_request("stop strings need the model's tokenizer, and this model has none", "stop")
        try:
            processing.check(engine.config.vocab_size)
        except ValueError as exc:  # a logit_bias id outside the vocabulary
            raise bad_request(str(exc), "logit_bias", "invalid_value") from None
        try:
            sampling = SamplingParams(request.temperature, max(request.top_k, 0), request.top_p, request.min_p)
            stop_ids = () if request.ignore_eos else None  # None: the model's end-of-sequence ids
            self.handle = engine.submit(prompt_ids, wanted, sampling, seed, stop_ids, stops, processing, grammar)
        except ValueError as exc:  # RequestRefused (ids outside the vocabulary, more than the cache holds, a seed
            # past 64 bits), SamplingParams (a value the rows cannot hold)
            raise bad_request(str(exc), param, "request_refused") from None
        self.finished = False

    async def outputs(self) -> AsyncIterator[Any]:
        """The engine's outputs; an end the server did not ask for (the engine failing or shutting down) is an
        error, a 5xx before the response starts, an error event in a stream."""
        try:
            async for out in self.handle:
                if out.finish_reason == "abort":
                    self.finished = True
                    raise ApiError(503, "the engine stopped this request before it finished", code="aborted")
                self.finished = out.finish_reason is not None
                yield out
        except RuntimeError as exc:  # the handle raises the engine thread's error
            self.finished = True
            raise ApiError(500, f"the engine failed: {exc}", code="engine_error") from exc

    def cancel(self) -> None:
        if not self.finished:
            self.handle.cancel()


class ClientGone(Exception):
    """The client disconnected before its (non-streamed) response was ready."""


async def disconnected(request: Request) -> None:
    # the body has been read, so the next ASGI message is the disconnect (uvicorn sends it when the socket closes)
    while (await request.receive())["type"] != "http.disconnect":
        pass
