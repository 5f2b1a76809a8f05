"""What the real `warpcode` program checks as it starts, before any model loads or any prompt is sent: the optional
extras a command needs (pip install 'warpcode[runtime]', '[distributed]'), an openai: URL without its scheme, and
serve-model's port. Each answer is one line, at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real `warpcode` subprocesses

WARPCODE = str(Path(sys.executable).with_name("warpcode"))
SCRIPT = Path(__file__).with_name("hello_script.json")


def warpcode(*args: str, without: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run warpcode; `without`: a module made to look not installed (this venv has them all), the way Python sees
    a module that is missing: `sys.modules[name] = None` in a sitecustomize found first on PYTHONPATH."""
    env = dict(os.environ)
    if without:
        shim = Path(cwd or ".") / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(f"import sys\nsys.modules[{without!r}] = None\n")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    return subprocess.run(
        [WARPCODE, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd, stdin=subprocess.DEVNULL
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


RUNTIME = "pip install 'warpcode[runtime]'"


@pytest.mark.parametrize(
    ("args", "missing", "expected"),
    [
        (
            ["serve", "--port", "0", "--state-dir", "{tmp}/state", "--model", "local:{tmp}"],
            "torch",
            f"the model local:{{tmp}} needs torch, which is not installed: {RUNTIME}",
        ),
        (
            ["generate", "--random-weights", "--preset", "tiny", "--prompt-ids", "1,2"],
            "torch",
            f"warpcode generate needs torch, which is not installed: {RUNTIME}",
        ),
        (
            ["serve-model", "--random-weights", "--preset", "tiny", "--port", "0"],
            "fastapi",
            f"warpcode serve-model needs fastapi, which is not installed: {RUNTIME}",
        ),
        # Its one row is not valid, so no job would reach Ray: said all the same, before any row is written.
        (
            ["batch", "JOBS.jsonl", "--out", "R.jsonl", "--ray", "local", "--model", f"scripted:{SCRIPT}"],
            "ray",
            "--ray needs Ray, an optional extra: pip install 'warpcode[distributed]'",
        ),
    ],
    ids=["serve local model", "generate", "serve-model", "batch --ray"],
)
def test_a_missing_extra_is_named_at_start_up(tmp_path: Path, args: list[str], missing: str, expected: str) -> None:
    (tmp_path / "JOBS.jsonl").write_text('{"id": "a", "repo": "."}\n')
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    line = one_error_line(warpcode(*args, without=missing, cwd=tmp_path))
    assert expected.replace("{tmp}", str(tmp_path)) in line
    assert "ModuleNotFoundError" not in line and "Internal error" not in line
    assert not (tmp_path / "R.jsonl").exists()


def test_an_openai_url_without_its_scheme_is_refused_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    line = one_error_line(warpcode("run", "--cwd", str(tmp_path), "--model", "openai:localhost:8000/v1", "hi"))
    assert "use openai:http://localhost:8000/v1" in line and "attempts" not in line
    assert time.monotonic() - started < 10.0  # it was 5 attempts, 16 s


def test_serve_model_reports_a_port_in_use_before_it_needs_torch(tmp_path: Path) -> None:
    # Without torch, the old order (import torch, load, then bind) said "torch" first: the port is checked first.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = ("serve-model", "--random-weights", "--preset", "tiny", "--device", "cpu", "--port", port)
        line = one_error_line(warpcode(*args, without="torch", cwd=tmp_path))
    assert f"port {port} on 127.0.0.1 is already in use" in line and "--port 0" in line
