from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for a session to work in (modules that need files in it define their own)."""
    root = tmp_path / "repo"
    root.mkdir()
    return root
