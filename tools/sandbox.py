"""The opt-in sandbox for commands (run_command, run_tests): bubblewrap (`bwrap`), when it is installed.

Inside it the whole file system is read-only but for the workspace (and what a tool adds, such as the folder
run_tests reads its report from); /tmp is private and empty, /dev and /proc are the sandbox's own, the command
runs in a new session and PID namespace, dies with the guard host that started it, and is offline if asked.
Commands still run as the user: the sandbox confines what they can change, not what they can read.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

SETTINGS = ("none", "bwrap")  # the values of the --sandbox option / the sandbox config key


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot be used here; the message says what to do."""


@dataclass(frozen=True)
class Sandbox:
    executable: str  # bwrap's path
    network: bool = True
    writable: tuple[str, ...] = ()  # writable besides the workspace

    @classmethod
    def bwrap(cls, network: bool = True) -> Sandbox:
        executable = shutil.which("bwrap")
        if executable is None:
            raise SandboxUnavailable(
                "--sandbox bwrap needs bubblewrap, which is not installed: install bubblewrap "
                "(apt install bubblewrap) or run without --sandbox"
            )
        return cls(executable, network)

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
        offline = [] if self.network else ["--unshare-net"]
        return [
            self.executable,
            *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
            *binds,
            *("--chdir", root, "--unshare-pid", "--die-with-parent", "--new-session"),
            *offline,
            "--",
            *argv,
        ]


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
