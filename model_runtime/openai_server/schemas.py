"""Request bodies of /v1/completions and /v1/chat/completions (pydantic v2).

Strict types, as OpenAI checks them: `"max_tokens": "8"` is a 400, not an 8. Every number the engine uses is
checked against what it can hold (a 64-bit seed, finite floats), and stop strings are bounded, so no request reaches
the engine with a value it cannot serve. Fields that change nothing here (`user`, `metadata`, ...) are accepted, so
stock clients work unchanged; those that would change the answer and are not built get a 400 naming them
(unsupported.py reads them from the body's extra fields). Sampling follows OpenAI's defaults (temperature 1, top_p 1);
temperature 0 is greedy.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    field_validator,
    model_validator,
)

from warpcode.model_runtime.serving.logits_processors import (
    MAX_BIAS,
    MAX_PENALTY,
    MAX_REPETITION_PENALTY,
    LogitsProcessing,
)
from warpcode.model_runtime.serving.token_logprobs import MAX_TOP_LOGPROBS

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT32_MAX = 3.4e38  # the engine holds temperatures in fp32
MAX_STOP_STRINGS = 32
MAX_STOP_LENGTH = 1024  # characters; a stop marker, not a document
MAX_CHOICES = 128  # OpenAI's bound on n
MAX_COMPLETION_LOGPROBS = 5  # OpenAI's limit for /v1/completions' logprobs
Penalty = Annotated[float, Field(ge=-MAX_PENALTY, le=MAX_PENALTY, allow_inf_nan=False)]
Bias = Annotated[float, Field(ge=-MAX_BIAS, le=MAX_BIAS, allow_inf_nan=False)]
RENDERED_BY_THE_SERVER = frozenset({"messages", "tools", "documents", "add_generation_prompt", "mark_literal"})


def either(description: str) -> WrapValidator:
    """One error for a union field, at the field itself (`prompt: must be ...`), instead of one per member under
    pydantic's own tags (`prompt.str`, `prompt.list[int]`)."""

    def validate(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise ValueError(f"must be {description}") from None

    return WrapValidator(validate)


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class _Request(_Body):
    # unknown top-level fields are kept, for unsupported.py to refuse those that would change the answer
    model_config = ConfigDict(extra="allow")


class StreamOptions(_Body):
    include_usage: bool = False


class JsonSchemaFormat(_Body):
    name: str
    description: str | None = None
    json_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None  # the output always follows the schema (as vLLM): strict or not


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError('type "json_schema" needs "json_schema": {"name": ..., "schema": {...}}')
        return self


class Sampling(_Request):
    """What both endpoints share: the model, limits, sampling and streaming."""

    model: str | None = None  # optional, as in vLLM: the one served model
    max_tokens: int | None = Field(None, gt=0)  # default: whatever room the context leaves
    temperature: float = Field(1.0, ge=0, le=FLOAT32_MAX, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0, le=1, allow_inf_nan=False)
    top_k: int = Field(0, ge=-1, le=INT64_MAX)  # 0 or -1 (vLLM's spelling): off; past the vocabulary: off too
    min_p: float = Field(0.0, ge=0, le=1, allow_inf_nan=False)
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stop: Annotated[str | list[str] | None, either("a string or a list of strings")] = None
    n: int = Field(1, ge=1, le=MAX_CHOICES)  # choices per prompt, each its own seed (choices.py)
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = False  # each choice also carries the generated token ids
    ignore_eos: bool = False  # vLLM's extension: generate max_tokens whatever the model ends with (benchmarks)
    # subtracted from a token's logit: presence once it was generated, frequency times the times it was
    presence_penalty: Penalty = 0.0
    frequency_penalty: Penalty = 0.0
    # vLLM's extension: a token already in the prompt or the output has its logit divided by it (multiplied if < 0)
    repetition_penalty: float = Field(1.0, gt=0, le=MAX_REPETITION_PENALTY, allow_inf_nan=False)
    logit_bias: dict[str, Bias] | None = None  # {"token id": bias}, added to the logits before sampling
    response_format: ResponseFormat | None = None  # json_object / json_schema: structured generation

    @field_validator("logit_bias")
    @classmethod
    def _token_ids(cls, bias: dict[str, float] | None) -> dict[str, float] | None:
        for key in bias or {}:
            if not key.strip().lstrip("-").isdigit():
                raise ValueError(f"keys must be token ids (integers, as strings), got {key!r}")
        return bias

    @field_validator("stop")
    @classmethod
    def _bounded_stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        stops = [stop] if isinstance(stop, str) else stop or []
        if len(stops) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings, got {len(stops)}")
        if (longest := max(map(len, stops), default=0)) > MAX_STOP_LENGTH:
            raise ValueError(f"a stop string may be at most {MAX_STOP_LENGTH} characters, got one of {longest}")
        return stop

    @field_validator(
        "temperature",
        "top_p",
        "min_p",
        "top_k",
        "n",
        "stream",
        "return_token_ids",
        "ignore_eos",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        mode="before",
    )
    @classmethod
    def _null_is_default(cls, value: Any, info) -> Any:
        # clients send explicit nulls for "the default"
        return cls.model_fields[info.field_name].default if value is None else value

    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [stop for stop in stops if stop]

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def processing(self) -> LogitsProcessing:
        """What the request changes in the logits, and the logprobs it wants reported."""
        bias = tuple((int(token), value) for token, value in (self.logit_bias or {}).items())
        return LogitsProcessing(
            self.presence_penalty,
            self.frequency_penalty,
            self.repetition_penalty,
            bias,
            self.token_logprobs(),
            self.prompt_logprobs(),
        )

    def token_logprobs(self) -> int | None:
        """Alternatives to report beside each generated token's logprob; None: no logprobs."""
        return None

    def prompt_logprobs(self) -> int | None:
        """The same for the prompt's tokens (completions' echo); None: none."""
        return None


class CompletionRequest(Sampling):
    # one prompt (text or token ids) or a batch of them, each answered with n choices
    prompt: Annotated[
        str | list[int] | list[str] | list[list[int]],
        either("a string, a list of token ids, or a non-empty list of strings or of token-id lists"),
    ]
    logprobs: int | None = Field(None, ge=0, le=MAX_COMPLETION_LOGPROBS)  # the legacy form: this many alternatives
    echo: bool = False  # the prompt comes back before the completion (with its logprobs, when logprobs is set)

    def prompts(self) -> list[str | list[int]]:
        """The batch: a single prompt is a batch of one; `[]` is one empty prompt (refused as empty)."""
        if isinstance(self.prompt, str) or not self.prompt or isinstance(self.prompt[0], int):
            return [self.prompt]
        return list(self.prompt)

    @field_validator("echo", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        return False if value is None else value

    def token_logprobs(self) -> int | None:
        return self.logprobs

    def prompt_logprobs(self) -> int | None:
        return self.logprobs if self.echo else None


class TextPart(_Body):
    type: Literal["text"]
    text: str


class FunctionCall(_Body):
    name: str
    arguments: Annotated[str | dict[str, Any], either("a JSON object or a string holding one")] = "{}"

    def arguments_object(self) -> dict[str, Any]:
        return self.arguments if isinstance(self.arguments, dict) else json.loads(self.arguments or "{}")

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, arguments: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(arguments, str):  # the template needs the object, so the text must hold one
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc.msg} at char {exc.pos}") from None
            if not isinstance(parsed, dict):
                raise ValueError("must be a JSON object")
        return arguments


class ToolCallIn(_Body):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Annotated[
        str | list[TextPart] | None,
        either('a string, null or a list of text parts {"type": "text", "text": ...} (no other kinds of content)'),
    ] = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    # what an assistant thought before answering (vLLM's `reasoning_content`; transformers also reads it as
    # `thinking` or `reasoning`)
    reasoning_content: str | None = None
    thinking: str | None = None
    reasoning: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, content: Any) -> Any:
        # images, audio and files are not built: say which part was refused rather than that the shape is wrong
        kinds = [part.get("type") for part in content if isinstance(part, dict)] if isinstance(content, list) else []
        if refused := sorted({kind for kind in kinds if isinstance(kind, str) and kind != "text"}):
            raise ValueError(f"{', '.join(refused)} content parts are not supported by this server: send text parts")
        return content

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""

    def thought(self) -> str | None:
        """The reasoning under whichever name it came, in transformers' order of preference."""
        return next((r for r in (self.reasoning_content, self.thinking, self.reasoning) if r is not None), None)


class FunctionDef(_Body):
    name: str
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(_Body):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: NamedFunction


class ChatCompletionRequest(Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: Annotated[
        Literal["auto", "none", "required"] | NamedToolChoice | None,
        either('"auto", "none", "required" or {"type": "function", "function": {"name": ...}}'),
    ] = None
    parallel_tool_calls: bool | None = None  # false: at most one call
    max_completion_tokens: int | None = Field(None, gt=0)  # OpenAI's newer name for max_tokens
    # the template's own options, as vLLM takes them: {"enable_thinking": false} for Qwen3
    chat_template_kwargs: dict[str, Any] | None = None
    logprobs: bool = False  # each generated token's logprob in choices[].logprobs.content
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)  # alternatives per token; needs logprobs

    @field_validator("logprobs", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_need_logprobs(cls, top: int | None, info: ValidationInfo) -> int | None:
        if top and not info.data.get("logprobs"):  # as OpenAI and vLLM
            raise ValueError("set logprobs to true to get top_logprobs")
        return top

    def token_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    @field_validator("chat_template_kwargs")
    @classmethod
    def _not_what_the_server_renders(cls, kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
        if taken := sorted(set(kwargs or {}) & RENDERED_BY_THE_SERVER):
            raise ValueError(f"{', '.join(taken)}: set by the server from the request, not a template option")
        return kwargs

    def completion_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens
