"""`warpcode serve`'s upgrade request with odd headers, sent byte for byte over a raw socket: each is answered with
a 4xx and costs one log line, never a 500 and a traceback. The server's token is not ASCII, so that the token check
is seen to compare what the client sent, whatever its bytes."""

from __future__ import annotations

import socket
import time

import pytest

from tests.agent.service_processes import Server

TOKEN = "tökén-0123456789"
GOOD = {
    "Host": "127.0.0.1",
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
    "Authorization": f"Bearer {TOKEN}",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    server = Server(tmp_path_factory.mktemp("handshake"), [{"text": "hi"}], "--token", TOKEN)
    yield server
    assert "Traceback" not in server.stop()


def upgrade_request(port: int, headers: list[tuple[str, bytes]]) -> int:
    """The status code of the answer to GET /acp with exactly these header lines."""
    lines = b"".join(name.encode() + b": " + value + b"\r\n" for name, value in headers)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /acp HTTP/1.1\r\n" + lines + b"\r\n")
        answer = b""
        while b"\r\n" not in answer and (chunk := connection.recv(4096)):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def good_headers(*added: tuple[str, bytes], **replaced: bytes | None) -> list[tuple[str, bytes]]:
    """The headers of a valid upgrade, UTF-8 encoded, with some replaced (None: left out) and `added` after them."""
    values = {name: value.encode() for name, value in GOOD.items()}
    for name, value in replaced.items():
        values[name.replace("_", "-")] = value
    return [(name, value) for name, value in values.items() if value is not None] + list(added)


AUTHORIZATION = GOOD["Authorization"].encode()
ORIGINS = ("Origin", b"https://a.example"), ("Origin", b"https://b.example")
CASES = {
    "two Authorization headers": (good_headers(("Authorization", AUTHORIZATION)), 400),
    "two Authorization headers, the second wrong": (good_headers(("Authorization", b"Bearer wrong")), 400),
    "two Authorization headers, no token": (
        good_headers(("Authorization", b"Bearer a"), ("Authorization", b"Bearer b"), Authorization=None),
        400,
    ),
    "two Origin headers": (good_headers(*ORIGINS), 400),
    "two Origin headers, no token": (good_headers(*ORIGINS, Authorization=None), 400),
    "two Host headers": (good_headers(("Host", b"evil.example")), 400),
    "no Host header": (good_headers(Host=None), 400),
    "two Sec-WebSocket-Key headers": (good_headers(("Sec-WebSocket-Key", b"AAAAAAAAAAAAAAAAAAAAAA==")), 400),
    "no Sec-WebSocket-Key header": (good_headers(Sec_WebSocket_Key=None), 400),
    "a malformed Sec-WebSocket-Key": (good_headers(Sec_WebSocket_Key=b"not base64!"), 400),
    "no Upgrade header": (good_headers(Upgrade=None), 426),
    "a token in Latin-1, not UTF-8": (good_headers(Authorization=f"Bearer {TOKEN}".encode("latin-1")), 401),
    "a non-ASCII token that is wrong": (good_headers(Authorization="Bearer éé".encode()), 401),
    "a non-ASCII Origin": (good_headers(Origin="https://é.example".encode()), 403),
    "no Authorization header": (good_headers(Authorization=None), 401),
}


@pytest.mark.parametrize(("headers", "status"), CASES.values(), ids=CASES.keys())
def test_an_odd_upgrade_request_gets_a_4xx_and_one_log_line(server: Server, headers: list, status: int):
    before = len(server.log)
    assert upgrade_request(_port(server), headers) == status
    deadline = time.monotonic() + 5
    while len(server.log) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # a traceback would follow its first line at once
    (line,) = server.log[before:]
    assert "refused /acp from ('127.0.0.1', " in line and f"): {status} " in line


def test_the_valid_upgrade_with_the_non_ascii_token_is_accepted(server: Server):
    assert upgrade_request(_port(server), good_headers()) == 101


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/", 1)[0])
