"""Structured test results: pytest's JUnit XML, and the text output of go test, cargo test, unittest and JS
runners."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

MAX_MESSAGE_CHARS = 2000
# Summary lines of node --test (TAP) and Mocha: (regex, counter).
SUMMARY_COUNTS = (
    (r"^# pass (\d+)", "passed"),
    (r"^# fail (\d+)", "failed"),
    (r"^# skipped (\d+)", "skipped"),
    (r"^\s*(\d+) passing", "passed"),
    (r"^\s*(\d+) failing", "failed"),
    (r"^\s*(\d+) pending", "skipped"),
)


@dataclass
class FailedTest:
    id: str
    message: str


@dataclass
class RunCounts:
    """What one run of a test suite reported: how many tests passed, failed, errored and were skipped, and why each
    failure failed."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[FailedTest] = field(default_factory=list)
    parsed: bool = False  # False when the output had nothing recognizable


def _cut(message: str) -> str:
    message = message.strip("\n")
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return "[...]\n" + message[-MAX_MESSAGE_CHARS:]


def parse_junit(xml_path: Path, cwd: Path) -> RunCounts:
    counts = RunCounts(parsed=True)
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        problem = case.find("failure")
        kind = "failed"
        if problem is None:
            problem, kind = case.find("error"), "errors"
        if problem is None:
            if case.find("skipped") is not None:
                counts.skipped += 1
            else:
                counts.passed += 1
            continue
        setattr(counts, kind, getattr(counts, kind) + 1)
        summary = problem.get("message") or ""
        detail = (problem.text or "").strip("\n").splitlines()
        tail = "\n".join(detail[-25:])
        message = tail if summary in tail else f"{summary}\n{tail}"
        counts.failures.append(FailedTest(_pytest_id(case, cwd), _cut(message)))
    return counts


# pytest's closing line, "1 failed, 2 passed, 1 skipped in 0.12s" (pytest before 6: "in 0.12 seconds"), often between
# rules of "=": the line with the run's time, so that a count a test printed earlier is not taken for it.
_PYTEST_SUMMARY = re.compile(r"\b\d+ (passed|failed|errors?|skipped)\b.* in [\d.]+ ?s")
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)\b")


def parse_pytest_summary(output: str) -> RunCounts:
    """pytest's counts from its last summary line, for a run that wrote no JUnit XML (the failures are not named
    there); not parsed when there is none."""
    lines = [line for line in output.splitlines() if _PYTEST_SUMMARY.search(line)]
    counts = RunCounts(parsed=bool(lines))
    for number, word in _PYTEST_COUNT.findall(lines[-1] if lines else ""):
        attr = "errors" if word.startswith("error") else word
        setattr(counts, attr, getattr(counts, attr) + int(number))
    return counts


def _pytest_id(case: ET.Element, cwd: Path) -> str:
    """'tests/test_a.py::TestX::test_y' from classname 'tests.test_a.TestX' and name 'test_y'."""
    parts = [part for part in (case.get("classname") or "").split(".") if part]
    name = case.get("name") or "?"
    for split in range(len(parts), 0, -1):
        candidate = "/".join(parts[:split]) + ".py"
        if (cwd / candidate).is_file():
            return "::".join([candidate, *parts[split:], name])
    return "::".join([*parts, name]) if parts else name


def parse_go(output: str) -> RunCounts:
    """`go test -v` output: a test's log lines come between its `=== RUN` and its `--- FAIL` line (after it
    without -v); a package that does not compile ends with `FAIL <pkg> [build failed]`."""
    counts = RunCounts()
    logs: dict[str, list[str]] = {}
    current: str | None = None
    pending: list[FailedTest] = []
    build_lines: list[str] = []
    for line in output.splitlines():
        run = re.match(r"^=== (?:RUN|CONT)\s+(\S+)", line)
        result = re.match(r"^--- (PASS|FAIL|SKIP): (\S+)", line)
        package = re.match(r"^(?:ok|FAIL)\s+(\S+)(\s+\[(?:build|setup) failed\])?", line)
        if run:
            current = run.group(1)
            logs.setdefault(current, [])
        elif result:
            counts.parsed = True
            verdict, current = result.groups()
            counts.passed += verdict == "PASS"
            counts.skipped += verdict == "SKIP"
            if verdict == "FAIL":
                counts.failed += 1
                pending.append(FailedTest(current, ""))
        elif package:
            counts.parsed = True
            if package.group(2):
                counts.errors += 1
                counts.failures.append(FailedTest(package.group(1), _cut("\n".join(build_lines[-30:]))))
            for failure in pending:
                failure.message = _cut("\n".join(logs.get(failure.id, [])))
                failure.id = f"{package.group(1)}.{failure.id}"
            counts.failures.extend(pending)
            pending, current, logs, build_lines = [], None, {}, []
        elif current is not None and line.startswith((" ", "\t")):
            logs.setdefault(current, []).append(line.strip())
        elif line.strip() not in ("PASS", "FAIL"):
            build_lines.append(line)
    counts.failures.extend(pending)
    return counts


def parse_cargo(output: str) -> RunCounts:
    counts = RunCounts()
    messages: dict[str, list[str]] = {}
    section: list[str] | None = None
    failed_names: list[str] = []
    for line in output.splitlines():
        verdict = re.match(r"^test (\S+) \.\.\. (ok|FAILED|ignored)", line)
        header = re.match(r"^---- (\S+) stdout ----", line)
        if verdict:
            counts.parsed = True
            name, outcome = verdict.groups()
            counts.passed += outcome == "ok"
            counts.skipped += outcome == "ignored"
            if outcome == "FAILED":
                counts.failed += 1
                failed_names.append(name)
        elif header:
            section = messages.setdefault(header.group(1), [])
        elif line.strip() == "failures:" or line.startswith("test result:"):
            section = None
        elif section is not None:
            section.append(line)
        if re.match(r"^error(\[E\d+\])?: ", line) and not line.startswith("error: test failed"):
            counts.parsed = True
            counts.errors += 1
            counts.failures.append(FailedTest("build", line))
    counts.failures.extend(FailedTest(name, _cut("\n".join(messages.get(name, [])))) for name in failed_names)
    return counts


def parse_js(output: str) -> RunCounts:
    """Jest, Vitest, node --test (TAP) and Mocha summaries, with failing test names where they are printed."""
    counts = RunCounts()
    text = re.sub(r"\x1b\[[0-9;]*m", "", output)
    summary = re.search(r"^\s*Tests?:?\s+(.*\d+ (?:passed|failed).*)$", text, re.MULTILINE)
    if summary:
        counts.parsed = True
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|todo)", summary.group(1)):
            attr = {"passed": "passed", "failed": "failed"}.get(word, "skipped")
            setattr(counts, attr, getattr(counts, attr) + int(number))
    else:
        for pattern, attr in SUMMARY_COUNTS:
            found = re.search(pattern, text, re.MULTILINE)
            if found:
                counts.parsed = True
                setattr(counts, attr, int(found.group(1)))
    current: list[str] | None = None
    for line in text.splitlines():
        start = re.match(r"^\s*(?:● |not ok \d+ - )(.+)$", line)
        if start and not start.group(1).startswith("Console"):
            current = []
            counts.failures.append(FailedTest(start.group(1).strip(), ""))
        elif start or re.match(r"^\s*(Tests?:|Test Suites:|# (tests|pass|fail)|ok \d+ )", line):
            current = None
        elif current is not None and line.strip() and len(current) < 20:
            current.append(line.strip())
            counts.failures[-1].message = _cut("\n".join(current))
    return counts


_UNITTEST_BLOCK = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+)(?: \((\S+)\))?", re.MULTILINE)


def parse_unittest(output: str) -> RunCounts:
    """Python's unittest: 'Ran 7 tests in 0.01s' then 'OK', 'OK (skipped=1)' or 'FAILED (failures=1, errors=2,
    skipped=1, expected failures=1, unexpected successes=1)', and a block per problem between '=' rules:
    'FAIL: test_x (module.Class.test_x)', its traceback. An expected failure counts as passed."""
    counts = RunCounts()
    ran = re.findall(r"^Ran (\d+) tests? in ", output, re.MULTILINE)
    verdict = re.findall(r"^(OK|FAILED)(?: \((.*)\))?\s*$", output, re.MULTILINE)
    if not ran or not verdict:
        return counts
    counts.parsed = True
    details = dict((name.strip(), int(number)) for name, number in re.findall(r"([a-z ]+)=(\d+)", verdict[-1][1] or ""))
    counts.failed = details.get("failures", 0) + details.get("unexpected successes", 0)
    counts.errors = details.get("errors", 0)
    counts.skipped = details.get("skipped", 0)
    counts.passed = int(ran[-1]) - counts.failed - counts.errors - counts.skipped
    blocks = re.split(r"^={20,}$", output, flags=re.MULTILINE)[1:]
    for block in blocks:
        header = _UNITTEST_BLOCK.search(block)
        if header is None:
            continue
        body = re.split(r"^-{20,}$", block, maxsplit=1, flags=re.MULTILINE)
        trace = body[1] if len(body) > 1 else ""
        trace = re.split(r"^Ran \d+ tests? in ", trace, maxsplit=1, flags=re.MULTILINE)[0]
        counts.failures.append(FailedTest(header.group(3) or header.group(2), _cut(trace)))
    return counts
