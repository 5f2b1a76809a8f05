"""`--ray local`: a Ray instance of the batch's own that nothing beyond this machine's loopback can reach, and
nothing without its token.

Ray's servers (the GCS, the raylet and its object manager, the workers, the agents) listen on the node's address;
Ray takes loopback as that address on a machine it does not expect to join a cluster
(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, its switch for that). Every request to them must carry a token
(RAY_AUTH_MODE=token, Ray 2.52 and later): one made for the batch, in a 0600 file in warpcode's private state
directory (RAY_AUTH_TOKEN_PATH), where Ray's own default would be ~/.ray/auth_token written with the umask's mode.
Ray reads these settings when it is first imported, so `private_settings` makes them before that and takes them
back, with the token file, once the instance has stopped. Should the driver die without stopping it (SIGKILL),
its watchdog (ray_watchdog.py) stops the instance and removes the token file.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from warpcode.tools.workspace import default_state_home, ensure_private_dir

TOKEN_AUTH_RAY = (2, 52)  # the first Ray with token authentication
INSTALL_RAY = "--ray needs Ray, an optional extra: pip install 'warpcode[distributed]'"
WATCHDOG_WAIT_S = 5.0  # for the watchdog to finish after a clean stop (it finds nothing left, usually)
_REPLACED = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


@dataclass(frozen=True)
class LocalSettings:
    token_file: Path
    before_ray_loaded: bool  # False: Ray was imported earlier in this process and read the old settings


@contextlib.contextmanager
def private_settings() -> Iterator[LocalSettings]:
    """The settings of a private local instance, in this process's environment (Ray's processes inherit it) from
    before Ray is imported until the instance has stopped; the environment is then as it was and the token gone."""
    check_ray_version()
    token_file = _write_token(ensure_private_dir(default_state_home() / "ray"))
    watchdog, driver_end = _start_watchdog(token_file)
    saved = {name: os.environ.pop(name, None) for name in _REPLACED}
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_file), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    try:
        yield LocalSettings(token_file, "ray" not in sys.modules)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.close(driver_end)  # the watchdog stops what the instance left running, if anything
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=WATCHDOG_WAIT_S)
        token_file.unlink(missing_ok=True)


def _start_watchdog(token_file: Path) -> tuple[subprocess.Popen, int]:
    """The instance's watchdog, and this process's end of the pipe it waits on (close-on-exec, so that none of
    Ray's processes holds it open). In a session of its own: a signal to the driver's process group (Ctrl-C, a
    `timeout`) leaves it to do its work."""
    watchdog_end, driver_end = os.pipe()
    try:
        watchdog = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                str(Path(__file__).with_name("ray_watchdog.py")),
                str(os.getpid()),
                str(token_file),
            ],
            stdin=watchdog_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        os.close(driver_end)
        raise
    finally:
        os.close(watchdog_end)
    return watchdog, driver_end


def check_ray_version() -> None:
    """A one-line error unless the installed Ray has token authentication."""
    try:
        installed = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(INSTALL_RAY) from None
    numbers = tuple(int(part) for part in installed.split(".")[:2] if part.isdigit())
    if numbers < TOKEN_AUTH_RAY:
        needed = ".".join(map(str, TOKEN_AUTH_RAY))
        raise ValueError(
            f"--ray local needs Ray {needed} or later (token authentication), and Ray {installed} is installed: "
            "pip install -U 'warpcode[distributed]'"
        )


def _write_token(folder: Path) -> Path:
    """A new token in a file of its own (0600, never an existing file): one per instance, so that batches running
    at once each keep theirs."""
    path = folder / f"batch-{os.getpid()}-{secrets.token_hex(4)}.token"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32))
    return path
