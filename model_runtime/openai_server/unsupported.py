"""OpenAI request parameters this server does not build, refused with a 400 naming them instead of ignored: a
client asking for a suffix, audio or a reasoning effort would otherwise get an answer without it and could not tell.

Each entry: what the parameter asks for, and when a value asks for nothing this server does not do anyway (null,
or the default: `modalities: ["text"]`, `best_of` equal to n). Parameters that change nothing in the answer
(`user`, `metadata`, `store`, `service_tier`, `prompt_cache_key`, ...) are accepted and ignored, as vLLM does.
Parameters with a field of their own in schemas.py are not here: pydantic checks those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from warpcode.model_runtime.openai_server.errors import ApiError
from warpcode.model_runtime.openai_server.schemas import Sampling

Inert = Callable[[Any, Sampling], bool]  # (value, request) -> the value asks for nothing more than the default


def _null(value: Any, request: Sampling) -> bool:
    return value is None


def _text_only(value: Any, request: Sampling) -> bool:
    return value is None or value == ["text"]


def _one_sample_per_choice(value: Any, request: Sampling) -> bool:
    return value is None or value == request.n  # best_of n of n: every sample is returned, nothing is picked


CHAT_REFUSALS: dict[str, tuple[str, Inert]] = {
    "audio": ("audio output", _null),
    "modalities": ('output modalities other than ["text"]', _text_only),
    "prediction": ("predicted outputs", _null),
    "web_search_options": ("web search", _null),
    "functions": ("the deprecated functions (send them as tools)", _null),
    "function_call": ("the deprecated function_call (use tool_choice)", _null),
    "reasoning_effort": ("a reasoning effort (use chat_template_kwargs, e.g. enable_thinking)", _null),
    "verbosity": ("a verbosity level", _null),
    "moderation": ("moderation", _null),
    "prompt_cache_options": ("prompt cache options (the prefix cache is automatic)", _null),
}
COMPLETION_REFUSALS: dict[str, tuple[str, Inert]] = {
    "suffix": ("a suffix (insertion)", _null),
    "best_of": ("best_of other than n (picking the best of more samples)", _one_sample_per_choice),
}


def refuse_unbuilt(request: Sampling, refusals: dict[str, tuple[str, Inert]]) -> None:
    """A 400 naming the first parameter of the request this server does not build (in the spec's order)."""
    extra = request.model_extra or {}
    for name, (what, inert) in refusals.items():
        if name in extra and not inert(extra[name], request):
            raise ApiError(
                400,
                f"{name}: this server does not support {what}; leave it out of the request",
                name,
                "unsupported_parameter",
            )
