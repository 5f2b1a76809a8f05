import subprocess
import sys

import pytest

from warpcode.agent.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warpcode.agent", *args], capture_output=True, text=True, timeout=120)


def test_version_names_the_installed_distribution():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("warpcode 0.")


def test_help_lists_only_working_subcommands():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "bench" in result.stdout


@pytest.mark.slow
def test_errors_are_one_line_without_traceback():
    result = run_cli("bench", "moe", "--preset", "no-such-model", "--device", "cpu")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no-such-model" in result.stderr


def test_debug_shows_the_traceback(capsys):
    try:
        main(["--debug", "bench", "moe", "--preset", "no-such-model", "--device", "cpu"])
    except Exception as error:
        assert "no-such-model" in str(error)
    else:
        raise AssertionError("--debug must re-raise the error")
