"""Typed failures of the tools layer.

Every message is written for a model reading it as a tool result: it says what went wrong and what to do next.
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """Base of every failure a tool reports; `str(error)` is the message to show the model."""


class InvalidArgument(ToolError):
    """An argument has the wrong value (bad regex, bad line range, empty command...)."""


class PathOutsideWorkspace(ToolError):
    def __init__(self, path: str, root: str, how: str = "") -> None:
        via = f" ({how})" if how else ""
        super().__init__(
            f"Path {path!r} resolves outside the workspace {root}{via}. "
            "Use a path relative to the workspace root that stays inside it."
        )
        self.path = path


class ProtectedPath(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(f"Path {path!r} is inside .git or .warpcode, which tools never modify. Choose another path.")
        self.path = path


class FileNotFound(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"File {path!r} does not exist. Check the path with list_files or search; "
            "to create a file use write_file (or edit_file with an empty old_text)."
        )
        self.path = path


class NotAFile(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} is a directory, not a file. Use list_files to see what it contains.")
        self.path = path


class SpecialFile(NotAFile):
    """A FIFO, socket or device: refused before reading, since reading one can block forever."""

    def __init__(self, path: str, kind: str) -> None:
        ToolError.__init__(self, f"{path!r} is {kind}, not a regular file; tools only read and write regular files.")
        self.path = path


class PathChanged(ToolError):
    """A directory or file on the path was replaced (by a symlink, say) between the check and the open."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path!r} changed while it was being opened (a directory or file on its path was replaced); try again."
        )
        self.path = path


class StaleFile(ToolError):
    """A write tool refused to overwrite a file whose content differs from what the agent last read or wrote."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path!r} changed on disk since you last read it (edited by the user or another program): "
            "read it again, then redo the edit."
        )
        self.path = path


class BinaryFile(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} is a binary file; text tools cannot read or edit it. Leave it as it is.")
        self.path = path


class FileTooLarge(ToolError):
    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"{path!r} has {size} bytes, over the limit of {limit} bytes for this operation.")
        self.path = path


class FileExists(ToolError):
    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path!r} already exists; {what}")
        self.path = path


class EditNotFound(ToolError):
    def __init__(self, path: str, candidates: str) -> None:
        hint = f" The closest lines in the file are:\n{candidates}" if candidates else ""
        super().__init__(
            f"old_text was not found in {path!r}, not even ignoring whitespace and indentation.{hint}\n"
            "Read the file again (read_file) and copy old_text exactly from it."
        )
        self.path = path


class AmbiguousEdit(ToolError):
    def __init__(self, path: str, lines: list[int]) -> None:
        where = ", ".join(str(n) for n in lines[:20])
        super().__init__(
            f"old_text matches {len(lines)} places in {path!r} (starting at lines {where}). "
            "Add surrounding lines to old_text so it matches exactly one place, or set replace_all to true."
        )
        self.path = path
        self.lines = lines


class PatchError(ToolError):
    """A patch that cannot be applied; nothing was written. `file` and `hunk` (1-based) say where it failed."""

    def __init__(self, reason: str, file: str | None = None, hunk: int | None = None, header: str = "") -> None:
        where = ""
        if file:
            where = f"{file}: "
            if hunk is not None:
                where = f"{file}, hunk {hunk}{' ' + header if header else ''}: "
        super().__init__(f"Patch not applied, no file was changed. {where}{reason}")
        self.file = file
        self.hunk = hunk
        self.reason = reason


class CommandTimeout(ToolError):
    """The command ran past its time limit; its process group was killed. `result` holds the output so far."""

    def __init__(self, result: Any) -> None:
        super().__init__(
            f"Command timed out after {result.timeout_s:g} s and was killed with its whole process group. "
            "Run something quicker (fewer tests, a narrower command) or raise timeout_s.\n"
            f"Output before the kill:\n{result.output}"
        )
        self.result = result


class CommandCancelled(ToolError):
    """The command was cancelled; its process group was killed. `result` holds the output so far."""

    def __init__(self, result: Any) -> None:
        super().__init__(
            f"Command was cancelled and its process group killed.\nOutput before the kill:\n{result.output}"
        )
        self.result = result


class CheckpointError(ToolError):
    """A checkpoint operation failed (unknown checkpoint id, git failure)."""


class GrammarUnavailable(ToolError):
    def __init__(self, language: str, reason: str) -> None:
        super().__init__(
            f"The tree-sitter grammar for {language} could not be loaded ({reason}); code_outline and repo_map "
            "cannot parse it. Use read_file and search instead."
        )
        self.language = language


class UnsupportedLanguage(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"No code outline for {path!r}: its language is not supported "
            "(Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++ are). Use read_file instead."
        )
        self.path = path
