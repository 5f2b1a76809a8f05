"""The VS Code extension needs Node.js 20.19 or later to build and test (Debian 12's apt has 18): package.json says
so in `engines`, where npm warns about an older Node before anything else fails. The reference is what its locked
dependencies declare (package-lock.json records each package's `engines`): the declared minimum is the oldest
Node every one of them accepts (vsce, undici and markdown-it's entities ask for 20 and later)."""

from __future__ import annotations

import json
import re
from pathlib import Path

EDITOR = Path(__file__).resolve().parents[1] / "editors" / "vscode"
Version = tuple[int, int, int]


def _version(text: str) -> tuple[Version, int]:
    """A version and how many of its parts were given (`20` -> ((20, 0, 0), 1))."""
    parts = [int(part) for part in text.split(".") if part.isdigit()]
    return (*parts, 0, 0, 0)[:3], len(parts)  # type: ignore[return-value]


def _meets(version: Version, comparator: str) -> bool:
    """One npm semver comparator (the forms package-lock.json's engines use: *, >=, <=, >, <, ^, a partial
    version)."""
    if comparator in ("*", ""):
        return True
    operator, number = re.fullmatch(r"([<>]=?|\^|=)?v?([\d.]+)", comparator).groups()  # type: ignore[union-attr]
    bound, given = _version(number)
    if operator in (None, "="):  # `20` is 20.x.x
        return version[:given] == bound[:given]
    if operator == "^":  # same major (same minor below 1.0)
        return version >= bound and version[:1] == bound[:1]
    return {">=": version >= bound, "<=": version <= bound, ">": version > bound, "<": version < bound}[operator]


def accepts(node_range: str, version: Version) -> bool:
    node_range = re.sub(r"([<>=^~]+)\s+", r"\1", node_range)  # ">= 20" is ">=20"
    return any(all(_meets(version, c) for c in alternative.split()) for alternative in node_range.split("||"))


def test_the_extension_declares_the_oldest_node_all_its_dependencies_accept() -> None:
    package = json.loads((EDITOR / "package.json").read_text())
    lock = json.loads((EDITOR / "package-lock.json").read_text())
    assert lock["packages"][""]["engines"] == package["engines"]  # `npm ci` reads the lock file's copy
    declared = re.fullmatch(r">=(\d+\.\d+\.\d+)", package["engines"]["node"])
    assert declared, package["engines"]
    ranges = {name: entry["engines"]["node"] for name, entry in lock["packages"].items()
              if name and isinstance(entry.get("engines"), dict) and "node" in entry["engines"]}  # fmt: skip
    candidates = sorted({_version(v)[0] for r in ranges.values() for v in re.findall(r"\d+(?:\.\d+)*", r)})
    oldest = next(v for v in candidates if v >= (20, 0, 0) and all(accepts(r, v) for r in ranges.values()))
    assert _version(declared.group(1))[0] == oldest, [name for name, r in ranges.items() if not accepts(r, oldest)]
    assert not accepts(">=20.19.0", (18, 19, 0)) and accepts("18 || 20 || >=22", (20, 19, 0))
    assert not accepts("20 || >=22", (21, 0, 0)) and accepts("^16.14.0 || >=18.0.0", (20, 19, 0))
