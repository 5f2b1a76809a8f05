"""What hostile requests cost everyone else on `warpcode serve-model` (issue 42, items 1, 2 and 6): a real server
(random tiny weights on the CPU, with a tokenizer-free prompt of token ids) as a subprocess, and for each attack the
latency of a victim's 4-token request (or of /health) while it runs, and the server's peak memory.

    python -m warpcode.bench.hostile_model_server --chat-checkpoint DIR [--stop-chars 1024 --stop-count 32]

- `poison`: a request with seed 2**63; then whether a plain request is still served.
- `stop`: a request generating 64 tokens under --stop-count stop strings of --stop-chars characters each (never
  matching) and, while it runs, the victim's request.
- `body`: a 100 MB body sent without the API key; /health's latency while it is sent, the server's RSS after.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time

import httpx

KEY = "bench-key"


def start_server(chat_checkpoint: str | None) -> tuple[subprocess.Popen, str]:
    source = ["--model", chat_checkpoint] if chat_checkpoint else ["--random-weights", "--preset", "tiny"]
    command = [sys.executable, "-m", "warpcode.agent", "serve-model", "--port", "0", "--device", "cpu", *source]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "WARPCODE_API_KEY": KEY})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([process.stderr], [], [], 0.5)[0]:
            line = process.stderr.readline()
            if "OpenAI API on" in line:
                return process, line.split("OpenAI API on")[1].split()[0]
    process.kill()
    raise SystemExit("serve-model did not start")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):  # peak resident set
                return int(line.split()[1]) / 1024
    return 0.0


def victim(url: str) -> tuple[int, float]:
    start = time.monotonic()
    reply = httpx.post(
        f"{url}/completions",
        json={"prompt": [1, 2, 3], "max_tokens": 4, "ignore_eos": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=600,
    )
    return reply.status_code, time.monotonic() - start


def poison(url: str) -> dict:
    body = {"prompt": [1, 2], "max_tokens": 2, "seed": 2**63}
    reply = httpx.post(f"{url}/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    status, _ = victim(url)
    health = httpx.get(url.removesuffix("/v1") + "/health", timeout=10).status_code
    return {"poison_status": reply.status_code, "next_request_status": status, "health_status": health}


def stop_stall(url: str, stop_chars: int, stop_count: int) -> dict:
    alone = min(victim(url)[1] for _ in range(3))
    body = {
        "prompt": "hello",
        "max_tokens": 64,
        "ignore_eos": True,
        "stop": [chr(0x4E00 + i) * stop_chars for i in range(stop_count)],
    }
    result: dict = {}

    def attack() -> None:
        start = time.monotonic()
        reply = httpx.post(f"{url}/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=900)
        result.update(attack_status=reply.status_code, attack_s=round(time.monotonic() - start, 3))

    thread = threading.Thread(target=attack)
    thread.start()
    time.sleep(0.5)
    status, beside = victim(url)
    thread.join()
    return {"victim_alone_s": round(alone, 3), "victim_beside_s": round(beside, 3), "victim_status": status, **result}


def unauthenticated_body(url: str, pid: int) -> dict:
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    size = 100 * 2**20
    sent = {"bytes": 0}

    def send() -> None:
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {size}\r\n\r\n".encode())  # fmt: skip
            chunk = b"[" + b"1," * (2**20 // 2 - 1) + b"1"
            try:
                while sent["bytes"] < size:
                    sock.sendall(chunk[: size - sent["bytes"]])
                    sent["bytes"] += len(chunk)
                sock.recv(100)
            except OSError:
                pass  # the server answered and closed early

    thread = threading.Thread(target=send)
    thread.start()
    health = []
    while thread.is_alive():
        start = time.monotonic()
        httpx.get(url.removesuffix("/v1") + "/health", timeout=60)
        health.append(time.monotonic() - start)
        time.sleep(0.05)
    thread.join()
    return {
        "body_bytes_sent": sent["bytes"],
        "health_max_s": round(max(health, default=0), 3),
        "server_peak_rss_mb": round(rss_mb(pid)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stop-chars", type=int, default=1024)
    parser.add_argument("--stop-count", type=int, default=32)
    parser.add_argument("--chat-checkpoint", help="a checkpoint with a tokenizer (stop strings need one)")
    args = parser.parse_args()
    process, url = start_server(args.chat_checkpoint)
    try:
        report = {"rss_at_start_mb": round(rss_mb(process.pid))}
        report["body"] = unauthenticated_body(url, process.pid)
        report["stop"] = stop_stall(url, args.stop_chars, args.stop_count)
        report["poison"] = poison(url)
        print(json.dumps(report, indent=1))
    finally:
        process.terminate()
        process.wait(30)


if __name__ == "__main__":
    main()
