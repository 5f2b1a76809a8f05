"""`warpcode sessions` and `warpcode chat --resume`, as a user runs them: the real program in a subprocess, a
scripted model, a state directory of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.agent.cli.main import main

pytestmark = pytest.mark.slow  # real `warpcode` subprocesses

WARPCODE = str(Path(sys.executable).with_name("warpcode"))
MODEL = "scripted:" + str(Path(__file__).with_name("hello_script.json"))  # one turn: "Hello.", once per session
BOX_DRAWING = "─│┃━┏┓┗┛┡┩└┘╇"


def warpcode(state: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CONFIG_HOME": str(state / "config")}
    command = [WARPCODE, *args, "--state-dir", str(state)]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_sessions_are_listed_shown_resumed_and_deleted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    state, repo = tmp_path / "state", tmp_path / "repo"
    repo.mkdir()
    warpcode(state, "chat", "--cwd", str(repo), "--model", MODEL, stdin="fix   the\n")
    [session_id] = [path.stem for path in (state / "sessions").iterdir()]

    listed = warpcode(state, "sessions").stdout.splitlines()  # piped: plain columns, one session a line
    assert listed[0].split() == ["id", "workspace", "last", "activity", "turns", "first", "prompt"]
    assert listed[1].split()[:2] == [session_id, str(repo)] and listed[1].split()[-3:] == ["1", "fix", "the"]
    assert not any(mark in "\n".join(listed) for mark in BOX_DRAWING)

    assert main(["sessions", "show", session_id, "--state-dir", str(state)]) == 0
    shown = capsys.readouterr().out
    assert f"session {session_id} in {repo}" in shown and "1 turn" in shown
    assert shown.count("Hello.") == 1 and "> fix   the" in shown

    # Resumed from elsewhere: the session goes on in its own workspace, with its history on screen first.
    resumed = warpcode(state, "chat", "--resume", session_id, "--model", MODEL, stdin="once more\n").stdout
    assert f"session {session_id} in {repo}" in resumed and resumed.count("Hello.") == 2
    assert main(["sessions", "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-3:] == ["2", "fix", "the"]

    assert main(["sessions", "delete", "no-such-id", "--state-dir", str(state)]) == 1
    said = capsys.readouterr().err
    assert "there is no stored session 'no-such-id'" in said and "`warpcode sessions` lists them" in said
    assert main(["sessions", "delete", session_id, "--state-dir", str(state)]) == 0
    assert main(["sessions", "--state-dir", str(state)]) == 0
    assert "no stored sessions" in capsys.readouterr().out and not list((state / "sessions").iterdir())
