"""Binary hunks of `git diff --binary`, applied as git applies them (git's base85.c, apply.c, patch-delta.c).

A hunk is "literal N" (the new content) or "delta N" (instructions that build the new content from the old),
deflated with zlib, then written in git's base85: each line starts with a letter giving its byte count
(A-Z: 1-26, a-z: 27-52), then 5 characters for every 4 bytes. The "index" line's blob ids check both ends:
the old content must be the blob the patch was made against, and the result the blob it announces.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass

from warpcode.tools.errors import PatchError

COPY_DEFAULT_SIZE = 0x10000  # a copy instruction with no size bytes copies 64 KiB


@dataclass
class BinaryHunk:
    """One hunk after "GIT binary patch" (patch_parse reads it out of the diff; this module applies it)."""

    kind: str  # "literal": the whole new content; "delta": copy/insert instructions against the old content
    size: int  # the inflated size the header announces
    data: bytes  # base85-decoded, still deflated


def decode_base85_line(line: str, shown: str) -> bytes:
    """The bytes of one base85 line; a corrupt line (wrong length, a character outside the alphabet, a group
    over 2**32) is refused, as git refuses it. git's alphabet is RFC 1924's, which base64.b85decode reads."""
    size_char = line[:1]
    if "A" <= size_char <= "Z":
        size = ord(size_char) - ord("A") + 1
    elif "a" <= size_char <= "z":
        size = ord(size_char) - ord("a") + 27
    else:
        raise PatchError(f"corrupt binary patch line {line[:20]!r}: it must start with a length letter.", shown)
    body = line[1:]
    if len(body) != (size + 3) // 4 * 5:
        raise PatchError(f"corrupt binary patch line {line[:20]!r}: its length does not match its letter.", shown)
    try:
        return base64.b85decode(body)[:size]
    except ValueError:
        raise PatchError(f"corrupt binary patch line {line[:20]!r}: it is not base85.", shown) from None


def apply_binary(hunk: BinaryHunk, old: bytes, old_oid: str | None, new_oid: str | None, shown: str) -> bytes:
    """The new content; `old` is b"" for a created file. Refused unless the blob ids of the index line match."""
    if not old_oid or not new_oid:
        raise PatchError("a binary patch needs its 'index' line; regenerate it with git diff --binary.", shown)
    if not _is_blob(old, old_oid):
        raise PatchError(
            f"the binary patch was made for another version of this file (blob {old_oid[:12]}); "
            "read the file again and regenerate the patch from its current content.",
            shown,
        )
    try:
        data = zlib.decompress(hunk.data)
    except zlib.error as exc:
        raise PatchError(f"corrupt binary patch: its data does not inflate ({exc}).", shown) from None
    if len(data) != hunk.size:
        raise PatchError(f"corrupt binary patch: {len(data)} bytes inflated where {hunk.size} were announced.", shown)
    new = data if hunk.kind == "literal" else apply_delta(old, data, shown)
    if not _is_blob(new, new_oid):
        raise PatchError(f"the binary patch does not produce blob {new_oid[:12]}; regenerate the patch.", shown)
    return new


def apply_delta(source: bytes, delta: bytes, shown: str) -> bytes:
    """git's delta format: the source and target sizes (little-endian base-128 varints), then instructions:
    a byte with its high bit set copies a range of the source (its low 4 bits say which offset bytes follow,
    the next 3 which size bytes); any other non-zero byte inserts that many literal bytes that follow it."""
    source_size, position = _varint(delta, 0, shown)
    target_size, position = _varint(delta, position, shown)
    if source_size != len(source):
        raise PatchError(
            f"the binary delta expects {source_size} bytes of old content, the file has {len(source)}.", shown
        )
    out = bytearray()
    while position < len(delta):
        command = delta[position]
        position += 1
        if command & 0x80:
            offset = size = 0
            for bit in range(7):
                if command & (1 << bit):
                    if position >= len(delta):
                        raise PatchError("corrupt binary delta: a copy instruction is cut short.", shown)
                    value = delta[position] << (8 * (bit if bit < 4 else bit - 4))
                    offset, size = (offset | value, size) if bit < 4 else (offset, size | value)
                    position += 1
            size = size or COPY_DEFAULT_SIZE
            if offset + size > len(source) or len(out) + size > target_size:
                raise PatchError("corrupt binary delta: a copy reaches past the old content or the new size.", shown)
            out += source[offset : offset + size]
        elif command:
            if position + command > len(delta) or len(out) + command > target_size:
                raise PatchError("corrupt binary delta: an insert reaches past the delta or the new size.", shown)
            out += delta[position : position + command]
            position += command
        else:
            raise PatchError("corrupt binary delta: instruction 0 is reserved.", shown)
    if len(out) != target_size:
        raise PatchError(f"corrupt binary delta: {len(out)} bytes built where {target_size} were announced.", shown)
    return bytes(out)


def _varint(data: bytes, position: int, shown: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise PatchError("corrupt binary delta: its header is cut short.", shown)
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _is_blob(data: bytes, oid: str) -> bool:
    """Does `data` hash to the (possibly abbreviated) git blob id `oid`? Ids of all zeros name no content."""
    if set(oid) == {"0"}:
        return not data
    digest = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    return digest(b"blob %d\0" % len(data) + data).hexdigest().startswith(oid)
