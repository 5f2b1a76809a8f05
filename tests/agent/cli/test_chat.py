"""`warpcode chat` for real: a subprocess driven through its stdin and stdout pipes, a scripted model."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, start_server
from warpcode.agent.service.session_store import SessionStore

EDIT = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
ORIGINAL = "def add(a, b):\n    return a - b\n"


class ChatProcess:
    """`warpcode chat` with its output collected by a thread, so the test can wait for what it expects to see."""

    def __init__(self, *options: str, cwd: Path) -> None:
        command = [sys.executable, "-m", "warpcode.agent", "chat", *options]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd
        )
        self.output, self.seen = "", 0
        self.changed = threading.Condition()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        while chunk := os.read(self.process.stdout.fileno(), 4096):
            with self.changed:
                self.output += chunk.decode()
                self.changed.notify_all()

    def expect(self, text: str, timeout: float = 15) -> str:
        """Wait until `text` appears after what earlier calls saw; return the output up to and including it."""
        with self.changed:
            if not self.changed.wait_for(lambda: text in self.output[self.seen :], timeout):
                raise AssertionError(f"{text!r} never appeared; output:\n{self.output}")
            end = self.output.index(text, self.seen) + len(text)
            shown, self.seen = self.output[self.seen : end], end
        return shown

    def send(self, line: str) -> None:
        self.process.stdin.write(f"{line}\n".encode())
        self.process.stdin.flush()

    def exit_code(self) -> int:
        try:
            return self.process.wait(timeout=15)
        finally:
            self.process.kill()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(ORIGINAL)
    return root


def in_process_chat(tmp_path: Path, repo: Path, turns: list[dict], mode: str) -> ChatProcess:
    script = write_script(tmp_path / "model.json", turns)
    options = ("--cwd", str(repo), "--model", f"scripted:{script}", "--mode", mode, "--state-dir", str(tmp_path / "st"))
    return ChatProcess(*options, cwd=tmp_path)


@pytest.mark.slow
def test_allowed_edit_applies_and_undo_restores_it(tmp_path: Path, repo: Path) -> None:
    chat = in_process_chat(tmp_path, repo, [{"tool_calls": [EDIT]}, {"text": "Fixed add()."}], "ask")
    chat.send("fix add")
    question = chat.expect("Allow Edit calc.py? [y] once  [n] no  [a] always  [r] never, then Enter:")
    assert "-    return a - b\n+    return a + b" in question  # the file's exact change, before the question
    assert (repo / "calc.py").read_text() == ORIGINAL
    chat.send("y")
    after = chat.expect("Fixed add().")
    assert "✓ applied" in after and "return a + b" not in after  # the diff is not shown a second time
    chat.expect("[end_turn]")
    assert (repo / "calc.py").read_text() == ORIGINAL.replace("a - b", "a + b")
    chat.send("/undo")
    chat.expect("restored 'before: fix add': M calc.py")
    assert (repo / "calc.py").read_text() == ORIGINAL
    chat.send("/quit")
    assert chat.exit_code() == 0


def test_the_question_says_what_always_covers_and_always_holds(tmp_path: Path, repo: Path) -> None:
    status = lambda flags: {"name": "run_command", "arguments": {"command": f"echo status{flags}"}}
    turns = [{"tool_calls": [status("")]}, {"tool_calls": [status(" --short")]}, {"text": "Both ran."}]
    chat = in_process_chat(tmp_path, repo, turns, "ask")
    chat.send("check")
    assert "[a] Always allow `echo …` commands  [r] Always reject `echo …` commands" in chat.expect(
        "[r] never, then Enter:"
    )
    chat.send("a")
    assert "[r] never, then Enter:" not in chat.expect("Both ran.")  # the second command was covered
    chat.expect("[end_turn]")
    chat.send("/quit")
    assert chat.exit_code() == 0


def test_rejected_edit_is_told_to_the_model_and_the_turn_goes_on(tmp_path: Path, repo: Path) -> None:
    chat = in_process_chat(tmp_path, repo, [{"tool_calls": [EDIT]}, {"text": "Understood, not editing."}], "ask")
    chat.send("fix add")
    chat.expect("Allow Edit calc.py?")
    chat.send("n")
    assert "✗ Permission denied: edit_file (edit) was not allowed" in chat.expect("Understood, not editing.")
    chat.expect("[end_turn]")
    assert (repo / "calc.py").read_text() == ORIGINAL
    chat.process.stdin.close()  # Ctrl-D
    assert chat.exit_code() == 0


@pytest.mark.slow
def test_connect_to_a_running_server(tmp_path: Path, repo: Path) -> None:
    script = write_script(tmp_path / "model.json", [
        {"text": "Reading calc.py.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": "add() subtracts."},
    ])  # fmt: skip
    server, url = start_server(tmp_path, script, "--token", TOKEN)
    try:
        chat = ChatProcess("--connect", url, "--token", TOKEN, "--cwd", str(repo), cwd=tmp_path)
        chat.expect("mode auto")
        chat.send("what does add do?")
        assert "▶ Read calc.py" in chat.expect("add() subtracts.")
        chat.expect("[end_turn]")
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
def test_serve_and_connect_take_the_token_from_the_environment(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WARPCODE_TOKEN keeps the token off both command lines, where `ps` would show it to every user."""
    script = write_script(tmp_path / "model.json", [{"text": "Hello."}])
    monkeypatch.setenv("WARPCODE_TOKEN", TOKEN)  # both processes inherit it
    server, url = start_server(tmp_path, script)
    try:
        chat = ChatProcess("--connect", url, "--cwd", str(repo), cwd=tmp_path)
        chat.expect("mode auto")
        chat.send("hi")
        chat.expect("[end_turn]")
        chat.send("/quit")
        assert chat.exit_code() == 0
        assert TOKEN not in " ".join(server.args) + " ".join(chat.process.args)
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("connected", [False, True], ids=["in-process", "connected"])
def test_a_model_that_cannot_answer_is_said_once(tmp_path: Path, repo: Path, connected: bool) -> None:
    """The failure's one report is the prompt's ACP error (in-process, or from `warpcode serve` over its WebSocket):
    no agent text says it again."""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    model, server = f"openai:http://127.0.0.1:{port}/v1", None
    if connected:
        server, url = start_server(
            tmp_path, write_script(tmp_path / "model.json", []), "--token", TOKEN, "--model", model
        )
        chat = ChatProcess("--connect", url, "--token", TOKEN, "--cwd", str(repo), cwd=tmp_path)
    else:
        chat = ChatProcess("--cwd", str(repo), "--model", model, "--state-dir", str(tmp_path / "st"), cwd=tmp_path)
    try:
        chat.expect("/help lists the commands.")
        chat.send("hi")
        said = chat.expect("send another prompt to go on once the model answers.")
        chat.send("/quit")
        assert chat.exit_code() == 0
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    failure = f"error: The model could not answer: nothing answers at http://127.0.0.1:{port}/v1/chat/completions ("
    assert failure in said and chat.output.count("could not answer") == 1 and chat.output.count("nothing answers") == 1


@pytest.mark.slow
def test_resume_finds_the_session_s_directory_beyond_the_first_page_of_sessions(tmp_path: Path, repo: Path) -> None:
    store = SessionStore(tmp_path / "st")
    for n in range(150):  # the oldest one is on the second page of session/list
        store.create(f"s{n:03d}", str(repo if n == 0 else tmp_path), "ask")
        os.utime(store.path(f"s{n:03d}"), ns=(n * 10**9, (10**6 + n) * 10**9))
    script = write_script(tmp_path / "model.json", [{"text": "hi"}])
    chat = ChatProcess("--session", "s000", "--model", f"scripted:{script}", "--state-dir", str(tmp_path / "st"),
                       cwd=tmp_path)  # fmt: skip
    chat.expect(f"session s000 in {repo}, mode ask")
    chat.send("/quit")
    assert chat.exit_code() == 0


@pytest.mark.slow
def test_ctrl_c_cancels_the_turn_and_kills_its_command(tmp_path: Path, repo: Path) -> None:
    sleep = {"name": "run_command", "arguments": {"command": "echo $$ > sleep.pid; exec sleep 30"}}
    chat = in_process_chat(tmp_path, repo, [{"tool_calls": [sleep]}, {"text": "Still here."}], "auto")
    chat.send("wait a while")
    pid_file = repo / "sleep.pid"
    deadline = time.monotonic() + 15
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    sleep_pid = int(pid_file.read_text())
    chat.process.send_signal(signal.SIGINT)
    chat.expect("[cancelled]")
    with pytest.raises(ProcessLookupError):
        os.kill(sleep_pid, 0)
    chat.send("are you there?")
    chat.expect("Still here.")
    chat.send("/quit")
    assert chat.exit_code() == 0
