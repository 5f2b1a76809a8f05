"""warpcode.tools: the agent's hands (workspace, files, search, edits, patches, tests, checkpoints, code map).

Knows nothing of models or protocols, and never imports torch.
"""

from warpcode.tools.checkpoints import Checkpoint, Checkpoints, RestoreResult
from warpcode.tools.codemap import Outline, code_outline
from warpcode.tools.commands import run_command, run_command_async
from warpcode.tools.edit import EditResult, edit_file
from warpcode.tools.errors import (
    AmbiguousEdit,
    BinaryFile,
    CheckpointError,
    CommandCancelled,
    CommandTimeout,
    EditNotFound,
    FileExists,
    FileNotFound,
    FileTooLarge,
    GrammarUnavailable,
    InvalidArgument,
    NotAFile,
    PatchError,
    PathChanged,
    PathOutsideWorkspace,
    ProtectedPath,
    SpecialFile,
    StaleFile,
    ToolError,
    UnsupportedLanguage,
)
from warpcode.tools.files import FileList, FileView, WriteResult, list_files, read_file, write_file
from warpcode.tools.patch import FileChange, PatchResult, apply_patch
from warpcode.tools.patch_journal import recover_interrupted_patch
from warpcode.tools.process import CommandResult
from warpcode.tools.repomap import RepoMap, repo_map
from warpcode.tools.search import SearchMatch, SearchResult, search
from warpcode.tools.tags import Definition
from warpcode.tools.tests_report import TestFailure
from warpcode.tools.tests_runner import TestReport, detect_runner, run_tests
from warpcode.tools.workspace import Workspace

__all__ = [
    "AmbiguousEdit",
    "BinaryFile",
    "Checkpoint",
    "CheckpointError",
    "Checkpoints",
    "CommandCancelled",
    "CommandResult",
    "CommandTimeout",
    "Definition",
    "EditNotFound",
    "EditResult",
    "FileChange",
    "FileExists",
    "FileList",
    "FileNotFound",
    "FileTooLarge",
    "FileView",
    "GrammarUnavailable",
    "InvalidArgument",
    "NotAFile",
    "Outline",
    "PatchError",
    "PatchResult",
    "PathChanged",
    "PathOutsideWorkspace",
    "ProtectedPath",
    "RepoMap",
    "RestoreResult",
    "SearchMatch",
    "SearchResult",
    "SpecialFile",
    "StaleFile",
    "TestFailure",
    "TestReport",
    "ToolError",
    "UnsupportedLanguage",
    "Workspace",
    "WriteResult",
    "apply_patch",
    "code_outline",
    "detect_runner",
    "edit_file",
    "list_files",
    "read_file",
    "recover_interrupted_patch",
    "repo_map",
    "run_command",
    "run_command_async",
    "run_tests",
    "search",
    "write_file",
]
