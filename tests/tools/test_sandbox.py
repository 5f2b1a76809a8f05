"""The opt-in bubblewrap sandbox, with real commands: writes stay inside the workspace, tests still run, a
command running as root gets no privilege to undo that, and warpcode's state, the user's secrets and the network
are out of its reach."""

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
    for folder in (workspace, outside, home / ".ssh"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("a private key\n")
    for path in (workspace, outside, home, home / ".ssh", home / ".ssh" / "id_ed25519"):
        os.chown(path, nobody, nobody)
    as_nobody = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(package.parent)}
    if subprocess.run([*as_nobody, python, "-c", "import warpcode.tools.process"], env=env).returncode != 0:
        pytest.skip(f"user nobody cannot import this checkout's warpcode.tools with {python} (3.11+ needed)")
    command = _escape_attempt(outside) + "; cat ~/.ssh/id_ed25519"
    done = subprocess.run(
        [*as_nobody, python, "-c", PLAIN_USER_RUN, command, str(workspace)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    _assert_confined(output, workspace, outside, owner=nobody)
    assert "a private key" not in output


@needs_bwrap
def test_a_sandboxed_command_writes_inside_the_workspace_only(
    ws: Workspace, root: Path, outside: Path, outside_tmp: Path
) -> None:
    # a folder outside /tmp stands for the home folder: the real $HOME may itself be under /tmp (CI), where the
    # sandbox's private /tmp would hide it instead of showing it read-only
    name = f"warpcode-sandbox-test-{uuid.uuid4().hex}"
    home_file, host_tmp = outside_tmp / name, Path("/tmp") / name
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
def test_the_sandbox_is_offline_unless_the_network_is_allowed(ws: Workspace) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
        probe = f'{sys.executable} -c "{connect}" && echo reached'
        assert "reached" not in run_command(ws, probe, sandbox=Sandbox.bwrap()).output
        assert "reached" in run_command(ws, probe, sandbox=Sandbox.bwrap(network=True)).output


SECRETS = {
    ".ssh/id_ed25519": "an ssh key",
    ".netrc": "machine example.com password a-netrc-password",
    ".config/gh/hosts.yml": "oauth_token: a-gh-token",
    ".aws/credentials": "aws_secret_access_key = an-aws-key",
    ".config/warpcode/config.toml": "token_file = 'somewhere'",
    ".local/state/warpcode/serve-token": "a-serve-token",
}


@pytest.fixture
def home(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder (outside /tmp) holding the usual secrets, warpcode's default state home and config folder."""
    home = outside_tmp / "home"
    for name, text in SECRETS.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text + "\n")
    monkeypatch.setenv("HOME", str(home))
    for variable in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "WARPCODE_STATE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "a-token-in-the-environment")
    return home


@needs_bwrap
def test_warpcodes_state_and_the_users_secrets_are_hidden(ws: Workspace, home: Path) -> None:
    probe = f"cat {' '.join(f'~/{name}' for name in SECRETS)}; echo env=$GITHUB_TOKEN; echo done"
    shown = run_command(ws, probe).output
    assert all(text in shown for text in SECRETS.values()) and "a-token-in-the-environment" in shown
    hidden = run_command(ws, probe, sandbox=Sandbox.bwrap()).output
    assert [text for text in [*SECRETS.values(), "a-token-in-the-environment"] if text in hidden] == []
    assert hidden.endswith("env=\ndone\n")


@needs_bwrap
def test_a_state_folder_given_to_the_sandbox_is_hidden_too(ws: Workspace, outside_tmp: Path) -> None:
    state = outside_tmp / "state"
    state.mkdir()
    (state / "serve-token").write_text("a-serve-token\n")
    probe = f"cat {state}/serve-token"
    assert "a-serve-token" in run_command(ws, probe, sandbox=Sandbox.bwrap()).output
    assert "a-serve-token" not in run_command(ws, probe, sandbox=Sandbox.bwrap(hidden=(state,))).output


@needs_bwrap
def test_secrets_inside_the_workspace_stay_the_workspaces(home: Path) -> None:
    """A workspace that is the home folder: its files are the agent's to read anyway, and stay writable."""
    result = run_command(Workspace(home), "cat .ssh/id_ed25519 && echo new > .ssh/new", sandbox=Sandbox.bwrap())
    assert "an ssh key" in result.output and (home / ".ssh" / "new").read_text() == "new\n"


@needs_bwrap
def test_the_sessions_and_the_systems_sockets_are_out_of_reach(
    ws: Workspace, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$XDG_RUNTIME_DIR holds the user's agents, D-Bus and systemd sockets (`systemd-run --user` runs a command
    outside any sandbox); /run the system's (docker, systemd, D-Bus: root's to command, when warpcode is root)."""
    runtime = outside_tmp / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    paths = [runtime / "bus"]
    if os.access("/run", os.W_OK):
        paths.append(Path("/run") / f"warpcode-test-{uuid.uuid4().hex[:12]}.sock")
    servers = [socket.socket(socket.AF_UNIX) for _ in paths]
    try:
        for server, path in zip(servers, paths, strict=True):
            server.bind(str(path))
            server.listen()
        connect = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"
        probe = "; ".join(f"{sys.executable} -c '{connect}' {path} && echo reached {path}" for path in paths)
        assert run_command(ws, probe).output.count("reached") == len(paths)
        assert "reached" not in run_command(ws, probe, sandbox=Sandbox.bwrap(network=True)).output
    finally:
        for server, path in zip(servers, paths, strict=True):
            server.close()
            path.unlink(missing_ok=True)


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
