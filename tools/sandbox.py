"""The opt-in sandbox for commands (run_command, run_tests): bubblewrap (`bwrap`), when it is installed.

What it confines (README.md, "What the service guarantees", says the same to users):
- Writes: the whole file system is read-only but for the workspace (and what a tool adds, such as the folder
  run_tests reads its report from); /tmp is private and empty, /dev and /proc are the sandbox's own.
- Privilege: the command runs in a user namespace of its own with no capability at all, as the user (as nobody,
  uid 65534, when warpcode runs as root), so even root cannot unmount or remount its way out; what it creates
  in the workspace belongs to the real user outside.
- Reads of warpcode's own state and of the user's secrets: the state home, the config folder, serve's token file
  and the usual credentials (SECRETS) show as an empty folder or file, and environment variables named like
  secrets are not passed on. /run and $XDG_RUNTIME_DIR are empty too (but for the links right under /run, and
  the resolver's file when online): their sockets (the session's agents, D-Bus, systemd, docker) are each a way
  to have something run outside. What lies inside the workspace stays visible: the agent's file tools read the
  workspace anyway.
- The network: none, not even loopback (warpcode's own server listens there), unless the user allows it.
- Processes: a new session and PID namespace; the command dies with the guard host that started it.
Everything else stays readable, and CPU, memory and disk are not limited.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from warpcode.tools.state_home import default_state_home

SETTINGS = ("none", "bwrap")  # the values of the --sandbox option / the sandbox config key
NOBODY = 65534  # who a command runs as inside when warpcode runs as root
# Credentials the usual tools keep under the home folder (those under .config/ under $XDG_CONFIG_HOME too).
SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".vault-token",
    ".password-store",
    ".Xauthority",
    ".local/share/keyrings",
    ".cache/huggingface/token",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/git/credentials",
    ".config/warpcode",  # warpcode's config.toml
)
SYSTEM_SOCKETS = ("/run", "/var/run")  # docker, containerd, systemd, D-Bus, ...: the daemons' sockets
# A variable whose name has one of these words (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, PGPASSWORD).
SECRET_VARIABLE = re.compile(r"(?:^|_)(?:[A-Z]*PASSWORD|PASSWD|TOKEN|SECRET|KEY|APIKEY|CREDENTIALS?)(?:_|$)", re.I)
PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot be used here; the message says what to do."""


@dataclass(frozen=True)
class Sandbox:
    executable: str  # bwrap's path
    network: bool = False
    writable: tuple[str, ...] = ()  # writable besides the workspace
    hidden: tuple[str, ...] = ()  # hidden besides SECRETS, the default state home and the system's sockets

    @classmethod
    def bwrap(cls, network: bool = False, hidden: Iterable[str | os.PathLike[str]] = ()) -> Sandbox:
        """The bubblewrap sandbox, checked to start here; `hidden`: warpcode's state folders and files in use."""
        executable = shutil.which("bwrap")
        if executable is None:
            raise SandboxUnavailable(
                "--sandbox bwrap needs bubblewrap, which is not installed: install bubblewrap "
                "(apt install bubblewrap) or run without --sandbox"
            )
        sandbox = cls(executable, network, hidden=tuple(os.fspath(path) for path in hidden))
        sandbox._check_namespaces()
        return sandbox

    def allowing(self, *paths: str | os.PathLike[str]) -> Sandbox:
        """This sandbox, with `paths` writable too."""
        return replace(self, writable=(*self.writable, *(str(Path(path).resolve()) for path in paths)))

    def wrap(self, argv: list[str], workspace: str | os.PathLike[str]) -> list[str]:
        """The command line running `argv` in this sandbox, in `workspace`."""
        root = Path(workspace).resolve()
        # Later mounts go over earlier ones: what is hidden goes over the read-only root, and a workspace under
        # /tmp or a hidden folder shows through, as does (read-only) the Python warpcode runs on, which run_tests
        # falls back on when the project has no virtualenv and neither pytest nor python3 is on PATH.
        hidden = self._hidden_paths(root)
        mounts = [*(arg for path in hidden for arg in _hiding(path)), *self._kept(hidden)]
        mounts += [arg for path in _python_under_tmp() for arg in ("--ro-bind", path, path)]
        mounts += [arg for path in (str(root), *self.writable) for arg in ("--bind", path, path)]
        return [
            self.executable,
            *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
            *mounts,
            *("--chdir", str(root), "--die-with-parent", "--new-session"),
            *self._namespaces(),
            "--",
            *argv,
        ]

    def environment(self, variables: Mapping[str, str]) -> dict[str, str]:
        """The environment a command gets in this sandbox: `variables` but those named like secrets."""
        return {name: value for name, value in variables.items() if not SECRET_VARIABLE.search(name)}

    def _namespaces(self) -> list[str]:
        # bwrap run by root keeps every capability unless told otherwise: none, in a user namespace of its own.
        uid, gid = (os.getuid(), os.getgid()) if os.getuid() else (NOBODY, NOBODY)
        user = ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL"]
        return [*user, "--unshare-pid", *([] if self.network else ["--unshare-net"])]

    def _hidden_paths(self, root: Path) -> list[str]:
        """The existing paths this sandbox hides from a command in `root`, outermost first; those inside the
        workspace or inside another hidden folder left out."""
        home = os.environ.get("HOME") or str(Path.home())
        config = os.environ.get("XDG_CONFIG_HOME", "")
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        candidates = [os.path.join(home, name) for name in SECRETS]
        if os.path.isabs(config):
            candidates += [os.path.join(config, name[8:]) for name in SECRETS if name.startswith(".config/")]
        candidates += [*SYSTEM_SOCKETS, *([runtime] if os.path.isabs(runtime) else [])]
        candidates += [str(default_state_home()), *self.hidden]
        existing = {os.path.realpath(path) for path in candidates if os.path.lexists(path)}
        found: list[str] = []
        for path in sorted(existing, key=lambda path: path.count("/")):
            if os.path.exists(path) and not any(_within(path, outer) for outer in (str(root), *found)):
                found.append(path)
        return found

    def _kept(self, hidden: list[str]) -> list[str]:
        """bwrap's arguments showing again what the system needs from a hidden folder: /etc/resolv.conf's target
        when online (systemd-resolved's lies under /run), the links right under /run (NixOS keeps its programs
        behind /run/current-system)."""
        kept = []
        resolver = os.path.realpath("/etc/resolv.conf")
        if self.network and os.path.isfile(resolver) and any(_within(resolver, path) for path in hidden):
            kept += ["--ro-bind", resolver, resolver]
        if "/run" in hidden:
            with os.scandir("/run") as entries:
                links = [entry.path for entry in entries if entry.is_symlink()]
            kept += [arg for link in sorted(links) for arg in ("--symlink", os.readlink(link), link)]
        return kept

    def _check_namespaces(self) -> None:
        """Start an empty command the way `wrap` will: some kernels and containers forbid the user namespace."""
        probe = [self.executable, "--ro-bind", "/", "/", *self._namespaces(), "--", "true"]
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"--sandbox bwrap: bubblewrap could not be started ({exc})") from None
        if done.returncode != 0:
            said = " ".join(done.stderr.split()) or f"exit code {done.returncode}"
            raise SandboxUnavailable(
                f"--sandbox bwrap cannot create its user namespace here ({said}): allow unprivileged user "
                "namespaces (sysctl user.max_user_namespaces=15000 and kernel.unprivileged_userns_clone=1; on "
                "Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0; in a container, run it with "
                "user namespaces allowed) or run without --sandbox"
            )


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies inside it (both real, absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _hiding(path: str) -> tuple[str, ...]:
    """bwrap's arguments putting an empty folder over `path`, or /dev/null over a file or socket: it reads empty
    and swallows writes. (Bound read-only, a device cannot be opened at all: bwrap mounts it nodev.)"""
    return ("--tmpfs", path) if os.path.isdir(path) else ("--dev-bind", os.devnull, path)


def _python_under_tmp() -> list[str]:
    """The folders of this Python (its environment and installation) that the sandbox's private /tmp would hide."""
    found = {str(Path(prefix).resolve()) for prefix in (sys.prefix, sys.base_prefix)}
    return sorted(path for path in found if Path(path).is_relative_to("/tmp"))


def sandbox_from_setting(
    name: str | None, network: bool = False, hidden: Iterable[str | os.PathLike[str]] = ()
) -> Sandbox | None:
    """The sandbox a `--sandbox` option or `sandbox` config key names (one of SETTINGS); None for "none".
    `network`: whether its commands may use the network; `hidden`: warpcode's state folders and files in use."""
    if name in (None, "none"):
        return None
    if name == "bwrap":
        return Sandbox.bwrap(network, hidden)
    raise SandboxUnavailable(f"unknown sandbox {name!r}: use one of {', '.join(SETTINGS)}")
