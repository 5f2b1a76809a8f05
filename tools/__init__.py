"""warpcode.tools: the agent's hands (workspace, files, search, edits, patches, tests, checkpoints, code map).

Knows nothing of models or protocols, and never imports torch. Its names load on first use (PEP 562), so that
importing one module (the command line's error types, the sandbox settings) does not pull in git, RE2 and
tree-sitter: a GPU machine running `warpcode bench` has none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

# Exported name -> the module of warpcode.tools defining it. No name may be a module's too: importing a submodule
# sets the package's attribute of that name, which would then hide the lazily loaded function.
_HOME = {
    "AmbiguousEdit": "errors",
    "BinaryFile": "errors",
    "Checkpoint": "checkpoints",
    "CheckpointError": "errors",
    "Checkpoints": "checkpoints",
    "CommandCancelled": "errors",
    "CommandResult": "process",
    "CommandTimeout": "errors",
    "Definition": "tags",
    "EditNotFound": "errors",
    "EditResult": "edit",
    "FailedTest": "tests_report",
    "FileChange": "patch",
    "FileExists": "errors",
    "FileList": "files",
    "FileNotFound": "errors",
    "FileTooLarge": "errors",
    "FileView": "files",
    "GrammarUnavailable": "errors",
    "InvalidArgument": "errors",
    "NotAFile": "errors",
    "Outline": "codemap",
    "PatchError": "errors",
    "PatchResult": "patch",
    "PathChanged": "errors",
    "PathOutsideWorkspace": "errors",
    "ProtectedPath": "errors",
    "RepoMap": "repomap",
    "RestoreResult": "checkpoints",
    "SearchMatch": "text_search",
    "SearchResult": "text_search",
    "SpecialFile": "errors",
    "StaleFile": "errors",
    "TestReport": "tests_runner",
    "ToolError": "errors",
    "UnsupportedLanguage": "errors",
    "Workspace": "workspace",
    "WriteResult": "files",
    "apply_patch": "patch",
    "code_outline": "codemap",
    "detect_runner": "tests_runner",
    "edit_file": "edit",
    "list_files": "files",
    "read_file": "files",
    "recover_interrupted_patch": "patch_journal",
    "repo_map": "repomap",
    "run_command": "commands",
    "run_command_async": "commands",
    "run_tests": "tests_runner",
    "search": "text_search",
    "write_file": "files",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'warpcode.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"warpcode.tools.{module}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return __all__
