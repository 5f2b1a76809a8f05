"""Where warpcode keeps a workspace's state (outside it, under the state home) and the checks before each use."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from warpcode.tools import CheckpointError, Checkpoints, Workspace, list_files, repo_map
from warpcode.tools.tag_cache import CACHE_NAME, TagCache
from warpcode.tools.workspace import default_state_home, workspace_state_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WARPCODE_STATE_DIR", str(tmp_path / "state-home"))
    return tmp_path / "state-home"


@pytest.fixture
def ordinary_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WARPCODE_STATE_DIR": "/s", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/s"),
        ({"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/warpcode"),
        ({"HOME": "/h"}, "/h/.local/state/warpcode"),
        ({"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/warpcode"),  # the XDG spec: ignored
    ],
)
def test_default_state_home(env: dict[str, str], expected: str) -> None:
    assert default_state_home(env) == Path(expected)


def test_each_workspace_gets_its_own_state_dir_named_by_its_real_path(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "project", tmp_path / "b" / "project"
    for root in (first, second):
        root.mkdir(parents=True)
    (tmp_path / "link").symlink_to(first)
    digest = hashlib.sha256(os.fsencode(first.resolve())).hexdigest()[:16]
    assert workspace_state_dir(Path("/home"), first) == Path("/home/workspaces") / f"project-{digest}"
    assert workspace_state_dir(Path("/home"), tmp_path / "link") == workspace_state_dir(Path("/home"), first)
    assert workspace_state_dir(Path("/home"), second) != workspace_state_dir(Path("/home"), first)


def test_state_lives_outside_the_workspace(root: Path, home: Path, ordinary_umask) -> None:
    (root / "a.py").write_text("def f():\n    return 1\n")
    ws = Workspace(root)
    assert ws.state_dir == workspace_state_dir(home, root)
    Checkpoints(ws).create()
    repo_map(ws)
    assert (ws.state_dir / "checkpoints.git").is_dir() and (ws.state_dir / CACHE_NAME).is_file()
    assert sorted(p.name for p in root.iterdir()) == ["a.py"]
    # Every folder warpcode made is private, so nothing of the checkpoints or caches below is reachable.
    assert [mode(folder) for folder in (home, home / "workspaces", ws.state_dir)] == [0o700] * 3


def test_a_legacy_warpcode_folder_in_the_workspace_is_never_read(root: Path, tmp_path: Path, home: Path) -> None:
    (root / "util.py").write_text("def format_rows(rows):\n    return rows\n")
    donor = Workspace(root, state_dir=tmp_path / "donor")
    TagCache(donor).collect()
    cache = json.loads((donor.state_dir / CACHE_NAME).read_text())
    cache["files"]["util.py"][2][0][0][1] = "planted_name"  # a tag cache a repository could commit, still current
    (root / ".warpcode").mkdir()
    (root / ".warpcode" / CACHE_NAME).write_text(json.dumps(cache))
    tags = TagCache(Workspace(root)).collect()
    assert [d.name for d in tags["util.py"].definitions] == ["format_rows"]


def test_a_state_dir_wider_than_0700_is_tightened(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    (root / "a.txt").write_text("x\n")
    Checkpoints(Workspace(root, state_dir=state)).create()
    assert mode(state) == 0o700


def test_a_symlinked_state_dir_is_refused(root: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(target)
    (root / "a.txt").write_text("x\n")
    with pytest.raises(CheckpointError, match=r"state.* is a symlink.*remove the link"):
        Checkpoints(Workspace(root, state_dir=tmp_path / "state")).create()
    assert list(target.iterdir()) == []


def test_a_state_dir_of_another_user_is_refused(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: state.stat().st_uid + 1)  # as if another user had made it
    (root / "a.txt").write_text("x\n")
    with pytest.raises(CheckpointError, match=r"state.* belongs to another user"):
        Checkpoints(Workspace(root, state_dir=state)).create()
    assert list(state.iterdir()) == []


def test_a_file_where_the_state_dir_belongs_is_refused(root: Path, tmp_path: Path) -> None:
    (tmp_path / "state").write_text("mine\n")
    (root / "a.txt").write_text("x\n")
    with pytest.raises(CheckpointError, match=r"state.* is not a directory"):
        Checkpoints(Workspace(root, state_dir=tmp_path / "state")).create()
    assert (tmp_path / "state").read_text() == "mine\n"


def test_a_symlinked_gitignore_is_not_followed(ws: Workspace, root: Path) -> None:
    """Like git (2.32 and later), which opens in-tree .gitignore files without following symlinks: a
    repository could otherwise point one at /dev/zero or a FIFO and hang every listing."""
    (root / "patterns.txt").write_text("a.txt\n")
    (root / ".gitignore").symlink_to("patterns.txt")
    (root / "a.txt").write_text("x\n")
    assert list_files(ws).files == [".gitignore", "a.txt", "patterns.txt"]
