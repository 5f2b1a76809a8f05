"""Real commits of public repositories (tests/fixtures/patch_corpus/*.json, recorded by
bench/patch_corpus.py --save): the files a commit touches as its parent has them, `git diff --binary
--full-index -M parent commit`, and the files as the commit has them (what `git apply` made of the same diff).
apply_patch must make exactly the commit's files; the same diffs rewritten as models write them (no line
numbers, context unindented) must make them too, or be refused: never another text."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from warpcode.tools import PatchError, Workspace, apply_patch

CORPUS = Path(__file__).parent.parent / "fixtures" / "patch_corpus"
CASES = [
    pytest.param(case, id=f"{path.stem}-{case['commit'][:10]}")
    for path in sorted(CORPUS.glob("*.json"))
    for case in json.loads(path.read_text())["cases"]
]
HUNK_HEADER = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.M)


def _bytes(entry: dict) -> bytes:
    return entry["text"].encode() if "text" in entry else base64.b64decode(entry["base64"])


def _write(root: Path, files: dict) -> None:
    for rel, entry in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(_bytes(entry))
        (root / rel).chmod(0o755 if entry["executable"] else 0o644)


def _tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    found = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".warpcode"]
        for name in names:
            path = Path(directory, name)
            found[path.relative_to(root).as_posix()] = (path.read_bytes(), bool(path.stat().st_mode & 0o100))
    return found


def _expected(files: dict) -> dict[str, tuple[bytes, bool]]:
    return {rel: (_bytes(entry), entry["executable"]) for rel, entry in files.items()}


def test_the_corpus_covers_the_hard_classes() -> None:
    classes = {name for param in CASES for name in param.values[0]["classes"]}
    assert {"binary", "rename", "quoted name", "CRLF", "no newline at end", "mode change"} <= classes


@pytest.mark.parametrize("case", CASES)
def test_real_commit_applies_as_git_applies_it(root: Path, case: dict) -> None:
    _write(root, case["before"])
    apply_patch(Workspace(root), _bytes(case["diff"]).decode("utf-8", "surrogateescape"))
    assert _tree(root) == _expected(case["after"])


@pytest.mark.parametrize("case", [c for c in CASES if not {"binary", "rename"} & set(c.values[0]["classes"])])
def test_model_style_rewrites_apply_right_or_are_refused(root: Path, case: dict) -> None:
    diff = _bytes(case["diff"]).decode("utf-8", "surrogateescape")
    rewrites = {
        "bare": HUNK_HEADER.sub("@@", diff),
        "zeros": HUNK_HEADER.sub("@@ -0,0 +0,0 @@", diff),
        "unindented": re.sub(r"(?m)^ [ \t]+", " ", diff),
    }
    for name, rewritten in rewrites.items():
        shutil.rmtree(root)
        root.mkdir()
        _write(root, case["before"])
        try:
            apply_patch(Workspace(root), rewritten)
        except PatchError:
            assert _tree(root) == _expected(case["before"]), name
            continue
        assert _tree(root) == _expected(case["after"]), name
