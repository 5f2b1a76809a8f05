"""What a new user meets at the command line: the real `warpcode` program in a subprocess, mistakes made on purpose.
Each answer is one line that says what is wrong and what to do, in the words of the command that was run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from warpcode.bench import tools as tools_bench

WARPCODE = str(Path(sys.executable).with_name("warpcode"))
SCRIPT = Path(__file__).with_name("hello_script.json")  # a scripted model's one turn, for commands that need one


def warpcode(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([WARPCODE, *args], capture_output=True, text=True, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.slow
def test_debug_is_accepted_after_the_subcommand_too() -> None:
    result = warpcode("bench", "moe", "--preset", "no-such-model", "--device", "cpu", "--debug")
    assert "Traceback" in result.stderr and "no-such-model" in result.stderr
    assert "unrecognized arguments" not in result.stderr


def test_help_names_every_benchmark() -> None:
    listed = " ".join(warpcode("--help").stdout.split("    bench", 1)[1].split("    chat", 1)[0].split())
    assert "(moe)" in listed and "(decode)" in listed


@pytest.mark.slow
def test_bench_decode_without_a_gpu_says_what_runs_on_the_cpu() -> None:
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is there: the default device is it")
    line = one_error_line(warpcode("bench", "decode", "--preset", "qwen3-30b-a3b", "--random-weights"))
    assert "no CUDA device" in line and "--device cpu" in line and "AssertionError" not in line
    tiny = warpcode("bench", "decode", "--preset", "tiny", "--random-weights", "--batch", "1", "--steps", "2",
                    "--prefill", "0", "--json")  # fmt: skip
    assert tiny.returncode == 0, tiny.stderr
    assert '"batch": 1' in tiny.stdout


@pytest.mark.slow
def test_torch_commands_print_no_numpy_warning() -> None:
    result = warpcode(
        "generate", "--random-weights", "--preset", "tiny", "--prompt-ids", "1,2", "--max-new-tokens", "2",
        "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "NumPy" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["generate", "--random-weights", "--preset", "tiny", "--prompt", "hello"], "--prompt-ids 1,2,3"),
        (["generate", "--random-weights", "--preset", "tiny", "--prompt-ids", "1,x"], "'x' is not one"),
        (["run", "--cwd", "no-such-dir", "--model", "scripted:x.json", "hi"], "--cwd 'no-such-dir' is not a directory"),
        (["chat", "--cwd", "no-such-dir", "--model", "scripted:x.json"], "--cwd 'no-such-dir' is not a directory"),
        (["chat", "--session", "deadbeef", "--model", f"scripted:{SCRIPT}"], "there is no stored session 'deadbeef'"),
    ],
    ids=[
        "prompt without tokenizer",
        "bad token id",
        "run in a missing cwd",
        "chat in a missing cwd",
        "unknown session",
    ],
)
def test_mistakes_get_one_line_without_class_names(args: list[str], expected: str) -> None:
    line = one_error_line(warpcode(*args))
    assert expected in line
    jargon = ("InvalidArgument", "ValueError", "BackendError", "RequestError", "invalid literal", "session/new")
    assert not any(word in line for word in jargon)


@pytest.mark.slow
def test_a_model_server_that_is_not_there_fails_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # measured against the same program answering at once (a scripted turn): start-up under a loaded machine
    # can take seconds, the 5 retries with backoff this guards against take 16
    started = time.monotonic()
    warpcode("run", "--cwd", str(tmp_path), "--model", f"scripted:{SCRIPT}", "hi")
    answering = time.monotonic() - started
    started = time.monotonic()
    model = f"openai:http://127.0.0.1:{port}/v1"
    result = warpcode("run", "--cwd", str(tmp_path), "--model", model, "hi")
    assert time.monotonic() - started < answering + 5.0
    assert result.returncode == 1
    # said once, on stderr, as every channel says it; not among the turn's updates
    failure = f"The model could not answer: nothing answers at http://127.0.0.1:{port}/v1/chat/completions ("
    assert result.stderr.count("could not answer") == 1 and result.stderr.strip().splitlines()[-1].startswith(failure)
    assert "nothing answers" not in result.stdout
    as_json = warpcode("run", "--cwd", str(tmp_path), "--model", model, "--json", "hi")
    *updates, last = as_json.stdout.splitlines()
    assert as_json.returncode == 1 and json.loads(last) == {"stopReason": "refusal", "error": result.stderr.strip()}
    assert "nothing answers" not in "".join(updates) + as_json.stderr


@pytest.mark.slow
def test_a_port_in_use_names_the_option_that_picks_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        line = one_error_line(warpcode("serve", "--port", port, "--state-dir", str(tmp_path), timeout=60))
    assert f"port {port}" in line and "--port 0" in line and "Errno" not in line


def test_the_tools_benchmark_leaves_no_temporary_folder(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class FooObserver:\n    pass\n")
    before = set(os.listdir(tempfile.gettempdir()))
    tools_bench.bench_search(tmp_path)
    assert set(os.listdir(tempfile.gettempdir())) - before == set()


def _failing_repo(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return root


def _run_tests_script(tmp_path: Path) -> str:
    script = tmp_path / "model.json"
    script.write_text('{"turns": [{"tool_calls": [{"name": "run_tests", "arguments": {}}]}, {"text": "All green."}]}')
    return f"scripted:{script}"


@pytest.mark.slow
def test_failing_tests_show_as_failed_on_the_terminal_and_in_json(tmp_path: Path) -> None:
    repo, model = _failing_repo(tmp_path / "repo"), _run_tests_script(tmp_path)
    shown = warpcode("run", "--cwd", str(repo), "--model", model, "--mode", "auto", "go")
    assert "✗ pytest: FAILED: 0 passed, 1 failed" in shown.stdout and "✓ pytest" not in shown.stdout
    lines = warpcode("run", "--cwd", str(repo), "--model", model, "--mode", "auto", "--json", "go").stdout
    finished = [line for line in lines.splitlines() if '"tool_call_update"' in line and '"in_progress"' not in line]
    assert len(finished) == 1 and '"status": "failed"' in finished[0]


@pytest.mark.slow
def test_a_missing_test_runner_says_what_to_install(tmp_path: Path) -> None:
    repo, model = _failing_repo(tmp_path / "repo"), _run_tests_script(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True, timeout=120)
    shown = warpcode("run", "--cwd", str(repo), "--model", model, "--mode", "auto", "go").stdout
    assert "✗ pytest: could not run the tests" in shown
    assert f"pytest is not installed for {repo / '.venv' / 'bin' / 'python'}" in shown and "pip install pytest" in shown


@pytest.mark.slow
def test_a_headless_run_says_which_calls_it_refused_and_exits_with_its_own_code(tmp_path: Path) -> None:
    repo = _failing_repo(tmp_path / "repo")
    script = tmp_path / "edit.json"
    script.write_text(
        '{"turns": [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", '
        '"new_text": "a + b"}}]}, {"text": "Fixed."}]}'
    )
    done = warpcode("run", "--cwd", str(repo), "--model", f"scripted:{script}", "fix it")
    assert done.returncode == 3, done.stderr
    note = done.stderr.strip().splitlines()[-1]
    assert "refused 1 tool call" in note and "Edit calc.py" in note and "--yes" in note and "--mode" in note
    assert (repo / "calc.py").read_text().endswith("a - b\n")
    as_json = warpcode("run", "--cwd", str(repo), "--model", f"scripted:{script}", "--json", "fix it")
    assert as_json.returncode == 3
    assert as_json.stdout.splitlines()[-1] == '{"stopReason": "end_turn", "refused": ["Edit calc.py"]}'
    allowed = warpcode("run", "--cwd", str(repo), "--model", f"scripted:{script}", "--yes", "fix it")
    assert allowed.returncode == 0 and "refused" not in allowed.stderr


@pytest.mark.slow
def test_the_workspace_gets_no_warpcode_folder(tmp_path: Path) -> None:
    repo = _failing_repo(tmp_path / "repo")
    script = tmp_path / "edit.json"
    script.write_text(
        '{"turns": [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", '
        '"new_text": "a + b"}}]}, {"text": "Fixed."}]}'
    )
    state = tmp_path / "state"
    done = warpcode("run", "--cwd", str(repo), "--model", f"scripted:{script}", "--mode", "auto", "--state-dir",
                    str(state), "fix it")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in repo.iterdir()) == ["calc.py", "test_calc.py"]
    [workspace_state] = (state / "workspaces").iterdir()  # the checkpoint of the edit lives there
    assert workspace_state.name.startswith("repo-") and (workspace_state / "checkpoints.git").is_dir()
