"""The batch's parts: pytest summary counts, the results file's durability rules, the live progress view."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from warpcode.agent.batch.ids import name_for, shown
from warpcode.agent.batch.job_tests import summary_counts
from warpcode.agent.batch.progress import BatchProgress
from warpcode.agent.batch.results import ResultsFile
from warpcode.tools.tests_report import parse_unittest


def test_pytest_counts():
    assert summary_counts("..F\n1 failed, 2 passed, 1 skipped in 0.12s\n") == {
        "passed": 2, "failed": 1, "errors": 0, "skipped": 1}  # fmt: skip
    assert summary_counts("==== 3 passed, 2 errors in 1.01s ====") == {
        "passed": 3, "failed": 0, "errors": 2, "skipped": 0}  # fmt: skip
    assert summary_counts("ok\n") == {"passed": None, "failed": None, "errors": None, "skipped": None}


def test_unittest_counts():
    output = "F.s\n" + "=" * 70 + "\nFAIL: test_x (m.T.test_x)\n" + "-" * 70 + "\nAssertionError\n\n" + "-" * 70
    output += "\nRan 4 tests in 0.001s\n\nFAILED (failures=1, errors=1, skipped=1)\n"
    assert summary_counts(output) == {"passed": 1, "failed": 1, "errors": 1, "skipped": 1}
    assert summary_counts("Ran 2 tests in 0.000s\n\nOK\n") == {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert not parse_unittest("2 passed in 0.1s\n").parsed


def test_results_file_drops_a_torn_line_and_keeps_one_row_per_id(tmp_path: Path):
    path = tmp_path / "RESULTS.jsonl"
    path.write_text(json.dumps({"id": "a", "status": "succeeded"}) + "\n" + json.dumps({"id": "a", "status": "failed"})
                    + "\n" + json.dumps({"id": "b", "status": "error"}) + "\n" + '{"id": "c", "sta')  # fmt: skip
    results = ResultsFile(path)
    assert results.rows == {"a": {"id": "a", "status": "succeeded"}, "b": {"id": "b", "status": "error"}}
    assert path.read_text().count("\n") == 2 and path.read_text().endswith("\n")
    assert results.done("a") and results.done("b") and not results.done("c")
    assert not results.done("b", retry_errors=True) and results.done("a", retry_errors=True)
    assert not results.done("a", redo=True)
    results.forget({"b"})
    results.append({"id": "b", "status": "succeeded"})
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "b"]


def test_names_are_the_plain_ids_themselves_and_never_shared():
    assert name_for("plain-id_1.x") == "plain-id_1.x" and name_for("fix") == "fix"
    hashed = [name_for(job_id) for job_id in ("a/b", "a_b+", "Fix", ".hidden", "x.lock", "a..b", "-x", "", "/")]
    assert all("+" in name and "/" not in name and not name.startswith((".", "-")) for name in hashed)
    assert name_for("a/b").startswith("a-b+") and name_for("Fix").startswith("Fix+")
    assert name_for(name_for("a/b")) != name_for("a/b")  # a hashed name given as an id is hashed again
    assert len(name_for("a" * 500)) < 100 and name_for("a" * 500) != name_for("a" * 501)


def test_shown_escapes_what_a_terminal_would_act_on():
    assert shown("plain id, naïve") == "plain id, naïve"
    assert shown("a\x1b[31mb\nc\x07\u202ed\x00") == "a\\x1b[31mb\\nc\\x07\\u202ed\\x00"


def test_the_live_view_shows_counts_eta_and_the_slowest_running_jobs():
    log = io.StringIO()
    progress = BatchProgress(total=4, skipped=1, log=log, events=io.StringIO())
    progress.console = Console(file=log, force_terminal=True, width=120, color_system=None)
    progress.started("slow-one", "local:host:1/0")
    progress.started("quick", "local:host:1/1")
    progress.running["slow-one"].since -= 90
    row = {"id": "done", "status": "failed", "duration_s": 2.0, "error": "tests fail", "attempts": 1, "worker": "w"}
    progress.finished(row)
    with progress.console.capture() as captured:
        progress.console.print(progress._view())
    view = captured.get()
    assert "1/4 done · 2 running · 1 failed · 0 errors" in view and "ETA" in view
    lines = [line for line in view.splitlines() if "local:host" in line]
    assert lines[0].split()[:3] == ["slow-one", "local:host:1/0", "1:30"]  # the slowest first
    assert lines[1].split()[0] == "quick"
