"""The optional extras (pyproject.toml's [project.optional-dependencies]) a command needs, checked when it starts:
without them a local model would fail only at its first prompt, deep in a log, as `No module named 'torch'`."""

from __future__ import annotations

import importlib.util

# What each extra brings that warpcode imports (by module name), and what the model runtime itself needs.
RUNTIME_MODULES = ("torch", "safetensors", "tokenizers")
SERVER_MODULES = ("fastapi", "uvicorn")  # serve-model's HTTP server, also in the runtime extra


class MissingExtra(RuntimeError):
    """An optional extra is not installed: the message names the command to install it."""


def missing(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that is not installed, found without importing it (torch takes seconds to import,
    and is imported when it is first used); None when all are."""
    for module in modules:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a parent package missing, or a module half set up
            return module
    return None


def require(needed_by: str, modules: tuple[str, ...], extra: str) -> None:
    """Raise MissingExtra when one of `modules` is not installed."""
    if module := missing(modules):
        raise MissingExtra(f"{needed_by} needs {module}, which is not installed: pip install 'warpcode[{extra}]'")


def require_runtime(needed_by: str) -> None:
    """The model runtime (PyTorch & co.): local models, generate, bench."""
    require(needed_by, RUNTIME_MODULES, "runtime")
