"""run_tests runs a Python project's tests with the project's own tools, not warpcode's interpreter: its virtual
environment when it has one (in the sandbox too), else pytest or python3 on PATH; the result says which it used."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from warpcode.tools import Workspace, run_tests
from warpcode.tools.sandbox import Sandbox

# The workspace's test checks, from inside, which Python runs it.
PREFIX_TEST = "import os, sys\n\ndef test_prefix():\n    assert sys.prefix == os.environ['EXPECTED_PREFIX']\n"


@pytest.fixture(autouse=True)
def _quick_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner pytest skips loading the plugins installed here (hypothesis & co.): seconds each, not needed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider")


def _real_venv(folder: Path) -> Path:
    """A real virtual environment (no pip: quick) that sees this interpreter's pytest through a .pth file, as
    `--system-site-packages` would where pytest is installed system-wide."""
    venv.EnvBuilder(symlinks=True, with_pip=False).create(folder)
    site_packages = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)}))
    (site_packages / "outer.pth").write_text(str(Path(pytest.__file__).resolve().parent.parent) + "\n")
    return folder


def test_the_workspace_virtualenv_runs_its_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _real_venv(tmp_path / "env-dev")  # any name: its pyvenv.cfg tells
    (tmp_path / "test_prefix.py").write_text(PREFIX_TEST)
    monkeypatch.setenv("EXPECTED_PREFIX", str(environment))
    report = run_tests(Workspace(tmp_path))
    assert report.ok and report.passed == 1, report.render()
    assert report.python and str(environment / "bin" / "python") in report.python
    assert "virtual environment" in report.render()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_the_workspace_virtualenv_runs_in_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _real_venv(tmp_path / "venv")
    (tmp_path / "test_prefix.py").write_text(PREFIX_TEST)
    monkeypatch.setenv("EXPECTED_PREFIX", str(environment))
    report = run_tests(Workspace(tmp_path), sandbox=Sandbox.bwrap())
    assert report.ok and report.passed == 1, report.render()


def test_an_explicit_command_finds_the_virtualenv_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _real_venv(tmp_path / ".venv")
    (tmp_path / "test_prefix.py").write_text(PREFIX_TEST)
    monkeypatch.setenv("EXPECTED_PREFIX", str(environment))
    report = run_tests(Workspace(tmp_path), command="python -m pytest -q")
    assert report.ok and report.passed == 1, report.render()


def test_without_a_virtualenv_pytest_on_path_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_folder, project = tmp_path / "bin", tmp_path / "project"
    bin_folder.mkdir()
    project.mkdir()
    # The user's `pytest` (pipx, apt): it marks the environment, so the test knows that this one ran it.
    pytest_on_path = bin_folder / "pytest"
    pytest_on_path.write_text(f'#!/bin/sh\nexport FROM_PATH=1\nexec {sys.executable} -m pytest "$@"\n')
    pytest_on_path.chmod(0o755)
    (project / "test_path.py").write_text("import os\n\ndef test_path():\n    assert os.environ.get('FROM_PATH')\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_folder), "/usr/bin", "/bin"]))
    report = run_tests(Workspace(project))
    assert report.ok and report.passed == 1, report.render()
    assert report.python and f"pytest found on PATH: {pytest_on_path}" in report.python
