"""The made-up repositories' tests need no pytest plugin: loading this machine's (hypothesis, anyio, pytest-asyncio)
would cost a second per test run inside every task."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_pytest_plugins_in_task_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
