"""Every ACP frame checked against the published ACP schema (v1.21.0, tests/fixtures/acp/README.md), not our own models.

`validate_frame(frame, sender, request_method)` checks one JSON-RPC message as it went over the wire, either way:
a request or notification against the params type the schema gives its method (session/new -> NewSessionRequest,
session/update -> SessionNotification, ...), an answer against the result type of the method it answers (pass
the request's method: an answer does not name it) or against the schema's Error. A method the schema does not
define for that side fails; extension methods ("_...") may carry anything, as the schema says.

Strict mode (the default) also refuses properties the schema does not define. The schema leaves most objects
open, so strictness is added here: every schema in a value position (a property's value, an array's items, the
params or result itself) whose object properties are listed, and which nowhere says otherwise
(additionalProperties), gets `unevaluatedProperties: false`. Not `additionalProperties: false` on each listing:
ACP builds many types from parts (a session update is ContentChunk's properties plus its `sessionUpdate` tag,
joined by allOf), and additionalProperties sees only its own listing, so it would refuse the other part's
fields; unevaluatedProperties sees every part that applies. `_meta` is listed everywhere it is allowed.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "acp"
SCHEMA_FILE, META_FILE = FIXTURES / "schema-v1.21.0.json", FIXTURES / "meta.json"
Side = Literal["agent", "client"]
IN_PLACE = ("allOf", "anyOf", "oneOf", "then", "else", "if")  # applied to the same instance
VALUE_POSITIONS = ("items", "additionalProperties", "contains")  # applied to a value inside the instance


class FrameInvalid(AssertionError):
    """A frame the ACP schema does not allow."""


def validate_frame(frame: dict[str, Any], sender: Side, request_method: str | None = None, strict: bool = True):
    """Raise FrameInvalid unless `frame`, sent by `sender`, is what ACP 1.21 allows. For an answer, pass the
    method of the request it answers (None: an answer to a message that was no request, e.g. unparsable)."""
    receiver: Side = "client" if sender == "agent" else "agent"
    if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
        raise FrameInvalid(f"not a JSON-RPC 2.0 object: {frame!r}")
    method = frame.get("method")
    if method is not None:
        allowed = {"jsonrpc", "id", "method", "params"} if "id" in frame else {"jsonrpc", "method", "params"}
        _check_keys(frame, allowed, strict)
        if "id" in frame:
            _check("RequestId", frame["id"], strict, "id")
        if method.startswith("_"):
            return  # an extension: any params
        kind = "Request" if "id" in frame else "Notification"
        definition = _definitions(kind).get((receiver, method)) or _definitions(kind).get(("protocol", method))
        if definition is None:
            raise FrameInvalid(f"{sender} sent the {kind.lower()} {method!r}, which ACP 1.21 does not define")
        _check(definition, frame.get("params"), strict, f"{method} params")
        return
    _check_keys(frame, {"jsonrpc", "id", "result", "error"}, strict)
    if ("result" in frame) == ("error" in frame) or "id" not in frame:
        raise FrameInvalid(f"an answer needs an id and exactly one of result and error: {frame!r}")
    _check("RequestId", frame["id"], strict, "id")
    if "error" in frame:
        _check("Error", frame["error"], strict, "error")
        return
    if request_method is None:
        raise FrameInvalid(f"a result answers a request: which one? {frame!r}")
    if request_method.startswith("_"):
        return
    definition = _definitions("Response").get((sender, request_method))
    if definition is None:
        raise FrameInvalid(f"{sender} answered {request_method!r}, which ACP 1.21 does not define for it")
    _check(definition, frame["result"], strict, f"{request_method} result")


def method_types(method: str) -> list[str]:
    """The schema's types for a method: its request or notification params, and its response."""
    return sorted(name for kind in ("Request", "Response", "Notification")
                  for (_, m), name in _definitions(kind).items() if m == method)  # fmt: skip


@cache
def _document(strict: bool) -> dict[str, Any]:
    document = json.loads(SCHEMA_FILE.read_text())
    if strict:
        document = copy.deepcopy(document)
        _close_values(document, document["$defs"])
    return document


@cache
def _definitions(kind: str) -> dict[tuple[str, str], str]:
    """(the side that handles it, method) -> the name of its type, for kind Request, Response or Notification:
    the schema marks each with x-method and x-side."""
    found = {}
    for name, definition in _document(False)["$defs"].items():
        if "x-method" in definition and name.endswith(kind):
            found[(definition["x-side"], definition["x-method"])] = name
    return found


@cache
def _validator(definition: str, strict: bool) -> Draft202012Validator:
    document = _document(strict)
    root: dict[str, Any] = {"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]}
    if strict and _lists_properties(root, document["$defs"]):
        root["unevaluatedProperties"] = False
    return Draft202012Validator(root)


def _check(definition: str, value: Any, strict: bool, where: str) -> None:
    errors = sorted(_validator(definition, strict).iter_errors(value), key=lambda e: len(list(e.absolute_path)))
    if errors:
        worst = errors[0]
        path = "/".join(map(str, worst.absolute_path))
        raise FrameInvalid(f"{where} is no {definition} at /{path}: {worst.message}")


def _check_keys(frame: dict[str, Any], allowed: set[str], strict: bool) -> None:
    if strict and (extra := set(frame) - allowed):
        raise FrameInvalid(f"fields JSON-RPC does not define: {sorted(extra)}")


def _close_values(node: Any, defs: dict[str, Any]) -> None:
    """Add unevaluatedProperties: false to every value-position schema that lists properties and is not open."""
    if isinstance(node, list):
        for item in node:
            _close_values(item, defs)
        return
    if not isinstance(node, dict):
        return
    properties = node.get("properties")
    values = list(properties.values()) if isinstance(properties, dict) else []
    values += [node[key] for key in VALUE_POSITIONS if isinstance(node.get(key), dict)]
    values += node.get("prefixItems", [])
    for value in values:
        if _lists_properties(value, defs):
            value["unevaluatedProperties"] = False
    for key, child in node.items():
        _close_values(values if key == "properties" else child, defs)


def _lists_properties(schema_node: dict[str, Any], defs: dict[str, Any]) -> bool:
    """Whether the schemas applied in place to this value list object properties and none leaves it open."""
    lists, seen, todo = False, set(), [schema_node]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if "additionalProperties" in node or "unevaluatedProperties" in node or "patternProperties" in node:
            return False
        lists = lists or "properties" in node
        if isinstance(ref := node.get("$ref"), str) and ref.startswith("#/$defs/"):
            todo.append(defs[ref.removeprefix("#/$defs/")])
        for key in IN_PLACE:
            part = node.get(key)
            todo.extend(part if isinstance(part, list) else [part] if isinstance(part, dict) else [])
    return lists
