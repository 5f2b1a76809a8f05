"""The pre-training corpus: the Python sources of the permissively licensed packages installed in site-packages
folders, split by package into training and held-out code, and packed into one token stream per split.

What a package's licence is comes from its own dist-info metadata, read as a packaging tool reads it: the SPDX
`License-Expression` when there is one (PEP 639), else its licence classifiers, else the free-text `License`
field. A package is taken only when every licence that applies is permissive (MIT, BSD, Apache-2.0, PSF and their
kin); one that says nothing, or names a copyleft licence (GPL, LGPL, MPL, ...), is left out and listed as such.

A package's files are the `.py` files its RECORD lists (what pip installed for it, so namespace packages and
top-level modules count too), less vendored copies of other projects (`_vendor/`: their licence is not the
package's). Identical files are kept once, and never on both sides of the split: a file also in held-out code is
dropped from training.

The split is by whole package, decided by a hash of the package's name: held-out code is code the model never saw
a line of, whichever machine runs this, and the same packages are held out wherever they are installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# SPDX identifiers of licences that let code be used for training and the model shipped, with attribution at most.
PERMISSIVE_SPDX = {
    "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "Apache-2.0", "PSF-2.0", "Python-2.0", "CNRI-Python",
    "ISC", "Zlib", "BSL-1.0", "MIT-CMU", "HPND", "CC0-1.0", "Unlicense",
}  # fmt: skip
PERMISSIVE_EXCEPTIONS = {"LLVM-exception"}  # `Apache-2.0 WITH LLVM-exception` only grants more
# Trove classifiers (after "License :: ") of the same licences
PERMISSIVE_CLASSIFIERS = {
    "OSI Approved :: MIT License", "OSI Approved :: MIT No Attribution License (MIT-0)", "OSI Approved :: BSD License",
    "OSI Approved :: Apache Software License", "OSI Approved :: Python Software Foundation License",
    "OSI Approved :: ISC License (ISCL)", "OSI Approved :: zlib/libpng License",
    "OSI Approved :: The Unlicense (Unlicense)", "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication",
    "Public Domain",
}  # fmt: skip
# Free-text `License:` fields name licences loosely ("BSD", "Apache 2.0", "3-Clause BSD License"): words that
# settle it one way or the other (a copyleft word anywhere rules the package out).
_COPYLEFT_WORDS = re.compile(r"\b(A?GPL|LGPL|MPL|Mozilla|EUPL|CDDL|EPL|SSPL|Commercial|Proprietary)\b", re.I)
_PERMISSIVE_WORDS = re.compile(r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC)\b", re.I)

HELD_OUT_PERCENT = 5  # of packages, by name hash
VENDORED = re.compile(r"(^|/)_?vendor(ed)?/")
MAX_FILE_BYTES = 1_000_000  # larger .py files are generated tables, not code anyone wrote
TOKEN_DTYPE = np.uint16  # every vocabulary this package trains has fewer than 65,536 tokens


@dataclass(frozen=True)
class Package:
    name: str  # normalised (PEP 503)
    version: str
    license: str  # what the metadata says, as read
    permissive: bool
    files: tuple[Path, ...]  # its .py files, sorted

    @property
    def split(self) -> str:
        return "heldout" if is_held_out(self.name) else "train"


def is_held_out(name: str) -> bool:
    digest = hashlib.sha256(f"warpcode-heldout:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 < HELD_OUT_PERCENT


def find_packages(site_packages: Iterable[Path]) -> list[Package]:
    """Every distribution installed in the folders, sorted by name (the first folder wins a name found twice)."""
    found: dict[str, Package] = {}
    for folder in site_packages:
        for dist in importlib.metadata.distributions(path=[str(folder)]):
            name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
            if not name or name in found:
                continue
            license_text, permissive = license_of(dist.metadata)
            files = sorted(
                Path(str(dist.locate_file(f)))
                for f in dist.files or []
                if f.suffix == ".py" and ".." not in f.parts and not VENDORED.search(f.as_posix())
            )
            found[name] = Package(name, dist.version, license_text, permissive, tuple(files))
    return [found[name] for name in sorted(found)]


def license_of(metadata) -> tuple[str, bool]:
    """(the licence as the metadata states it, whether it is permissive)."""
    expression = (metadata.get("License-Expression") or "").strip()
    if expression:
        try:
            return expression, spdx_permissive(expression)
        except ValueError:  # an identifier of its own (LicenseRef-...): not one known to be permissive
            return expression, False
    classifiers = [
        c.removeprefix("License :: ") for c in metadata.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    if classifiers:
        return "; ".join(classifiers), all(c in PERMISSIVE_CLASSIFIERS for c in classifiers)
    text = (metadata.get("License") or "").strip()
    first_line = text.splitlines()[0].strip() if text else ""
    if not first_line:
        return "(none stated)", False
    try:
        return first_line, spdx_permissive(first_line)
    except ValueError:  # not an SPDX expression: read the words
        return first_line, not _COPYLEFT_WORDS.search(text) and bool(_PERMISSIVE_WORDS.search(first_line))


def spdx_permissive(expression: str) -> bool:
    """Whether an SPDX licence expression leaves only permissive terms: OR takes either side, AND needs both, WITH
    an exception that only grants more. ValueError when it is no SPDX expression of known identifiers."""
    tokens = re.findall(r"\(|\)|[^\s()]+", expression)
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise ValueError(f"incomplete licence expression {expression!r}")
        position += 1
        return tokens[position - 1]

    def term() -> bool:
        token = take()
        if token == "(":
            value = either()
            if take() != ")":
                raise ValueError(f"unbalanced licence expression {expression!r}")
            return value
        identifier = token.removesuffix("+")
        if identifier.upper() in ("AND", "OR", "WITH", ")"):
            raise ValueError(f"malformed licence expression {expression!r}")
        known = identifier in PERMISSIVE_SPDX or identifier in _SPDX_NOT_PERMISSIVE
        if not known:
            raise ValueError(f"unknown licence identifier {identifier!r}")
        value = identifier in PERMISSIVE_SPDX
        if (peek() or "").upper() == "WITH":
            take()
            value = value and take() in PERMISSIVE_EXCEPTIONS
        return value

    def both() -> bool:
        value = term()
        while (peek() or "").upper() == "AND":
            take()
            value = term() and value
        return value

    def either() -> bool:
        value = both()
        while (peek() or "").upper() == "OR":
            take()
            value = both() or value
        return value

    value = either()
    if position != len(tokens):
        raise ValueError(f"malformed licence expression {expression!r}")
    return value


# Identifiers recognised as SPDX but not permissive (anything else unknown makes the expression free text).
_SPDX_NOT_PERMISSIVE = {
    "GPL-2.0", "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0", "GPL-3.0-only", "GPL-3.0-or-later", "LGPL-2.1",
    "LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0", "LGPL-3.0-only", "LGPL-3.0-or-later", "AGPL-3.0",
    "AGPL-3.0-only", "AGPL-3.0-or-later", "MPL-2.0", "EPL-2.0", "EUPL-1.2", "CDDL-1.0", "LicenseRef-Proprietary",
}  # fmt: skip


def read_source(path: Path) -> str | None:
    """The file's text, or None for one that is not code to learn from (too large, not UTF-8, empty)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


@dataclass
class Split:
    train: list[str]
    heldout: list[str]


def split_documents(packages: Iterable[Package]) -> Split:
    """The permissive packages' files as documents, each text once: held-out packages' files first claim their
    texts, so no held-out text reaches training through a copy in another package."""
    permissive = [p for p in packages if p.permissive]
    heldout = _unique(p.files for p in permissive if p.split == "heldout")
    seen = {_digest(text) for text in heldout}
    train = _unique((p.files for p in permissive if p.split == "train"), seen)
    return Split(_ordered(train), _ordered(heldout))


def _unique(file_lists: Iterable[tuple[Path, ...]], seen: set[bytes] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    texts = []
    for files in file_lists:
        for path in files:
            text = read_source(path)
            if text is not None and (digest := _digest(text)) not in seen:
                seen.add(digest)
                texts.append(text)
    return texts


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _ordered(texts: list[str]) -> list[str]:
    """A fixed order that mixes packages (by content hash): any prefix of the stream is a sample of all of it."""
    return sorted(texts, key=_digest)


def pack_tokens(encodings: Iterator[list[int]], separator: int, path: Path) -> int:
    """Writes the documents' token ids to `path` as one stream, each document followed by `separator` (the
    end-of-text token); returns the token count. Training reads fixed-length windows of it (TokenWindows)."""
    count = 0
    with path.open("wb") as out:
        for ids in encodings:
            ids.append(separator)
            out.write(np.asarray(ids, dtype=TOKEN_DTYPE).tobytes())
            count += len(ids)
    return count


class TokenWindows:
    """A packed token stream as windows of `length + 1` tokens (inputs and their next tokens), the stream cut at
    multiples of `length`: windows may span documents, which the end-of-text token separates."""

    def __init__(self, path: Path, length: int):
        self.tokens = np.memmap(path, dtype=TOKEN_DTYPE, mode="r")
        self.length = length
        if len(self.tokens) <= length:
            raise ValueError(f"{path} holds {len(self.tokens)} tokens, fewer than one window of {length + 1}")

    def __len__(self) -> int:
        return (len(self.tokens) - 1) // self.length

    def window(self, index: int) -> np.ndarray:
        start = index * self.length
        return np.asarray(self.tokens[start : start + self.length + 1], dtype=np.int64)
