"""Valid `git diff` output that apply_patch must apply as `git apply` does: names git quotes, binary hunks
(literal and delta), renames and mode changes of binary files, a file replaced by a directory and the reverse.
Each case is made by real git and applied both by apply_patch and by `git apply` on copies of the same tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch, patch_journal, recover_interrupted_patch
from warpcode.tools.binary_patch import apply_delta, decode_base85_line

from .hostile import temp_files
from .real_git import GIT_ENV, git

Files = dict[str, bytes]


def _tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    found = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".warpcode")]
        for name in names:
            path = Path(directory, name)
            found[path.relative_to(root).as_posix()] = (path.read_bytes(), bool(path.stat().st_mode & 0o100))
    return found


def _diff_of(root: Path, before: Files, change: Callable[[Path], None], *diff_args: str) -> str:
    """`git diff --binary -M` of `change` applied to a repository holding `before`; the work tree is put back."""
    for rel, data in before.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "before")
    change(root)
    git(root, "add", "-A")
    patch = subprocess.run(
        ["git", *diff_args, "diff", "--cached", "--binary", "-M"], cwd=root, env={**os.environ, **GIT_ENV},
        capture_output=True, check=True,
    ).stdout.decode("utf-8", "surrogateescape")  # fmt: skip
    return patch


def _apply_both(root: Path, tmp_path: Path, patch: str) -> dict[str, tuple[bytes, bool]]:
    """The tree after the patch, checked to be the tree `git apply` makes and the tree git committed."""
    expected = _tree(root)
    git(root, "reset", "-q", "--hard", "HEAD")
    git(root, "clean", "-qfd")
    reference = tmp_path / "reference"
    shutil.copytree(root, reference, ignore=shutil.ignore_patterns(".git"))
    subprocess.run(["git", "apply", "--binary", "-"], cwd=reference, input=patch.encode("utf-8", "surrogateescape"),
                   env={**os.environ, **GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path)}, check=True)  # fmt: skip
    apply_patch(Workspace(root), patch)
    assert _tree(reference) == expected  # the reference itself
    assert _tree(root) == expected
    return expected


NAMES = ["café/résumé.md", 'say "hi".txt', "back\\slash.txt", "with space.txt", "tab\there.txt", "日本語 メモ.md"]


@pytest.mark.parametrize("quote_path", ["true", "false"])
@pytest.mark.parametrize("name", NAMES)
def test_names_git_quotes_are_renamed_modified_and_created(root: Path, tmp_path: Path, name: str, quote_path: str):
    base = name.split("/")[-1]

    def change(repo: Path) -> None:
        (repo / name).rename(repo / f"renamed {base}")
        (repo / f"renamed {base}").write_bytes(b"one\ntwo\nTHREE\nfour\nfive\nsix\n")
        (repo / "moved").mkdir()
        (repo / "pure" / name).rename(repo / "moved" / base)  # a pure rename: only "rename from/to" name it
        (repo / "new" / name).parent.mkdir(parents=True)
        (repo / "new" / name).write_bytes(b"fresh\n")

    before = {name: b"one\ntwo\nthree\nfour\nfive\nsix\n", f"pure/{name}": b"same\n"}
    patch = _diff_of(root, before, change, "-c", f"core.quotePath={quote_path}")
    assert f"rename to moved/{base}" in patch or 'rename to "moved/' in patch
    _apply_both(root, tmp_path, patch)


def test_a_name_with_a_quote_written_unquoted_is_a_tool_error(root: Path) -> None:
    (root / 'a"b.txt').write_text("x\n")
    patch = 'diff --git "a/a"b.txt" "b/a"b.txt"\n--- "a/a"b.txt"\n+++ "b/a"b.txt"\n@@ -1 +1 @@\n-x\n+y\n'
    with pytest.raises(PatchError, match="quoted"):
        apply_patch(Workspace(root), patch)
    assert (root / 'a"b.txt').read_text() == "x\n"


PNG = bytes(range(256)) * 40 + b"\x89PNG\r\n\x1a\n\0\0"


def test_binary_literal_and_delta_hunks_apply_as_git_applies_them(root: Path, tmp_path: Path) -> None:
    def change(repo: Path) -> None:
        (repo / "img" / "logo.png").write_bytes(PNG[:5000] + b"edited" + PNG[5000:])  # small change: a delta
        (repo / "img" / "new.bin").write_bytes(os.urandom(3000))  # a literal
        (repo / "img" / "gone.bin").unlink()  # deleted: literal 0
        (repo / "doc.txt").write_bytes(b"text\nchanged\n")

    patch = _diff_of(root, {"img/logo.png": PNG, "img/gone.bin": b"\0\1\2" * 100, "doc.txt": b"text\n"}, change)
    assert "delta " in patch and "literal " in patch
    _apply_both(root, tmp_path, patch)


def test_binary_patch_for_other_content_changes_nothing(root: Path, tmp_path: Path) -> None:
    patch = _diff_of(root, {"a.bin": PNG, "b.txt": b"b\n"}, lambda repo: (
        (repo / "a.bin").write_bytes(PNG + b"more"), (repo / "b.txt").write_bytes(b"B\n")))  # fmt: skip
    git(root, "reset", "-q", "--hard", "HEAD")
    (root / "a.bin").write_bytes(PNG[::-1])
    with pytest.raises(PatchError, match="another version of this file"):
        apply_patch(Workspace(root), patch)
    assert (root / "a.bin").read_bytes() == PNG[::-1] and (root / "b.txt").read_bytes() == b"b\n"


def test_pure_rename_and_mode_change_of_a_binary_file(root: Path, tmp_path: Path) -> None:
    def change(repo: Path) -> None:
        (repo / "a.png").rename(repo / "pictures" / "a.png") if (repo / "pictures").mkdir() is None else None
        (repo / "tool.bin").chmod(0o755)

    patch = _diff_of(root, {"a.png": PNG, "tool.bin": PNG[:300]}, change)
    assert "rename from a.png" in patch and "new mode 100755" in patch and "GIT binary patch" not in patch
    _apply_both(root, tmp_path, patch)


def test_a_file_replaced_by_a_directory_of_the_same_name(root: Path, tmp_path: Path) -> None:
    def change(repo: Path) -> None:
        (repo / "docs").unlink()
        (repo / "docs" / "deep").mkdir(parents=True)
        (repo / "docs" / "deep" / "index.md").write_bytes(b"# Index\n")

    patch = _diff_of(root, {"docs": b"one file\n", "keep.txt": b"k\n"}, change)
    _apply_both(root, tmp_path, patch)


def test_a_directory_replaced_by_a_file_of_the_same_name(root: Path, tmp_path: Path) -> None:
    def change(repo: Path) -> None:
        shutil.rmtree(repo / "docs")
        (repo / "docs").write_bytes(b"now a file\n")

    patch = _diff_of(root, {"docs/a.md": b"a\n", "docs/sub/b.png": PNG[:100], "keep.txt": b"k\n"}, change)
    assert patch.index("+++ b/docs\n") < patch.index("--- a/docs/a.md")  # git writes the new file first
    _apply_both(root, tmp_path, patch)


def test_a_directory_still_holding_other_files_is_not_replaced(root: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("a\n")
    (root / "docs" / "untracked.md").write_text("mine\n")
    patch = (
        "diff --git a/docs b/docs\nnew file mode 100644\n--- /dev/null\n+++ b/docs\n@@ -0,0 +1 @@\n+file\n"
        "diff --git a/docs/a.md b/docs/a.md\ndeleted file mode 100644\n--- a/docs/a.md\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-a\n"
    )
    with pytest.raises(PatchError, match="docs"):
        apply_patch(Workspace(root), patch)
    assert (root / "docs" / "a.md").read_text() == "a\n" and (root / "docs" / "untracked.md").exists()


def test_binary_files_differ_without_content_is_refused_with_what_to_do(root: Path) -> None:
    (root / "a.png").write_bytes(PNG)
    patch = "diff --git a/a.png b/a.png\nindex 1234567..89abcde 100644\nBinary files a/a.png and b/a.png differ\n"
    with pytest.raises(PatchError, match="git diff --binary"):
        apply_patch(Workspace(root), patch)


def test_base85_and_delta_follow_git() -> None:
    # Lines and deltas as git's own test suite and base85.c define them: the length letter, 5 chars per 4 bytes.
    assert decode_base85_line("D" + "00000", "f") == b"\0\0\0\0"
    assert decode_base85_line("D" + "{{R30", "f") == b"\xff\0\0\0"
    assert decode_base85_line("A" + "{{R30", "f") == b"\xff"
    with pytest.raises(PatchError, match="length"):
        decode_base85_line("B00000000", "f")
    source = b"0123456789" * 10
    # copy 10 bytes at offset 5 (offset byte, size byte), insert 3 bytes, copy with no size bytes = 0x10000: refused
    delta = bytes([100, 13, 0x80 | 0x01 | 0x10, 5, 10, 3]) + b"abc"
    assert apply_delta(source, delta, "f") == source[5:15] + b"abc"
    with pytest.raises(PatchError, match="past"):
        apply_delta(source, bytes([100, 100, 0x80]), "f")


@pytest.mark.parametrize("swap", ["file to directory", "directory to file"])
def test_a_swap_interrupted_after_its_deletions_is_finished_by_recovery(root: Path, monkeypatch, swap: str) -> None:
    delete, create = ("docs", "docs/a.md") if swap == "file to directory" else ("docs/a.md", "docs")
    (root / delete).parent.mkdir(parents=True, exist_ok=True)
    (root / delete).write_text("old\n")
    patch = (
        f"diff --git a/{create} b/{create}\nnew file mode 100644\n--- /dev/null\n+++ b/{create}\n@@ -0,0 +1 @@\n+new\n"
        f"diff --git a/{delete} b/{delete}\ndeleted file mode 100644\n"
        f"--- a/{delete}\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"
    )

    def killed(*args):
        raise KeyboardInterrupt  # the process dies between the deletions and the renames

    monkeypatch.setattr(patch_journal, "_renames_between", killed)
    with pytest.raises(KeyboardInterrupt):
        apply_patch(Workspace(root), patch)
    assert not (root / delete).is_file()
    monkeypatch.undo()

    assert "Finished" in (recover_interrupted_patch(Workspace(root)) or "")
    assert (root / create).read_text() == "new\n"
    assert temp_files(root) == []
    assert recover_interrupted_patch(Workspace(root)) is None
