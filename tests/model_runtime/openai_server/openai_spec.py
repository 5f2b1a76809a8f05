"""Responses, stream chunks and errors checked against OpenAI's published OpenAPI spec (openai/openai-openapi,
openapi.json at f85dbe2, info.version 2.3.0, MIT licence), not our own models: the fixture keeps the schemas the
four answers reach (tests/fixtures/openai/openapi_2.3.0_chat_completions.json, descriptions dropped).

OpenAPI 3.1 schemas are JSON Schema 2020-12 but for two things: a `$ref` names `#/components/schemas/NAME`, so
each is pointed at `#/$defs/NAME` of one document holding them all; and a few schemas still carry OpenAPI 3.0's
`nullable: true` (the stream chunk's `finish_reason`, `usage`, `logprobs`), which JSON Schema ignores, so each
becomes `anyOf: [the schema, null]`. The spec leaves objects open (extensions such as vLLM's `reasoning_content`
or `token_ids` are allowed), and so does this.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SPEC_FILE = Path(__file__).resolve().parents[2] / "fixtures" / "openai" / "openapi_2.3.0_chat_completions.json"
COMPONENTS = "#/components/schemas/"


@cache
def spec() -> dict[str, Any]:
    return json.loads(SPEC_FILE.read_text())


def request_parameters(endpoint: str) -> list[str]:
    """Every parameter OpenAI's spec defines for "chat" or "completions" requests."""
    return spec()["request_parameters"][endpoint]


def json_schema(openapi: Any) -> Any:
    """An OpenAPI 3.1 schema as plain JSON Schema 2020-12: component refs pointed at $defs, nullable as null."""
    if isinstance(openapi, dict):
        converted = {
            key: "#/$defs/" + value.removeprefix(COMPONENTS) if key == "$ref" else json_schema(value)
            for key, value in openapi.items()
            if key != "nullable"
        }
        return {"anyOf": [converted, {"type": "null"}]} if openapi.get("nullable") is True else converted
    if isinstance(openapi, list):
        return [json_schema(item) for item in openapi]
    return openapi


# The spec has no schema of its own for streamed completions: OpenAI streams CreateCompletionResponse objects whose
# choices' finish_reason is null until the last, and whose usage is null but in the last chunk when usage is asked
# for (as in its chat chunks), neither of which CreateCompletionResponse allows. This name is that schema with the
# two nullable, as CreateChatCompletionStreamResponse has them.
COMPLETION_CHUNK = "CreateCompletionResponse (stream chunk)"
# With `echo` and `logprobs`, the prompt's first token has no logprob (nothing comes before it): OpenAI's legacy
# completions and vLLM (CompletionLogProbs: `list[float | None]`, `list[dict[str, float] | None]`) send null at that
# position, which the spec's `token_logprobs` and `top_logprobs` items do not allow. These names are the two
# completion schemas with those items nullable.
ECHOED = " (echo with logprobs)"


@cache
def _validator(name: str) -> Draft202012Validator:
    definitions = json_schema(spec()["schemas"])
    base = name.removesuffix(ECHOED)
    if base == COMPLETION_CHUNK:
        chunk = copy.deepcopy(definitions["CreateCompletionResponse"])
        choice = chunk["properties"]["choices"]["items"]["properties"]
        choice["finish_reason"] = {"anyOf": [choice["finish_reason"], {"type": "null"}]}
        chunk["properties"]["usage"] = {"anyOf": [chunk["properties"]["usage"], {"type": "null"}]}
        definitions[base] = chunk
    if name != base:
        echoed = copy.deepcopy(definitions[base])
        [logprobs, _] = echoed["properties"]["choices"]["items"]["properties"]["logprobs"]["anyOf"]
        for key in ("token_logprobs", "top_logprobs"):
            items = logprobs["properties"][key]["items"]
            logprobs["properties"][key]["items"] = {"anyOf": [items, {"type": "null"}]}
        definitions[name] = echoed
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": definitions})


def assert_conforms(instance: dict[str, Any], name: str) -> None:
    """AssertionError naming every place `instance` breaks the spec's schema `name` (CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse, CreateCompletionResponse, COMPLETION_CHUNK or ErrorResponse; either
    completion schema + ECHOED)."""
    errors = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]
    assert not problems, f"not a valid {name}:\n" + "\n".join(problems)
