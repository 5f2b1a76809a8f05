"""A job id where it is not JSON: as a file and branch name, and as text on a terminal.

An id is any string. As a name (its trajectory file, its copy's folder, its `batch apply` branch) it stays as it
is when it is already a plain name: lower-case letters, digits, `_`, `-` and single inner dots, up to PLAIN_MAX
characters. Any other id becomes a readable stem (perhaps empty), `+`, and a hash of the exact id. No plain name
holds a `+`, so the two kinds never meet, and two ids never share a name, not even where case is folded (macOS's
and Windows' file systems, and so git's loose refs there): a plain name has no upper case, and two hashed names
differ in their hashes.
"""

from __future__ import annotations

import hashlib
import re

PLAIN_MAX = 80
STEM_MAX = 60
HASH_HEX = 32  # 128 bits: two ids with one name would take about 2**64 tries to find
_PLAIN = re.compile(r"[a-z0-9_][a-z0-9_-]*(?:\.[a-z0-9_-]+)*")


def name_for(job_id: str) -> str:
    """The id as a file name and as the end of a branch name (`git check-ref-format --branch` accepts it after a
    prefix): the id itself when it is plain, else a stem and a hash of the id."""
    if len(job_id) <= PLAIN_MAX and _PLAIN.fullmatch(job_id) and not job_id.endswith(".lock"):
        return job_id
    stem = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", job_id))[:STEM_MAX].strip(".-")
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]
    return f"{stem}+{digest}"


def shown(text: str) -> str:
    """The text as a terminal shows it literally: each character that is not printable (control characters such
    as ESC and newline, format characters such as bidi overrides) written as its Python escape, e.g. `\\x1b`."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
