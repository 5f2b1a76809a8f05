"""run_tests: find the project's test runner, run it like run_command, and report structured results."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from warpcode.tools import errors
from warpcode.tools.process import Executor, execute
from warpcode.tools.sandbox import Sandbox
from warpcode.tools.tests_report import (
    FailedTest,
    RunCounts,
    parse_cargo,
    parse_go,
    parse_js,
    parse_junit,
    parse_pytest_summary,
    parse_unittest,
)
from warpcode.tools.workspace import Workspace

DEFAULT_TEST_TIMEOUT_S = 600.0
PYTEST_MARKERS = ("pytest.ini", "conftest.py", "tox.ini", "setup.cfg", "setup.py", "pyproject.toml")
# Runners in watch or interactive mode wait forever; CI=true makes jest, vitest & co. run once and exit.
NON_INTERACTIVE_ENV = {"CI": "true", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass
class TestReport:
    __test__ = False  # not a pytest test class, despite its name
    runner: str
    command: str
    exit_code: int | None
    output: str
    duration_s: float
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[FailedTest] = field(default_factory=list)
    parsed: bool = False
    python: str | None = None  # for pytest: the interpreter that ran it, and where it was found

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.failed == 0 and self.errors == 0

    @property
    def ran(self) -> bool:
        """False when no test ran at all: the runner failed before collecting one (not installed, bad usage...)."""
        return self.exit_code == 0 or self.passed + self.failed + self.errors + self.skipped > 0

    def render(self) -> str:
        verdict = "" if self.ok else "FAILED: " if self.ran else "could not run the tests: "
        head = (
            f"{self.runner}: {verdict}{self.passed} passed, {self.failed} failed, {self.errors} errors, "
            f"{self.skipped} skipped (exit code {self.exit_code}, {self.duration_s:.1f} s)\n$ {self.command}"
        )
        if self.python:
            head += f"\nPython: {self.python}"
        body = [f"FAILED {failure.id}\n{failure.message}" for failure in self.failures]
        if not self.ran and (hint := _why_nothing_ran(self)):
            body.append(hint)
        if not self.parsed or (not self.ok and not self.failures):
            body.append(f"Output:\n{self.output}")
        return "\n\n".join([head, *body])


def _why_nothing_ran(report: TestReport) -> str | None:
    """What to do when the runner itself did not start: it is not installed, or found nothing to run."""
    missing_module = re.search(r"No module named '?pytest'?\b", report.output)
    if missing_module:
        python = shlex.split(report.command)[0] if report.command else sys.executable
        return (
            f"pytest is not installed for {python}: install it there (`{python} -m pip install pytest`), or pass the "
            f"command that runs this project's tests."
        )
    if report.exit_code == 127:  # the shell's "command not found"
        program = shlex.split(report.command)[0] if report.command else report.runner
        return f"`{program}` is not installed (or not on PATH): install it, or pass the command that runs the tests."
    if report.runner == "pytest" and report.exit_code == 5:
        return "pytest collected no tests: check the paths given, or the project's test file names (test_*.py)."
    return None


def detect_runner(root: Path) -> str:
    """'pytest', 'npm', 'yarn', 'pnpm', 'go' or 'cargo', from the files at the workspace root."""
    package_json = root / "package.json"
    if package_json.is_file():
        try:
            scripts = json.loads(package_json.read_text(encoding="utf-8")).get("scripts", {})
        except (ValueError, AttributeError):
            scripts = {}
        if "test" in scripts:
            if (root / "pnpm-lock.yaml").exists():
                return "pnpm"
            return "yarn" if (root / "yarn.lock").exists() else "npm"
    if (root / "go.mod").is_file():
        return "go"
    if (root / "Cargo.toml").is_file():
        return "cargo"
    if any((root / marker).is_file() for marker in PYTEST_MARKERS) or any(root.glob("test*/**/test_*.py")):
        return "pytest"
    if any(root.glob("test_*.py")):
        return "pytest"
    raise errors.InvalidArgument(
        "Could not detect a test runner (no pytest config, package.json test script, go.mod or Cargo.toml). "
        "Pass the test command explicitly."
    )


def _runner_of_command(command: str) -> str:
    words = shlex.split(command) if command else []
    for word in words:
        name = Path(word).name
        if name in ("pytest", "py.test") or word == "pytest":
            return "pytest"
        if name in ("npm", "yarn", "pnpm", "npx", "jest", "vitest", "node", "mocha"):
            return "npm" if name in ("npx", "jest", "vitest", "node", "mocha") else name
        if name in ("go", "cargo"):
            return name
        if word == "unittest":  # python -m unittest ...
            return "unittest"
    return "pytest" if "pytest" in command else "other"


@dataclass(frozen=True)
class PythonTools:
    """How the workspace's Python tests run: `pytest_argv` starts pytest, `bin` (a virtual environment's bin
    folder) goes first on PATH so that an explicit command ("pytest -x") finds the same tools, `said` names them."""

    pytest_argv: tuple[str, ...]
    said: str
    bin: Path | None = None


def python_tools(root: Path) -> PythonTools:
    """The workspace's own Python, not warpcode's: its virtual environment (.venv, venv, or any folder at its root
    holding a pyvenv.cfg), else pytest on PATH, else python3 on PATH; warpcode's interpreter only when neither is."""
    if venv := _workspace_venv(root):
        python = venv / "bin" / "python"
        return PythonTools(
            (str(python), "-m", "pytest"), f"{python} (the workspace's virtual environment)", python.parent
        )
    if pytest := shutil.which("pytest"):
        return PythonTools((pytest,), f"{_interpreter_of(pytest)} (pytest found on PATH: {pytest})")
    if python3 := shutil.which("python3"):
        return PythonTools((python3, "-m", "pytest"), f"{python3} (python3 found on PATH; no virtual environment)")
    return PythonTools((sys.executable, "-m", "pytest"), f"{sys.executable} (warpcode's own: no python3 on PATH)")


def _workspace_venv(root: Path) -> Path | None:
    named = [root / ".venv", root / "venv"]
    try:
        others = sorted(entry for entry in root.iterdir() if (entry / "pyvenv.cfg").is_file())
    except OSError:
        others = []
    for folder in [*named, *others]:
        if (folder / "bin" / "python").is_file():
            return folder
    return None


def _interpreter_of(script: str) -> str:
    """The Python a console script runs on, from its #! line; the script itself when that is not a Python."""
    with contextlib.suppress(OSError), open(script, "rb") as file:
        words = file.readline(4096).decode(errors="replace").removeprefix("#!").split()
        if words and Path(words[0]).name == "env":  # #!/usr/bin/env python3
            words = words[1:]
        if words and "python" in Path(words[0]).name:
            return words[0]
    return script


def _command(runner: str, paths: list[str], junit: Path, python: PythonTools) -> str:
    quoted = " ".join(shlex.quote(path) for path in paths)
    if runner == "pytest":
        argv = " ".join(shlex.quote(word) for word in python.pytest_argv)
        return f"{argv} -q --junitxml={shlex.quote(str(junit))} {quoted}".strip()
    if runner in ("npm", "yarn", "pnpm"):
        return f"{runner} test" + (f" -- {quoted}" if paths else "")
    if runner == "go":
        return "go test -v " + (quoted or "./...")
    return "cargo test" + (f" {quoted}" if paths else "")


def _environment(python: PythonTools) -> dict[str, str]:
    """The runner's environment: the workspace's virtual environment activated, as its developers run it."""
    if python.bin is None:
        return NON_INTERACTIVE_ENV
    path = os.pathsep.join([str(python.bin), os.environ.get("PATH", os.defpath)])
    return {**NON_INTERACTIVE_ENV, "VIRTUAL_ENV": str(python.bin.parent), "PATH": path}


def run_tests(
    ws: Workspace,
    command: str | None = None,
    paths: list[str] | None = None,
    timeout_s: float = DEFAULT_TEST_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    sandbox: Sandbox | None = None,
    executor: Executor = execute,
) -> TestReport:
    """Run the tests (the detected runner, or `command` with `paths` appended, by `executor`: process.py) and parse
    the results.

    A timeout or cancel kills the whole process group and raises CommandTimeout / CommandCancelled. In `sandbox`,
    the folder the JUnit report is written to is writable too.
    """
    paths = [ws.rel(ws.resolve(path)) for path in paths or []]
    runner = _runner_of_command(command) if command else detect_runner(ws.root)
    python = python_tools(ws.root)
    with tempfile.TemporaryDirectory(prefix="warpcode-tests-") as tmp:
        junit = Path(tmp) / "junit.xml"
        if command is None:
            line = _command(runner, paths, junit, python)
        else:
            line = " ".join([command, *(shlex.quote(path) for path in paths)])
            if runner == "pytest" and "--junitxml" not in line:
                line += f" --junitxml={shlex.quote(str(junit))}"
        if sandbox is not None:
            sandbox = sandbox.allowing(tmp)  # the JUnit report is written there
        result = executor(
            line, ws.root, timeout_s, on_output=on_output, cancel=cancel, env=_environment(python), sandbox=sandbox
        )
        if result.timed_out:
            raise errors.CommandTimeout(result)
        if result.cancelled:
            raise errors.CommandCancelled(result)
        counts = _counts(runner, result.output, junit, ws.root)
    return TestReport(
        runner=runner,
        command=line,
        exit_code=result.exit_code,
        output=result.output,
        duration_s=result.duration_s,
        passed=counts.passed,
        failed=counts.failed,
        errors=counts.errors,
        skipped=counts.skipped,
        failures=counts.failures,
        parsed=counts.parsed,
        python=python.said if runner == "pytest" and (command is None or python.bin) else None,
    )


def _counts(runner: str, output: str, junit: Path, root: Path) -> RunCounts:
    if runner == "pytest" and junit.is_file():
        # A truncated XML file (pytest crashed while writing it) falls back to the text summary.
        with contextlib.suppress(ET.ParseError):
            return parse_junit(junit, root)
    if runner == "pytest":
        return parse_pytest_summary(output)
    if runner in ("go", "cargo"):
        return {"go": parse_go, "cargo": parse_cargo}[runner](output)
    counts = parse_unittest(output)  # `python -m unittest`, or a script that runs it
    return counts if counts.parsed else parse_js(output)
