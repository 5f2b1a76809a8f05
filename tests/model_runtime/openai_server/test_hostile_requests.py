"""What a hostile client can send serve-model, against the real server on a loopback socket: values the engine
cannot hold, stop strings built to stall it, bodies without the key or past the limits, requests from web pages
(foreign Host or Origin), and connections that never finish their request. Each fails alone, early and in one line,
and every other client keeps being served."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import hypothesis
import pytest
from hypothesis import strategies

from tests.model_runtime.openai_server.servers import serving
from warpcode.model_runtime.detokenize import StopStringFilter
from warpcode.model_runtime.openai_server import RequestLimits
from warpcode.model_runtime.openai_server.guard import MAX_JSON_DEPTH
from warpcode.model_runtime.openai_server.schemas import MAX_STOP_LENGTH, MAX_STOP_STRINGS

KEY = "sk-test"
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def guarded_url(chat_engine):
    limits = RequestLimits(allowed_origins=frozenset({"https://editor.example"}), max_body_bytes=64 * 1024)
    with serving(chat_engine, "tiny-chat", KEY, limits, head_timeout_s=0.5, max_connections=32) as url:
        yield url


def health(url: str) -> httpx.Response:
    return httpx.get(url.removesuffix("/v1") + "/health", timeout=10)


def still_serving(url: str, headers=AUTH) -> None:
    reply = httpx.post(f"{url}/completions", json={"prompt": "hi", "max_tokens": 2}, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    assert health(url).status_code == 200


def raw_request(url: str, head: bytes, body: bytes = b"", wait_s: float = 10) -> bytes:
    """Sends `head` (and `body`) on a fresh socket; the first bytes of the answer, b"" when closed unanswered."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        sock.sendall(head + body)
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b"(no answer)"


@pytest.mark.parametrize(
    ("field", "value"),
    [("seed", 2**63), ("seed", -(2**63) - 1), ("top_k", 2**63), ("temperature", 1e308), ("max_tokens", 2**70)],
)
def test_numbers_the_engine_cannot_hold_are_400_and_the_engine_keeps_serving(chat_url, field, value):
    body = {"prompt": "hi", "max_tokens": 2, "temperature": 1.0, field: value}
    reply = httpx.post(f"{chat_url}/completions", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] in (field, "prompt")
    still_serving(chat_url, headers={})


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_floats_are_400(chat_url, literal):
    content = f'{{"prompt": "hi", "max_tokens": 2, "temperature": {literal}}}'
    reply = httpx.post(f"{chat_url}/completions", content=content, headers=JSON, timeout=60)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "temperature", reply.text


def test_top_k_past_the_vocabulary_is_no_filter(chat_url):
    body = {"prompt": "hi", "max_tokens": 4, "temperature": 1.0, "seed": 7, "return_token_ids": True}
    plain = httpx.post(f"{chat_url}/completions", json=body, timeout=60).json()
    huge = httpx.post(f"{chat_url}/completions", json={**body, "top_k": 2**62}, timeout=60).json()
    assert huge["choices"][0]["token_ids"] == plain["choices"][0]["token_ids"]


def test_health_says_when_the_engine_stopped_serving(tmp_path, fast_tokenizer):
    from tests.model_runtime.checkpoints import save_chat_checkpoint
    from warpcode.model_runtime import load

    engine = load(save_chat_checkpoint(tmp_path, fast_tokenizer), device="cpu", show_progress=False)
    with serving(engine, "broken") as url:
        still_serving(url, headers={})

        def broken(*args, **kwargs):
            raise RuntimeError("scheduler bug")

        engine.core.scheduler.admit = broken  # a fault no request explains: the engine itself is broken
        for _ in range(2):  # the first request meets the fault; the second is refused at once
            reply = httpx.post(f"{url}/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
            assert reply.status_code in (500, 503) and "scheduler bug" in reply.text
        assert reply.status_code == 503
        status = health(url)
        assert status.status_code == 503 and "scheduler bug" in status.json()["message"]
    engine.shutdown()


def test_stop_strings_past_the_bounds_are_400(chat_url):
    many = {"prompt": "hi", "max_tokens": 2, "stop": [f"stop{i}" for i in range(MAX_STOP_STRINGS + 1)]}
    long = {"prompt": "hi", "max_tokens": 2, "stop": "x" * (MAX_STOP_LENGTH + 1)}
    for body in (many, long):
        reply = httpx.post(f"{chat_url}/completions", json=body, timeout=60)
        assert reply.status_code == 400 and reply.json()["error"]["param"] == "stop", reply.text


def test_the_longest_stop_strings_allowed_do_not_stall_another_client(chat_url):
    """A short request while another generates under the most and longest stop strings allowed (none ever
    matches) takes about as long as alone. Matching each stop string anew at each token (the square of its
    length) held the engine thread for seconds per token, and every other request waited behind it."""
    short = {"prompt": "hello", "max_tokens": 4, "ignore_eos": True}

    def timed(body: dict) -> float:
        start = time.monotonic()
        reply = httpx.post(f"{chat_url}/completions", json=body, timeout=600)
        assert reply.status_code == 200, reply.text
        return time.monotonic() - start

    alone = min(timed(short) for _ in range(3))
    stops = [chr(0x4E00 + i) * MAX_STOP_LENGTH for i in range(MAX_STOP_STRINGS)]
    long_request = threading.Thread(target=timed, args=({"prompt": "hi", "max_tokens": 200, "stop": stops},))
    long_request.start()
    time.sleep(0.3)  # the long request is generating
    beside = timed(short)
    long_request.join()
    assert beside < 10 * alone + 1.0, (alone, beside)


def test_stop_string_matching_agrees_with_searching_the_whole_text():
    """StopStringFilter against a brute-force reference: the text up to the first complete stop string, cut at its
    start, whatever the chunks the text arrives in."""

    def reference(text: str, stops: list[str]) -> str:
        for end in range(1, len(text) + 1):
            if found := [s for s in stops if s and text[:end].endswith(s)]:
                return text[: end - max(map(len, found))]
        return text

    @hypothesis.given(
        strategies.lists(strategies.text("ab<|", max_size=4), min_size=1, max_size=3),
        strategies.lists(strategies.text("ab<|", max_size=5), max_size=6),
    )
    @hypothesis.settings(max_examples=400, deadline=None)
    def agrees(stops: list[str], chunks: list[str]) -> None:
        stop_filter = StopStringFilter(stops)
        out = "".join(stop_filter.feed(chunk) for chunk in chunks) + stop_filter.flush()
        assert out == reference("".join(chunks), stops)

    agrees()


def test_a_body_without_the_key_is_refused_before_it_is_read(guarded_url):
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000000\r\n\r\n"
    )
    answer = raw_request(guarded_url, head, b"x" * 1000, wait_s=5)  # 1 kB of the announced 100 MB
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_bodies_past_the_limit_are_413_announced_or_not(guarded_url):
    announced = httpx.post(f"{guarded_url}/completions", content=b"x" * 70_000, headers=AUTH, timeout=10)
    assert announced.status_code == 413 and "--max-body-mb" in announced.json()["error"]["message"]

    def chunks():
        for _ in range(20):
            yield b"[" * 8192

    streamed = httpx.post(f"{guarded_url}/completions", content=chunks(), headers=AUTH, timeout=10)
    assert streamed.status_code == 413
    still_serving(guarded_url)


def test_json_nested_past_the_limit_is_400(guarded_url):
    deep = '{"prompt": ' + "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1) + "}"
    reply = httpx.post(f"{guarded_url}/completions", content=deep, headers=AUTH, timeout=10)
    assert reply.status_code == 400 and "levels deep" in reply.json()["error"]["message"]
    in_text = json.dumps({"prompt": "[" * 300, "max_tokens": 2})  # brackets inside a string are text
    assert httpx.post(f"{guarded_url}/completions", content=in_text, headers=AUTH, timeout=60).status_code == 200


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "rebind.attacker.example:8000"}, 403),
        ({"Origin": "https://attacker.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Host": "localhost"}, 200),
        ({"Host": "[::1]:9"}, 200),
        ({"Origin": "https://editor.example"}, 200),
    ],
)
def test_requests_from_web_pages_are_refused_unless_allowed(guarded_url, headers, status):
    reply = httpx.post(
        f"{guarded_url}/completions", json={"prompt": "hi", "max_tokens": 2}, headers={**AUTH, **headers}, timeout=60
    )
    assert reply.status_code == status, reply.text
    if status == 403:
        assert "--allow-" in reply.json()["error"]["message"]
    assert health(guarded_url).status_code == 200


def test_an_allowed_origin_gets_cors_answers(guarded_url):
    preflight = httpx.options(
        f"{guarded_url}/completions",
        headers={"Origin": "https://editor.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://editor.example"


@pytest.mark.parametrize("name", ["Authorization", "Host", "Origin"])
def test_duplicate_headers_are_400(guarded_url, name):
    values = {"Authorization": b"Bearer sk-test", "Host": b"127.0.0.1", "Origin": b"https://editor.example"}
    head = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-test\r\n"
    head += f"{name}: ".encode() + values[name] + b"\r\n" + b"\r\n"
    if name != "Host":  # h11 itself refuses two Host headers
        head = head.replace(b"\r\n\r\n", f"\r\n{name}: ".encode() + values[name] + b"\r\n\r\n")
    assert raw_request(guarded_url, head).startswith(b"HTTP/1.1 400")


def test_connections_that_never_finish_their_request_are_closed(guarded_url):
    """Half-sent requests (a request line, no end of headers) are closed at the head deadline (0.5 s here), and
    connections past the cap (32 here) as they arrive; a real request is then served."""
    host, port = guarded_url.split("//")[1].split("/")[0].split(":")
    sockets = []
    for _ in range(40):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        sockets.append(sock)
    try:
        closed = 0
        for sock in sockets:
            try:
                closed += sock.recv(1024) == b""
            except (TimeoutError, ConnectionResetError):
                closed += 1
        assert closed == len(sockets)
    finally:
        for sock in sockets:
            sock.close()
    still_serving(guarded_url)
