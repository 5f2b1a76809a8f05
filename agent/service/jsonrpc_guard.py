"""What a client's message must be before the SDK sees it: one set of JSON-RPC 2.0 rules for both transports.

`warpcode acp` (one message per stdin line) and `warpcode serve` (one per WebSocket text frame) hand every line or
frame to `decode`, which says what to do with it: hand the message on, answer it with an error in the SDK's
place, or drop it. The SDK itself assumes well-formed objects: a JSON array reaches `message.get` and kills its
receive loop (and with it every session of the editor), an unparsable line is only logged, and a method that is
not a string comes back as "method not found". The rules:

- not JSON -> -32700 (Parse error), id null;
- not one object (a batch array, a scalar) -> -32600, id null: ACP never batches, so a batch is refused whole;
- `jsonrpc` other than "2.0", a method that is not a string, an id that is not a string, integer or null, params
  that are neither object nor array, or neither a method nor a result/error -> -32600 (with the id when it is one);
- an answer to our requests (result or error) passes when well-formed and is dropped otherwise: answering an
  answer could start two peers trading errors forever;
- a notification the agent does not know is dropped quietly (JSON-RPC sends no answer to notifications; ACP's
  schema says `$/` ones may be ignored);
- `initialize` with a protocolVersion that is not an integer 0..65535 -> -32602: ACP's ProtocolVersion is a
  uint16, and the SDK's lax model would read "1.0" as 1.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from acp.meta import AGENT_METHODS

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
CANCEL_REQUEST = "$/cancel_request"  # ACP's protocol-level notification (request_cancel.py honours it)
KNOWN_NOTIFICATIONS = {AGENT_METHODS["session_cancel"], CANCEL_REQUEST}  # and the extensions, "_..."
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """What to do with one received line or frame: hand `message` on, send `answer` back, or (both None) drop it."""

    message: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None


DROP = Verdict()


def decode(text: str | bytes) -> Verdict:
    try:
        value = json.loads(text, parse_constant=_not_json)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return _refuse(None, PARSE_ERROR, f"Parse error: {error}. Send one JSON-RPC 2.0 object per message.")
    return check(value)


def check(value: Any) -> Verdict:
    """The verdict on one decoded message."""
    if not isinstance(value, dict):
        what = "a batch (array)" if isinstance(value, list) else f"a JSON {type(value).__name__}"
        return _refuse(None, INVALID_REQUEST, f"Invalid Request: got {what}; send one JSON-RPC 2.0 object per message.")
    has_id = "id" in value
    id_ok = not has_id or _valid_id(value["id"])
    reply_id = value["id"] if has_id and id_ok else None
    if "method" not in value and ("result" in value or "error" in value):
        if value.get("jsonrpc") == "2.0" and has_id and id_ok and ("result" in value) != ("error" in value):
            return Verdict(message=value)
        log.warning("dropped a malformed answer from the client (id %r)", value.get("id"))
        return DROP
    if value.get("jsonrpc") != "2.0":
        return _refuse(reply_id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0".')
    if not id_ok:
        return _refuse(None, INVALID_REQUEST, "Invalid Request: the id must be a string, an integer or null.")
    if "method" not in value:
        return _refuse(reply_id, INVALID_REQUEST, "Invalid Request: a message needs a method, or a result or error.")
    method = value["method"]
    if not isinstance(method, str):
        return _refuse(reply_id, INVALID_REQUEST, "Invalid Request: the method must be a string.")
    if "params" in value and not isinstance(value["params"], dict | list):
        return _refuse(reply_id, INVALID_REQUEST, "Invalid Request: params must be an object or an array.")
    if not has_id:
        if method in KNOWN_NOTIFICATIONS or method.startswith("_"):
            return Verdict(message=value)
        log.debug("ignored the unknown notification %r", method)
        return DROP
    if method == AGENT_METHODS["initialize"] and (why := _bad_protocol_version(value.get("params"))):
        return _refuse(reply_id, INVALID_PARAMS, why)
    return Verdict(message=value)


def _valid_id(request_id: Any) -> bool:
    # JSON-RPC: a string, a number (without a fraction: ACP's RequestId is an int64) or null; true is no number.
    return request_id is None or isinstance(request_id, str) or (type(request_id) is int)


def _bad_protocol_version(params: Any) -> str | None:
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    if type(version) is int and 0 <= version <= 0xFFFF:
        return None
    return f"Invalid params: protocolVersion must be an integer (ACP's major version, e.g. 1), got {version!r}."


def _refuse(request_id: Any, code: int, message: str) -> Verdict:
    return Verdict(answer={"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")
