"""The opt-in sandbox for commands (run_command, run_tests): bubblewrap (`bwrap`), when it is installed.

Inside it the whole file system is read-only but for the workspace (and what a tool adds, such as the folder
run_tests reads its report from); /tmp is private and empty, /dev and /proc are the sandbox's own, the command
runs in a new session and PID namespace, dies with the guard host that started it, and is offline if asked.
It runs in a user namespace of its own with no capability at all, as the user (as nobody, uid 65534, when
warpcode runs as root), so even root cannot unmount or remount its way out; what it creates in the workspace
belongs to the real user outside. The sandbox confines what commands can change, not what they can read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

SETTINGS = ("none", "bwrap")  # the values of the --sandbox option / the sandbox config key
NOBODY = 65534  # who a command runs as inside when warpcode runs as root
PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot be used here; the message says what to do."""


@dataclass(frozen=True)
class Sandbox:
    executable: str  # bwrap's path
    network: bool = True
    writable: tuple[str, ...] = ()  # writable besides the workspace

    @classmethod
    def bwrap(cls, network: bool = True) -> Sandbox:
        """The bubblewrap sandbox, checked to start here."""
        executable = shutil.which("bwrap")
        if executable is None:
            raise SandboxUnavailable(
                "--sandbox bwrap needs bubblewrap, which is not installed: install bubblewrap "
                "(apt install bubblewrap) or run without --sandbox"
            )
        sandbox = cls(executable, network)
        sandbox._check_namespaces()
        return sandbox

    def allowing(self, *paths: str | os.PathLike[str]) -> Sandbox:
        """This sandbox, with `paths` writable too."""
        return replace(self, writable=(*self.writable, *(str(Path(path).resolve()) for path in paths)))

    def wrap(self, argv: list[str], workspace: str | os.PathLike[str]) -> list[str]:
        """The command line running `argv` in this sandbox, in `workspace`."""
        root = str(Path(workspace).resolve())
        # Later mounts go over earlier ones: a workspace under /tmp shows through the private /tmp, and so does
        # (read-only) the Python warpcode runs on, which run_tests uses when the project has no virtualenv.
        binds = [arg for path in _python_under_tmp() for arg in ("--ro-bind", path, path)]
        binds += [arg for path in (root, *self.writable) for arg in ("--bind", path, path)]
        return [
            self.executable,
            *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
            *binds,
            *("--chdir", root, "--die-with-parent", "--new-session"),
            *self._namespaces(),
            "--",
            *argv,
        ]

    def _namespaces(self) -> list[str]:
        # bwrap run by root keeps every capability unless told otherwise: none, in a user namespace of its own.
        uid, gid = (os.getuid(), os.getgid()) if os.getuid() else (NOBODY, NOBODY)
        user = ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL"]
        return [*user, "--unshare-pid", *([] if self.network else ["--unshare-net"])]

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


def _python_under_tmp() -> list[str]:
    """The folders of this Python (its environment and installation) that the sandbox's private /tmp would hide."""
    found = {str(Path(prefix).resolve()) for prefix in (sys.prefix, sys.base_prefix)}
    return sorted(path for path in found if Path(path).is_relative_to("/tmp"))


def sandbox_from_setting(name: str | None, network: bool = True) -> Sandbox | None:
    """The sandbox a `--sandbox` option or `sandbox` config key names (one of SETTINGS); None for "none"."""
    if name in (None, "none"):
        return None
    if name == "bwrap":
        return Sandbox.bwrap(network)
    raise SandboxUnavailable(f"unknown sandbox {name!r}: use one of {', '.join(SETTINGS)}")
