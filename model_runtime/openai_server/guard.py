"""What every request passes before the API reads a byte of its body: the Host it was sent to, the browser Origin
it comes from, the API key, and then the body itself, bounded in size and in time.

A web page the user visits can send requests to localhost (and, through DNS rebinding, read the answers: its own
host name then resolves to 127.0.0.1). Browsers name the page in `Origin`, and a rebinding page's requests carry its
host name in `Host`; so a request is refused when its Origin was not allowed with --allow-origin, or when its Host
is a name other than localhost or an --allow-host (an IP address is never a rebinding, so it always passes). The
key is checked before the body is read, so a client without it cannot make the server read (or parse) anything.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from warpcode.model_runtime.openai_server.errors import ApiError

LOCAL_NAMES = frozenset({"localhost"})
MAX_JSON_DEPTH = 64  # a chat request with nested tool schemas needs about 20


@dataclass(frozen=True)
class RequestLimits:
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)  # lower-case names; "*": any
    max_body_bytes: int = 16 * 2**20
    body_timeout_s: float = 60.0  # from the end of the headers to the end of the body

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError(
                f"the largest request body must be at least 1 KiB (--max-body-mb), got {self.max_body_bytes} bytes"
            )
        if self.body_timeout_s <= 0:
            raise ValueError(f"the body's deadline must be positive, got {self.body_timeout_s} s")


class RequestGuard:
    """ASGI middleware in front of the API: refuses in OpenAI's error shape, and hands the app the body it read."""

    def __init__(self, app: Any, api_key: str | None, limits: RequestLimits) -> None:
        self.app, self.api_key, self.limits = app, api_key, limits

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_headers(scope)
            body = await self._read_body(Headers(scope=scope), receive)
        except ApiError as error:
            await JSONResponse(error.body(), status_code=error.status)(scope, receive, send)
            return
        if body is None:  # the client left while sending
            return
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()  # from here on only the disconnect, which streams watch for
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _check_headers(self, scope: dict[str, Any]) -> None:
        headers = Headers(scope=scope)
        host, origin, authorization = (_single(headers, name) for name in ("host", "origin", "authorization"))
        if host is not None and not self._host_allowed(host):
            raise ApiError(
                403,
                f"requests addressed to host {host!r} are refused (a web page reaching this server by a name of its "
                f"own): use localhost or the server's address, or start serve-model with --allow-host NAME",
                code="host_not_allowed",
            )
        if origin is not None and origin not in self.limits.allowed_origins:
            raise ApiError(
                403,
                f"requests from the browser origin {origin!r} are refused: start serve-model with --allow-origin "
                f"{origin} to accept them",
                code="origin_not_allowed",
            )
        # a CORS preflight (OPTIONS) never carries the key; the CORS middleware answers it
        if self.api_key is not None and scope["path"].startswith("/v1") and scope["method"] != "OPTIONS":
            scheme, _, given = (authorization or "").partition(" ")
            if scheme.lower() != "bearer" or not given.strip():
                raise ApiError(401, "no API key: send it as `Authorization: Bearer KEY`", code="invalid_api_key")
            if not secrets.compare_digest(given.strip().encode(), self.api_key.encode()):
                raise ApiError(401, "incorrect API key", code="invalid_api_key")

    def _host_allowed(self, host: str) -> bool:
        name = host.rpartition("]")[0].lstrip("[") if host.startswith("[") else host.partition(":")[0]
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            name = name.lower().rstrip(".")
            return name in LOCAL_NAMES or name in self.limits.allowed_hosts or "*" in self.limits.allowed_hosts

    async def _read_body(self, headers: Headers, receive: Any) -> bytes | None:
        limit = self.limits.max_body_bytes
        too_large = ApiError(
            413,
            f"the request body is over {limit / 2**20:g} MiB: send less (or start serve-model with a larger "
            "--max-body-mb)",
            code="body_too_large",
        )
        declared = _single(headers, "content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise too_large
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise ApiError(
                408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s", code="timeout"
            ) from None
        body = b"".join(chunks)
        # numpy lets go of the GIL over large arrays: in a thread, a large body is measured without stalling others
        deep = (
            await asyncio.to_thread(nested_deeper_than, body, MAX_JSON_DEPTH)
            if len(body) > 2**20
            else (nested_deeper_than(body, MAX_JSON_DEPTH))
        )
        if deep:
            raise ApiError(400, f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep", code="too_deep")
        return body


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether the JSON in `body` opens more than `limit` arrays and objects at once, found without parsing it (a
    parser recurses once a level) in a few vectorised passes: a quote counts unless an odd run of backslashes
    precedes it, brackets count outside strings, and the running count of open brackets is a cumulative sum."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    text = np.frombuffer(body, dtype=np.uint8)
    positions = np.arange(len(text), dtype=np.int32 if len(text) < 2**31 else np.int64)
    backslash = text == ord("\\")
    last_other = np.maximum.accumulate(np.where(backslash, -1, positions))  # the latest non-backslash at or before
    run_before = np.empty_like(positions)
    run_before[0], run_before[1:] = 0, positions[:-1] - last_other[:-1]  # backslashes just before each position
    quote = (text == ord('"')) & (run_before % 2 == 0)
    outside = np.cumsum(quote) % 2 == 0  # a closing quote counts as outside, an opening one as inside: no bracket
    opens = outside & ((text == ord("[")) | (text == ord("{")))
    closes = outside & ((text == ord("]")) | (text == ord("}")))
    return int(np.cumsum(opens.astype(np.int32) - closes).max(initial=0)) > limit


def _single(headers: Headers, name: str) -> str | None:
    """A header that must appear at most once: two values (which one would count?) are a bad request."""
    values = headers.getlist(name)
    if len(values) > 1:
        raise ApiError(400, f"the request has {len(values)} {name} headers: send one", code="duplicate_header")
    return values[0] if values else None
