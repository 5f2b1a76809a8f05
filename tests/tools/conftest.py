from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.tools import Workspace


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace(root)
