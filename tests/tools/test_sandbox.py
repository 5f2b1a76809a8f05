"""The opt-in bubblewrap sandbox, with real commands: writes stay inside the workspace, tests still run."""

from __future__ import annotations

import shutil
import socket
import sys
import uuid
from pathlib import Path

import pytest

from warpcode.tools import Workspace, run_command, run_tests
from warpcode.tools.sandbox import Sandbox, SandboxUnavailable, sandbox_from_setting

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


@needs_bwrap
def test_a_sandboxed_command_writes_inside_the_workspace_only(ws: Workspace, root: Path, outside: Path) -> None:
    name = f"warpcode-sandbox-test-{uuid.uuid4().hex}"
    home_file, host_tmp = Path.home() / name, Path("/tmp") / name
    script = (
        f"echo in > inside.txt; echo out > {outside}/x.txt; echo home > {home_file}; "
        f"echo tmp > {host_tmp}; cat {host_tmp}; echo done"
    )
    try:
        result = run_command(ws, script, sandbox=Sandbox.bwrap())
        assert (root / "inside.txt").read_text() == "in\n"
        assert not (outside / "x.txt").exists()  # a folder of the host's /tmp: not even visible inside
        assert not home_file.exists() and "Read-only file system" in result.output
        assert not host_tmp.exists() and "tmp\n" in result.output  # the sandbox's /tmp is its own
        assert result.output.endswith("done\n")
    finally:
        home_file.unlink(missing_ok=True)


@needs_bwrap
def test_run_tests_in_the_sandbox_still_reads_the_junit_report(ws: Workspace, root: Path) -> None:
    (root / "test_math.py").write_text("def test_adds():\n    assert 1 + 1 == 2\n\ndef test_fails():\n    assert 0\n")
    report = run_tests(ws, sandbox=Sandbox.bwrap())
    assert (report.passed, report.failed, report.parsed) == (1, 1, True)
    assert [failure.id for failure in report.failures] == ["test_math.py::test_fails"]


@needs_bwrap
def test_an_offline_sandbox_cannot_reach_the_host(ws: Workspace) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' && echo reached"
        assert "reached" in run_command(ws, probe, sandbox=Sandbox.bwrap()).output
        assert "reached" not in run_command(ws, probe, sandbox=Sandbox.bwrap(network=False)).output


def test_asking_for_bwrap_without_it_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"install bubblewrap \(apt install bubblewrap\) or run without"):
        sandbox_from_setting("bwrap")
    assert sandbox_from_setting("none") is None
    with pytest.raises(SandboxUnavailable, match="use one of none, bwrap"):
        sandbox_from_setting("docker")


def test_a_python_under_tmp_stays_visible_through_the_private_tmp(tmp_path: Path, monkeypatch) -> None:
    """run_tests runs pytest with warpcode's own Python when the project has none: a virtualenv under /tmp (a CI
    checkout there, say) must show through the sandbox's private /tmp, read-only."""
    venv = tmp_path / "venv"  # pytest's tmp_path is under /tmp
    venv.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    argv = Sandbox("/usr/bin/bwrap").wrap(["true"], tmp_path)
    tmpfs = argv.index("/tmp")
    shown = [
        i for i in range(len(argv) - 2) if argv[i : i + 3] == ["--ro-bind", str(venv.resolve()), str(venv.resolve())]
    ]
    assert shown and shown[0] > tmpfs
