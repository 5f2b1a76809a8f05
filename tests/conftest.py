import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# `python -m pytest` puts the repository root on sys.path, which would make the folders `kernels/`, `tools/`, ...
# importable under generic top-level names (transformers probes for a `kernels` package). The code is only ever
# imported as `warpcode.*` through the installed package, so the tests run without that entry.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != REPO_ROOT]


def _interpret_triton_without_a_gpu() -> None:
    """Triton decides at import whether kernels compile or run in its CPU interpreter, so decide before any test
    module imports warpcode.kernels."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


_interpret_triton_without_a_gpu()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (run on the GPU machine)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True, scope="session")
def _private_state_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """warpcode keeps its own state (sessions, per-workspace checkpoints and caches) under $XDG_STATE_HOME: the
    tests, and the servers they start, keep theirs in a temporary folder instead of the user's home."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state-home"))


@pytest.fixture
def one_ray_instance_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Ray's `auto` finds a cluster by scanning the machine's processes, so a test that starts Ray, or one that checks
    there is none, must not overlap another: under pytest-xdist the workers take turns on one lock file in the run's
    shared temporary folder."""
    lock = tmp_path_factory.getbasetemp().parent / "one-ray-instance.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
