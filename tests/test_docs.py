"""The documentation a new user has: README.md and docs/ must stand alone (every link resolves inside the
repository, nothing points to a document users do not have), the README's own example must run as written, and
the reference pages must list what the code actually accepts, so they cannot go stale silently."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.agent.batch import jobs, runner
from warpcode.agent.config import Settings, load_settings

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
WARPCODE = str(Path(sys.executable).with_name("warpcode"))

FENCED = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
TABLE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", re.M)


def documents() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def links(page: Path) -> list[str]:
    """The link targets of a markdown page, code blocks and code spans left out (they show code, not links)."""
    prose = INLINE_CODE.sub("", FENCED.sub("", page.read_text()))
    return LINK.findall(prose)


def anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCED.sub("", page.read_text())
    slug = lambda title: re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    return {slug(title) for title in HEADING.findall(text)}


def local_target(page: Path, target: str) -> tuple[Path, str] | None:
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
        return None
    path, _, anchor = target.partition("#")
    return (page if not path else (page.parent / path).resolve()), anchor


def section(page: Path, title: str) -> str:
    text = page.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def table_keys(text: str) -> dict[str, list[str]]:
    """The rows of markdown tables whose first cell is a `code` name: name -> the other cells."""
    return {name: [cell.strip() for cell in rest.split("|")] for name, rest in TABLE_ROW.findall(text)}


def test_every_relative_link_of_the_readme_and_the_docs_resolves_in_the_repository() -> None:
    broken = []
    for page in documents():
        for target in links(page):
            resolved = local_target(page, target)
            if resolved is None:
                continue
            path, anchor = resolved
            if not path.exists() or REPO_ROOT not in path.parents:
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no such file in the repository)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    reached, queue = set(), [REPO_ROOT / "README.md"]
    while queue:
        page = queue.pop()
        for target in links(page):
            resolved = local_target(page, target)
            if resolved and resolved[0].suffix == ".md" and resolved[0].exists() and resolved[0] not in reached:
                reached.add(resolved[0])
                queue.append(resolved[0])
    pages = set(DOCS.rglob("*.md"))
    assert pages, "docs/ has no pages"
    assert not pages - reached, f"not linked from the README: {sorted(map(str, pages - reached))}"
    assert {DOCS / "architecture.md", DOCS / "reference" / "config.md"} <= pages


def test_no_doc_points_to_the_design_notes_users_do_not_have() -> None:
    mentions = [str(page.relative_to(REPO_ROOT)) for page in documents() if "design.md" in page.read_text()]
    assert not mentions, f"these pages refer to design.md, which is not in the repository: {mentions}"


def test_no_source_file_points_to_the_design_notes_either() -> None:
    """Docstrings and comments are documentation too: they point to docs/ or the README, which users have."""
    skipped = {".venv", "node_modules", "build", ".git"}
    sources = [
        path
        for pattern in ("*.py", "*.ts")
        for path in REPO_ROOT.rglob(pattern)
        if not skipped & set(path.relative_to(REPO_ROOT).parts) and path != Path(__file__).resolve()
    ]
    mentions = [str(path.relative_to(REPO_ROOT)) for path in sources if "design.md" in path.read_text()]
    assert not mentions, f"these files refer to design.md, which is not in the repository: {mentions}"


def readme_demo_commands() -> tuple[list[str], list[str]]:
    """The README's two demo lines: the copy of the workspace, then the `warpcode run` on the copy."""
    lines = [line.split("    #")[0] for line in (REPO_ROOT / "README.md").read_text().splitlines()]
    copy = [shlex.split(line) for line in lines if line.startswith("cp -r examples/")]
    run = [shlex.split(line) for line in lines if line.startswith("warpcode run") and "scripted:examples/" in line]
    assert len(copy) == 1 and len(run) == 1, "the README shows the demo as `cp -r examples/...` + `warpcode run`"
    return copy[0], run[0]


@pytest.mark.slow
def test_the_readme_demo_runs_as_written(tmp_path: Path) -> None:
    (_, _, source, destination), run = readme_demo_commands()
    assert run[run.index("--cwd") + 1] == destination, "the demo runs in the copy the README makes"
    workspace = tmp_path / "demo-repo"
    shutil.copytree(REPO_ROOT / source, workspace)
    run[run.index("--cwd") + 1] = str(workspace)
    environment = {**os.environ, "WARPCODE_STATE_DIR": str(tmp_path / "state"),
                   "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip
    environment.pop("WARPCODE_MODEL", None)
    done = subprocess.run(
        [WARPCODE, *run[1:]], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    updates = [json.loads(line) for line in done.stdout.splitlines()]  # --json: one update a line
    finished = [u for u in updates if u.get("sessionUpdate") == "tool_call_update" and u.get("status")]
    assert [u["status"] for u in finished if u["status"] != "in_progress"] == ["completed"] * 3, done.stdout
    assert "sum(numbers) / len(numbers)" in (workspace / "calc.py").read_text()
    tests = subprocess.run([sys.executable, "-m", "unittest"], cwd=workspace, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stderr
    original = subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=REPO_ROOT / source, capture_output=True, text=True
    )
    assert original.returncode != 0, "the demo's workspace must start with the bug the demo fixes"


CONFIG_PAGE = DOCS / "reference" / "config.md"
TOML_TYPES = {
    "str": "string",
    "str | None": "string",
    "int": "integer",
    "int | None": "integer",
    "bool": "boolean",
    "list[str]": "array of strings",
}


def test_the_config_reference_lists_every_key_the_loader_accepts_with_its_type_and_default(tmp_path: Path) -> None:
    rows = table_keys(section(CONFIG_PAGE, "Keys"))
    tables = {"mcp_servers"}  # documented in sections of their own
    fields = {field.name: field for field in dataclasses.fields(Settings) if field.name not in tables}
    assert sorted(rows) == sorted(fields), "docs/reference/config.md's keys differ from the loader's"
    given = []
    for name, (kind, default, _meaning) in rows.items():
        assert kind == TOML_TYPES[fields[name].type], f"{name}: documented as {kind}"
        field = fields[name]
        value = field.default_factory() if field.default is dataclasses.MISSING else field.default
        expected = "none" if value is None else f"`{json.dumps(value)}`"
        assert default == expected, f"{name}: documented default {default}, the code's {expected}"
        if default != "none":
            given.append(f"{name} = {default.strip('`')}")
    path = tmp_path / "config.toml"
    path.write_text("\n".join(given) + "\n")  # the documented defaults, written as the page says: accepted
    assert load_settings(path=path, env={}) == Settings()


def test_the_config_reference_lists_every_key_of_an_mcp_server() -> None:
    from warpcode.agent.mcp.specs import CONFIG_KEYS, STARTUP_TIMEOUT_S, TOOL_TIMEOUT_S

    rows = table_keys(section(CONFIG_PAGE, "MCP servers"))
    assert sorted(rows) == sorted(CONFIG_KEYS)
    assert rows["startup_timeout_s"][1] == f"`{STARTUP_TIMEOUT_S:g}`"
    assert rows["tool_timeout_s"][1] == f"`{TOOL_TIMEOUT_S:g}`"


def test_the_batch_reference_lists_every_jobs_field_and_every_results_field() -> None:
    page = DOCS / "reference" / "batch-files.md"
    jobs_rows = table_keys(section(page, "JOBS.jsonl: one job a line"))
    assert sorted(jobs_rows) == sorted(jobs._FIELDS)
    results_rows = table_keys(section(page, "RESULTS.jsonl: one row per job"))
    assert sorted(results_rows) == sorted(runner.error_row("id", None, "problem"))


def test_the_model_server_reference_names_every_request_field() -> None:
    from warpcode.model_runtime.openai_server import schemas  # pydantic only: no engine, no torch

    text = (DOCS / "reference" / "model-server.md").read_text()
    documented = set(re.findall(r"`([a-z_]+)`", text))
    bodies = (schemas.CompletionRequest, schemas.ChatCompletionRequest, schemas.ChatMessage)
    fields = {name for body in bodies for name in body.model_fields}
    assert not fields - documented, f"request fields the page does not name: {sorted(fields - documented)}"


def test_the_scripted_model_reference_lists_every_tool_with_its_arguments() -> None:
    from warpcode.agent.toolbox import TOOLS

    text = " ".join((DOCS / "reference" / "scripted-model.md").read_text().split())
    listed = {name: arguments.split(", ") for name, arguments in re.findall(r"`([a-z_]+)` \(([a-z_, ]+)\)", text)}
    tools = {name: list(spec["parameters"]["properties"]) for name, spec in TOOLS.items()}
    assert {name: listed.get(name) for name in tools} == tools
