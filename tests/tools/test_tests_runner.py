from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from warpcode.tools import CommandTimeout, InvalidArgument, Workspace, detect_runner, run_tests
from warpcode.tools.tests_report import parse_cargo, parse_go, parse_js, parse_pytest_summary

PYTEST_PROJECT = {
    "pyproject.toml": "[tool.pytest.ini_options]\n",
    "tests/test_math.py": (
        "import pytest\n\n"
        "def test_adds():\n    assert 1 + 1 == 2\n\n"
        "def test_fails():\n    assert 2 * 2 == 5, 'arithmetic is broken'\n\n"
        "class TestGroup:\n    def test_in_class(self):\n        raise ValueError('boom')\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_skipped():\n    pass\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture failed')\n\n"
        "def test_uses_broken(broken):\n    pass\n"
    ),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_pytest_results_come_from_junit_xml(ws: Workspace, root: Path) -> None:
    _write(root, PYTEST_PROJECT)
    report = run_tests(ws, command=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert (report.runner, report.passed, report.failed, report.errors, report.skipped) == ("pytest", 1, 2, 1, 1)
    ids = {failure.id: failure.message for failure in report.failures}
    assert "tests/test_math.py::test_fails" in ids
    assert "arithmetic is broken" in ids["tests/test_math.py::test_fails"]
    assert "ValueError: boom" in ids["tests/test_math.py::TestGroup::test_in_class"]
    assert "fixture failed" in ids["tests/test_math.py::test_uses_broken"]
    assert "1 passed, 2 failed, 1 errors, 1 skipped" in report.render()


def test_without_junit_xml_pytest_counts_come_from_its_summary_line(ws: Workspace, root: Path) -> None:
    """The XML went elsewhere (here /dev/null): the counts are read from pytest's own closing line, not from a count
    a test printed before it."""
    talks = "def test_talks():\n    print('\\n7 skipped')\n\ndef test_fails():\n    assert 2 * 2 == 5\n"
    _write(root, {"pyproject.toml": "[tool.pytest.ini_options]\n", "tests/test_talks.py": talks})
    report = run_tests(ws, command=f"{sys.executable} -m pytest -q -s -p no:cacheprovider --junitxml=/dev/null")
    assert (report.passed, report.failed, report.errors, report.skipped, report.parsed) == (1, 1, 0, 0, True)
    older = parse_pytest_summary("===== 2 passed, 1 skipped in 0.05 seconds =====\n")  # pytest before 6
    assert (older.passed, older.skipped, older.parsed) == (2, 1, True)
    assert not parse_pytest_summary("no tests ran in 0.01s\n").parsed


def test_pytest_collection_error_is_reported(ws: Workspace, root: Path) -> None:
    _write(root, {"tests/test_broken.py": "import missing_module_xyz\n"})
    report = run_tests(ws, command=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert report.errors == 1 and not report.ok
    assert "missing_module_xyz" in report.failures[0].message


def test_detected_pytest_runs_only_the_given_paths(ws: Workspace, root: Path) -> None:
    _write(root, PYTEST_PROJECT)
    assert detect_runner(root) == "pytest"
    report = run_tests(ws, paths=["tests/test_math.py::test_adds"])
    assert (report.passed, report.failed, report.errors) == (1, 0, 0) and report.ok


def test_hanging_test_is_killed_on_timeout(ws: Workspace, root: Path) -> None:
    _write(root, {"test_hang.py": "import time\n\ndef test_hang():\n    time.sleep(60)\n"})
    with pytest.raises(CommandTimeout):
        run_tests(ws, command=f"{sys.executable} -m pytest -q -p no:cacheprovider", timeout_s=3)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_test_runner_output_is_parsed(ws: Workspace, root: Path) -> None:
    _write(
        root,
        {
            "math.test.js": (
                "const test = require('node:test');\nconst assert = require('node:assert');\n"
                "test('adds', () => { assert.strictEqual(1 + 1, 2); });\n"
                "test('fails', () => { assert.strictEqual(1, 2); });\n"
            )
        },
    )
    report = run_tests(ws, command="node --test")
    assert (report.runner, report.passed, report.failed) == ("npm", 1, 1)
    assert report.failures[0].id == "fails" and "1 !== 2" in report.failures[0].message


def test_runner_detection(tmp_path: Path) -> None:
    cases = {
        "js": ({"package.json": '{"scripts": {"test": "jest"}}', "yarn.lock": ""}, "yarn"),
        "pnpm": ({"package.json": '{"scripts": {"test": "vitest"}}', "pnpm-lock.yaml": ""}, "pnpm"),
        "go": ({"go.mod": "module x\n"}, "go"),
        "rust": ({"Cargo.toml": "[package]\n"}, "cargo"),
    }
    for name, (files, runner) in cases.items():
        _write(tmp_path / name, files)
        assert detect_runner(tmp_path / name) == runner
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidArgument, match="Pass the test command"):
        detect_runner(tmp_path / "empty")


GO_OUTPUT = """=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
    math_test.go:12: Sub(3, 1) = 1, want 2
--- FAIL: TestSub (0.00s)
=== RUN   TestSkip
    math_test.go:16: not ready
--- SKIP: TestSkip (0.00s)
FAIL
FAIL\texample.com/calc\t0.002s
# example.com/broken
broken/b.go:3:2: undefined: nope
FAIL\texample.com/broken [build failed]
"""

CARGO_OUTPUT = """running 3 tests
test tests::adds ... ok
test tests::ignored_one ... ignored
test tests::subtracts ... FAILED

failures:

---- tests::subtracts stdout ----
thread 'tests::subtracts' panicked at src/lib.rs:12:9:
assertion `left == right` failed
  left: 1
 right: 2

failures:
    tests::subtracts

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
"""

JEST_OUTPUT = """FAIL src/sum.test.js
  ● math › subtracts

    expect(received).toBe(expected) // Object.is equality

    Expected: 2
    Received: 1

Tests:       1 failed, 1 skipped, 3 passed, 5 total
"""


def test_go_output_is_parsed() -> None:
    counts = parse_go(GO_OUTPUT)
    assert (counts.passed, counts.failed, counts.skipped, counts.errors) == (1, 1, 1, 1)
    failures = {failure.id: failure.message for failure in counts.failures}
    assert "want 2" in failures["example.com/calc.TestSub"]
    assert "undefined: nope" in failures["example.com/broken"]


def test_cargo_output_is_parsed() -> None:
    counts = parse_cargo(CARGO_OUTPUT)
    assert (counts.passed, counts.failed, counts.skipped, counts.errors) == (1, 1, 1, 0)
    assert counts.failures[0].id == "tests::subtracts"
    assert "left: 1" in counts.failures[0].message


def test_jest_output_is_parsed() -> None:
    counts = parse_js(JEST_OUTPUT)
    assert (counts.passed, counts.failed, counts.skipped) == (3, 1, 1)
    assert counts.failures[0].id == "math › subtracts"
    assert "Received: 1" in counts.failures[0].message


UNITTEST_PROJECT = {
    "test_arith.py": (
        "import unittest\n\n"
        "class Arith(unittest.TestCase):\n"
        "    def test_adds(self):\n        self.assertEqual(1 + 1, 2)\n\n"
        "    def test_fails(self):\n        self.assertEqual(2 * 2, 5, 'arithmetic is broken')\n\n"
        "    def test_errors(self):\n        raise ValueError('boom')\n\n"
        "    @unittest.skip('later')\n    def test_skipped(self):\n        pass\n\n"
        "    @unittest.expectedFailure\n    def test_known_bug(self):\n        self.assertTrue(False)\n"
    ),
}


def test_unittest_output_is_parsed(ws: Workspace, root: Path) -> None:
    _write(root, UNITTEST_PROJECT)
    report = run_tests(ws, command=f"{sys.executable} -m unittest -v test_arith")
    assert (report.runner, report.passed, report.failed, report.errors, report.skipped) == ("unittest", 2, 1, 1, 1)
    ids = {failure.id: failure.message for failure in report.failures}
    assert "arithmetic is broken" in ids["test_arith.Arith.test_fails"]
    assert "ValueError: boom" in ids["test_arith.Arith.test_errors"]
    passing = run_tests(ws, command=f"{sys.executable} -m unittest test_arith.Arith.test_adds")
    assert (passing.passed, passing.failed, passing.errors, passing.ok) == (1, 0, 0, True)
