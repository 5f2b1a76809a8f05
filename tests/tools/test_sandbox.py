"""The opt-in bubblewrap sandbox, with real commands: writes stay inside the workspace, tests still run, and a
command running as root gets no privilege to undo that."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import warpcode.tools
from warpcode.tools import Workspace, run_command, run_tests
from warpcode.tools.sandbox import Sandbox, SandboxUnavailable, sandbox_from_setting

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to run as root, and to become another user)")
NO_CAPABILITIES = "CapEff:\t0000000000000000"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp, open to every user: the sandbox's private /tmp hides the host's /tmp whole, which
    would hide what a test means the sandbox to hide for another reason."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def _escape_attempt(outside: Path) -> str:
    """The way out a command running as root found: unmount the private /tmp, make / writable again, write."""
    return (
        f"umount -l /tmp; mount -o remount,rw,bind /; touch {outside}/escaped; "
        "grep CapEff /proc/self/status; echo uid=$(id -u); echo made > made.txt"
    )


def _assert_confined(output: str, workspace: Path, outside: Path, owner: int) -> None:
    assert not (outside / "escaped").exists(), output
    assert NO_CAPABILITIES in output and "uid=0\n" not in output
    made = workspace / "made.txt"
    assert made.read_text() == "made\n" and made.stat().st_uid == owner  # the real user's file outside


@needs_bwrap
@needs_root
def test_a_command_running_as_root_cannot_remount_its_way_out(ws: Workspace, root: Path, outside: Path) -> None:
    result = run_command(ws, _escape_attempt(outside), sandbox=Sandbox.bwrap())
    try:
        _assert_confined(result.output, root, outside, owner=0)
    finally:
        (outside / "escaped").unlink(missing_ok=True)


PLAIN_USER_RUN = """
import json, sys
from warpcode.tools.process import execute
from warpcode.tools.sandbox import Sandbox
print(json.dumps(execute(sys.argv[1], sys.argv[2], sandbox=Sandbox.bwrap()).output))
"""


@needs_bwrap
@needs_root
def test_a_plain_user_gets_the_same_confinement(outside_tmp: Path) -> None:
    """The real tool path (execute, its guard host, Sandbox.bwrap) in a process of user nobody."""
    nobody = 65534
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None or shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) and a system python3 to run as user nobody")
    package = outside_tmp / "package" / "warpcode"
    package.mkdir(parents=True)
    (package / "tools").symlink_to(Path(warpcode.tools.__file__).parent)
    workspace, outside, home = outside_tmp / "workspace", outside_tmp / "outside", outside_tmp / "home"
    for folder in (workspace, outside, home):
        folder.mkdir()
        os.chown(folder, nobody, nobody)
    as_nobody = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(package.parent)}
    if subprocess.run([*as_nobody, python, "-c", "import warpcode.tools.process"], env=env).returncode != 0:
        pytest.skip(f"user nobody cannot import this checkout's warpcode.tools with {python} (3.11+ needed)")
    command = _escape_attempt(outside)
    done = subprocess.run(
        [*as_nobody, python, "-c", PLAIN_USER_RUN, command, str(workspace)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    _assert_confined(output, workspace, outside, owner=nobody)


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
