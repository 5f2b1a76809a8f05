"""bench/speculative_acceptance.py: teacher forcing counted right on a case worked by hand, an unchanged file copied
almost whole in full drafts, the outputs faithful to the commits (edit_file hunks and the diff rebuild the new
file), the fixture naming its sources, and the command end to end on a slice of the fixture."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import tempfile
from pathlib import Path

import pytest

from warpcode.bench import speculative_acceptance as bench
from warpcode.model_runtime.speculative import DraftConfig
from warpcode.tools import Workspace, apply_patch


def test_a_copy_worked_by_hand() -> None:
    """100 distinct tokens copied: 4 plain steps until the copy's first 4 tokens repeat the context's, a probe of 3
    (4 tokens), two full drafts of 32 (33 tokens each), and a last one accepted up to the end (26)."""
    context = list(range(100))
    run = bench.simulate(context, context, DraftConfig(min_match=4, max_draft=32, probe=3))
    assert (run.tokens, run.steps, run.drafting_steps) == (100, 8, 4)
    assert (run.drafted, run.accepted) == (3 + 32 * 3, 3 + 32 + 32 + 26)
    assert run.rows == {1: 4, 4: 1, 33: 3}
    spent = 4 * 2.20 + 4.99 + 3 * (14.83 + (14.83 - 11.64) / 16)  # 33 rows: past the curve, its last slope
    assert run.projected_ms("bf16") == pytest.approx(spent)
    summary = run.summary()
    assert summary["tokens_per_step"] == 12.5 and summary["drafting_fraction"] == 0.5
    assert summary["projected_tok_s_bf16"] == pytest.approx(100_000 / spent)
    assert summary["speedup_bf16"] == pytest.approx(100 * 2.20 / spent)


def test_step_costs_interpolate_the_measured_curve() -> None:
    assert [bench.step_ms(rows) for rows in (1, 2, 4, 8, 16, 32)] == [2.20, 3.51, 4.99, 7.56, 11.64, 14.83]
    assert bench.step_ms(3) == pytest.approx((3.51 + 4.99) / 2)
    assert bench.step_ms(24, "mxfp8") == pytest.approx((8.51 + 10.89) / 2)


def test_an_unchanged_file_is_copied_in_full_drafts() -> None:
    change = bench.load_changes(limit=1)[0]
    same = dataclasses.replace(change, new=change.old)
    encode = bench.load_tokenizer(None)
    config = DraftConfig()
    for result in bench.measure([same], encode, config, kinds=("rewrite",)):
        run = result.run
        if result.context == "numbered":
            assert run.tokens / run.steps < 4  # every copy from numbered lines stops at a line end
            continue
        assert run.tokens / run.steps > 20 and run.accepted > 0.95 * run.drafted
        assert run.rows[config.max_draft + 1] > 0.9 * run.drafting_steps  # nearly every draft is a full one
        assert run.drafting_steps > 0.85 * run.steps


def test_outputs_rebuild_the_new_file() -> None:
    """Each change's edit_file calls, applied in order, each old_text unique where it is applied, and its diff
    through our apply_patch, give the commit's file."""
    with tempfile.TemporaryDirectory() as tmp:
        for number, change in enumerate(bench.load_changes()):
            text = change.old
            for old_text, new_text in bench.edit_hunks(change.old, change.new):
                assert text.count(old_text) == 1, (change.repo, change.path)
                text = text.replace(old_text, new_text, 1)
            assert text == change.new, (change.repo, change.path)
            root = Path(tmp) / f"ws{number}"
            (root / change.path).parent.mkdir(parents=True)
            (root / change.path).write_text(change.old, encoding="utf-8")
            apply_patch(
                Workspace(root, state_dir=Path(tmp) / "state"), bench.unified_diff(change.old, change.new, change.path)
            )
            assert (root / change.path).read_text(encoding="utf-8") == change.new
            kinds = bench.outputs(change)
            assert kinds["rewrite"].startswith("<tool_call>\n<function=write_file>\n<parameter=path>\n")
            assert kinds["edit"].count("<function=edit_file>") == len(bench.edit_hunks(change.old, change.new))
            json_call = bench.outputs(change, json_args=True)["rewrite"]
            assert json.loads(json_call.split("\n", 1)[1].rsplit("\n", 1)[0])["arguments"]["content"] == change.new


def test_the_fixture_names_its_sources() -> None:
    changes = bench.load_changes()
    assert 40 <= len(changes) <= 60 and len({change.repo for change in changes}) >= 6
    assert len({Path(change.path).suffix for change in changes}) >= 4  # languages
    assert bench.FIXTURE.stat().st_size < 2_000_000
    sources = (bench.FIXTURE_DIR / "SOURCES.md").read_text(encoding="utf-8")
    for change in changes:
        assert re.fullmatch(r"[0-9a-f]{40}", change.commit) and re.fullmatch(r"[0-9a-f]{40}", change.parent)
        assert change.licence and f"| {change.repo} | {change.licence} | {change.commit} | {change.path} |" in sources
        assert 1_000 <= len(change.old.encode()) <= 20_000 and change.old != change.new
    with gzip.open(bench.FIXTURE, "rt", encoding="utf-8") as stream:
        assert set(json.loads(stream.readline())) == {"repo", "commit", "parent", "path", "licence", "old", "new"}


def test_the_command_on_a_slice_of_the_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "speculative.json"
    document = bench.main(["--limit", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "PROJECTION" in printed and "numbered+doc" in printed
    assert json.loads(out.read_text()) == document
    assert [(row["kind"], row["context"]) for row in document["summary"]] == [
        (kind, context) for kind in bench.KINDS for context in bench.CONTEXTS
    ]
    assert all(row["tokens"] > 0 and row["steps"] <= row["tokens"] for row in document["summary"])
    assert len(document["changes"]) == 2 and document["per_repo"]
    # Fewer kinds and contexts, another policy: what was asked for only.
    document = bench.main(["--limit", "1", "--kinds", "diff", "--contexts", "plain", "--no-guard", "--growth", "2"])
    assert [(row["kind"], row["context"]) for row in document["summary"]] == [("diff", "plain")]
    with pytest.raises(SystemExit):
        bench.main(["--kinds", "poem"])
