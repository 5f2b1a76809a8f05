"""Speculative decoding's acceptance on real edits, without a model: the suffix drafter under teacher forcing.

For each change of the fixture (one file before and after a commit of a public repository: tests/fixtures/
speculative/commits.jsonl.gz, its sources in SOURCES.md there) the context is the agent's read_file call and the
old file as it read it, and the output is forced to be the true one, in three kinds, as the built-in model writes
tool calls (Qwen3-Coder's XML; `--json-args`: Hermes' JSON, whose escapes break copies):

  rewrite  a write_file call with the whole new file
  edit     edit_file calls, one per changed hunk (old_text with context lines until it is unique in the file)
  diff     an apply_patch call with the unified diff (3 context lines)

and three contexts: `plain` (the file's text), `numbered` (read_file's output: `{n:>6}\\t{line}`), `numbered+doc`
(read_file's output, and the file's plain text indexed as a document, as issue 50 proposes). Each step the draft
policy (model_runtime/speculative/policy.py) says how many tokens to draft, the drafter proposes them, and the
accepted ones are the draft's prefix that matches the true continuation; the step yields them plus one (a verify
step always yields the model's next token). Reported per output kind and context, and per repository: tokens per
verify step, the fraction of steps that drafted, accepted / drafted tokens, the drafter's CPU time per step (mean,
indexing the context included, and 99th percentile), and a **projection** of batch-1 tok/s on the H200: a step
verifying d drafted tokens is costed as a decode step of d + 1 rows, from issue 50's measured decode steps
(interpolated linearly; past 32 rows, the last segment's slope). 'slower' counts the changes projected slower than
decoding without speculation.

    python -m warpcode.bench.speculative_acceptance                    # the whole fixture, table on stdout
    python -m warpcode.bench.speculative_acceptance --limit 5 --out speculative.json
    python -m warpcode.bench.speculative_acceptance --mine /work/.mirror/*/repo --write   # rebuild the fixture

The tokenizer is the built-in model's (model_runtime/builtin/tokenizer.json; `--tokenizer FILE` for another
tokenizer.json): nothing is downloaded.
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import gzip
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from warpcode.bench.edit_corpus import LICENCES  # the repositories whose files may be kept as test data
from warpcode.model_runtime.speculative import DraftConfig, DraftPolicy, SuffixDrafter

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speculative"  # in a checkout
FIXTURE = FIXTURE_DIR / "commits.jsonl.gz"
KINDS = ("rewrite", "edit", "diff")
CONTEXTS = ("plain", "numbered", "numbered+doc")
# Issue 50, measured on the H200 (random weights, one call): decode step time (ms) by rows in the batch.
STEP_MS = {
    "bf16": ((1, 2.20), (2, 3.51), (4, 4.99), (8, 7.56), (16, 11.64), (32, 14.83)),
    "mxfp8": ((1, 1.88), (2, 2.70), (4, 3.57), (8, 5.35), (16, 8.51), (32, 10.89)),
}
EDIT_CONTEXT_LINES = 1  # context lines around a hunk in old_text, more (up to 6) until it is unique
MAX_EDIT_CONTEXT_LINES = 6

# Mining (--mine): one changed source file per commit, of moderate size.
SOURCE_EXTENSIONS = {".py", ".go", ".js", ".rs", ".c", ".h", ".ts"}
MIN_OLD_BYTES, MAX_OLD_BYTES, MAX_NEW_BYTES = 1_000, 20_000, 24_000
MIN_CHANGED_LINES, MAX_CHANGED_LINES = 2, 150
MAX_PER_PATH = 2  # changes of one file taken per repository


@dataclass
class Change:
    repo: str
    commit: str
    parent: str
    path: str
    licence: str
    old: str
    new: str


def load_changes(path: Path = FIXTURE, limit: int | None = None, repos: Iterable[str] = ()) -> list[Change]:
    wanted = set(repos)
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        changes = [Change(**json.loads(line)) for line in stream if line.strip()]
    if wanted:
        changes = [change for change in changes if change.repo in wanted]
    return changes[:limit] if limit is not None else changes


# The outputs, as the model writes them


def tool_call(name: str, arguments: dict[str, str], json_args: bool = False) -> str:
    """One call in the built-in model's format (training/chat_template.jinja), or Hermes' JSON."""
    if json_args:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def edit_hunks(old: str, new: str) -> list[tuple[str, str]]:
    """(old_text, new_text) per changed hunk, as an agent's edit_file calls made one after the other: the changed
    lines with a context line each side, more (up to MAX_EDIT_CONTEXT_LINES) while old_text is not unique in the file
    as the earlier calls left it (or is blank), without the block's last newline. Applied in order, they make `new`."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    groups = list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(EDIT_CONTEXT_LINES))
    hunks = []
    done_old = done_new = 0  # the file so far: b[:done_new] + a[done_old:]
    for number, group in enumerate(groups):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        current = b[:done_new] + a[done_old:]
        at, end = done_new + i1 - done_old, done_new + i2 - done_old  # the block's lines in `current`
        room_after = (groups[number + 1][0][1] if number + 1 < len(groups) else len(a)) - i2  # unchanged lines
        text = "".join(current)
        for extra in range(MAX_EDIT_CONTEXT_LINES - EDIT_CONTEXT_LINES + 1):
            before, after = min(extra, at, j1), min(extra, room_after)
            old_text = "".join(current[at - before : end + after])
            new_text = "".join(b[j1 - before : j2 + after])
            if old_text.endswith("\n") and new_text.endswith("\n"):
                old_text, new_text = old_text[:-1], new_text[:-1]
            if old_text.strip() and text.count(old_text) == 1:
                break
        hunks.append((old_text, new_text))
        done_old, done_new = i2 + after, j2 + after
    return hunks


def unified_diff(old: str, new: str, path: str) -> str:
    lines = []
    for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3
    ):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def outputs(change: Change, json_args: bool = False) -> dict[str, str]:
    """Each output kind's text for one change."""
    edits = [
        tool_call("edit_file", {"path": change.path, "old_text": old, "new_text": new}, json_args)
        for old, new in edit_hunks(change.old, change.new)
    ]
    patch = unified_diff(change.old, change.new, change.path)
    return {
        "rewrite": tool_call("write_file", {"path": change.path, "content": change.new}, json_args),
        "edit": "\n".join(edits),
        "diff": tool_call("apply_patch", {"patch": patch}, json_args),
    }


def numbered(text: str, name: str = "file.txt") -> str:
    """The file as our read_file shows it (numbered lines), by the tool itself."""
    from warpcode.tools import Workspace, read_file

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / name).write_bytes(text.encode("utf-8", "surrogateescape"))
        return read_file(Workspace(root, state_dir=Path(tmp) / "state"), name).render()


def context_text(change: Change, context: str, json_args: bool = False) -> str:
    """What the model has seen before it writes: its read_file call and the file as that call showed it."""
    shown = change.old if context == "plain" else numbered(change.old, Path(change.path).name)
    return tool_call("read_file", {"path": change.path}, json_args) + "\n" + shown + "\n"


# Teacher forcing


@dataclass
class Run:
    tokens: int = 0  # output tokens
    steps: int = 0  # verify steps (a step drafting nothing is a plain decode step)
    drafting_steps: int = 0
    drafted: int = 0
    accepted: int = 0
    rows: dict[int, int] = field(default_factory=dict)  # rows verified in a step (drafted + 1) -> steps
    drafter_s: float = 0.0  # CPU time in the drafter and the policy
    drafter_step_s: list[float] = field(default_factory=list)  # of it, each step's (building the index apart)

    def add(self, other: Run) -> None:
        self.tokens += other.tokens
        self.steps += other.steps
        self.drafting_steps += other.drafting_steps
        self.drafted += other.drafted
        self.accepted += other.accepted
        for rows, count in other.rows.items():
            self.rows[rows] = self.rows.get(rows, 0) + count
        self.drafter_s += other.drafter_s
        self.drafter_step_s += other.drafter_step_s

    def projected_ms(self, precision: str) -> float:
        return sum(step_ms(rows, precision) * count for rows, count in self.rows.items())

    def summary(self) -> dict[str, float]:
        result = {
            "tokens": self.tokens,
            "steps": self.steps,
            "tokens_per_step": self.tokens / max(self.steps, 1),
            "drafting_fraction": self.drafting_steps / max(self.steps, 1),
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance": self.accepted / max(self.drafted, 1),
            "drafter_us_per_step": 1e6 * self.drafter_s / max(self.steps, 1),
            "drafter_us_p99": 1e6 * percentile(self.drafter_step_s, 0.99),
        }
        for precision in STEP_MS:
            baseline = self.tokens * step_ms(1, precision)
            spent = self.projected_ms(precision)
            result[f"projected_tok_s_{precision}"] = 1000 * self.tokens / spent if spent else 0.0
            result[f"baseline_tok_s_{precision}"] = 1000 * self.tokens / baseline if baseline else 0.0
            result[f"speedup_{precision}"] = baseline / spent if spent else 0.0
        return result


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)] if ordered else 0.0


def step_ms(rows: int, precision: str = "bf16") -> float:
    """Issue 50's decode step time for `rows` rows, linear between the measured sizes and past the last."""
    points = STEP_MS[precision]
    sizes = [size for size, _ in points]
    at = min(max(bisect.bisect_left(sizes, rows), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[at - 1], points[at]
    return y0 + (y1 - y0) * (rows - x0) / (x1 - x0)


def simulate(
    context: Sequence[int],
    target: Sequence[int],
    config: DraftConfig,
    documents: Iterable[Sequence[int]] = (),
    guard: bool = True,
) -> Run:
    """Decode `target` after `context` with speculation, every verify step judged against the true tokens."""
    clock = time.perf_counter
    begin = clock()
    drafter = SuffixDrafter(config, context)
    for document in documents:
        drafter.add_document(document)
    policy = DraftPolicy(config)
    run = Run(tokens=len(target))
    position = 0
    inside = clock() - begin
    while position < len(target):
        begin = clock()
        draft = drafter.propose(policy.length() if guard else config.max_draft)
        spent = clock() - begin
        accepted = 0
        while accepted < len(draft) and position + accepted < len(target):
            if draft[accepted] != target[position + accepted]:
                break
            accepted += 1
        produced = min(accepted + 1, len(target) - position)  # the model's own token after the accepted ones
        begin = clock()
        policy.update(len(draft), accepted)
        drafter.extend(target[position : position + produced])
        spent += clock() - begin
        inside += spent
        run.drafter_step_s.append(spent)
        position += produced
        run.steps += 1
        run.rows[len(draft) + 1] = run.rows.get(len(draft) + 1, 0) + 1
        if draft:
            run.drafting_steps += 1
            run.drafted += len(draft)
            run.accepted += accepted
    run.drafter_s = inside
    return run


def load_tokenizer(path: str | None) -> Callable[[str], list[int]]:
    from tokenizers import Tokenizer

    if path is None:
        from warpcode.model_runtime.builtin_model import BUILTIN_DIR

        path = str(BUILTIN_DIR / "tokenizer.json")
    tokenizer = Tokenizer.from_file(path)
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


@dataclass
class Result:
    repo: str
    commit: str
    path: str
    kind: str
    context: str
    run: Run


def measure(
    changes: Sequence[Change],
    encode: Callable[[str], list[int]],
    config: DraftConfig,
    kinds: Sequence[str] = KINDS,
    contexts: Sequence[str] = CONTEXTS,
    guard: bool = True,
    json_args: bool = False,
) -> list[Result]:
    results = []
    for change in changes:
        texts = outputs(change, json_args)
        targets = {kind: encode(texts[kind]) for kind in kinds}
        plain = encode(change.old)
        shown = {}
        for context in contexts:
            mode = "plain" if context == "plain" else "numbered"
            if mode not in shown:
                shown[mode] = encode(context_text(change, mode, json_args))
            documents = [plain] if context == "numbered+doc" else []
            for kind in kinds:
                run = simulate(shown[mode], targets[kind], config, documents, guard)
                results.append(Result(change.repo, change.commit, change.path, kind, context, run))
    return results


def aggregate(results: Iterable[Result], key: Callable[[Result], tuple]) -> dict[tuple, Run]:
    totals: dict[tuple, Run] = defaultdict(Run)
    for result in results:
        totals[key(result)].add(result.run)
    return totals


def slower(results: Iterable[Result], precision: str = "bf16") -> dict[tuple[str, str], tuple[int, int]]:
    """(kind, context) -> (changes projected slower than without speculation, changes)."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        entry = counts[result.kind, result.context]
        entry[1] += 1
        if result.run.projected_ms(precision) > result.run.tokens * step_ms(1, precision) * 1.0001:
            entry[0] += 1
    return {key: (value[0], value[1]) for key, value in counts.items()}


def report(results: list[Result], changes: Sequence[Change], config: DraftConfig, guard: bool) -> dict:
    kinds = [kind for kind in KINDS if any(r.kind == kind for r in results)]
    contexts = [context for context in CONTEXTS if any(r.context == context for r in results)]
    repos = sorted({change.repo for change in changes})
    by_kind = aggregate(results, lambda r: (r.kind, r.context))
    by_repo = aggregate(results, lambda r: (r.repo, r.kind, r.context))
    late = slower(results)
    print(
        f"{len(changes)} changes of {len(repos)} repositories; drafter min_match={config.min_match} "
        f"max_draft={config.max_draft} probe={config.probe} patience={config.patience} "
        f"retry_after={config.retry_after} growth={config.growth}; "
        f"policy {'guard' if guard else 'off (always max_draft)'}"
    )
    print(
        "\nPROJECTION (not measured end to end): a step verifying d drafted tokens costed as a decode step of d + 1 "
        "rows\n(H200, issue 50: bf16 2.20/3.51/4.99/7.56/11.64/14.83 ms, MXFP8 1.88/2.70/3.57/5.35/8.51/10.89 ms "
        "at 1/2/4/8/16/32 rows)\n"
    )
    header = (
        f"{'kind':8} {'context':13} {'tokens':>8} {'tok/step':>8} {'drafting':>8} {'accept':>7} {'us/step':>7} "
        f"{'p99 us':>7} {'bf16 tok/s':>10} {'x':>5} {'mxfp8 tok/s':>11} {'x':>5} {'slower':>7}"
    )
    print(header)
    summary = []
    for kind in kinds:
        for context in contexts:
            run = by_kind.get((kind, context))
            if run is None:
                continue
            row = run.summary()
            count, total = late[kind, context]
            print(
                f"{kind:8} {context:13} {row['tokens']:>8} {row['tokens_per_step']:>8.2f} "
                f"{row['drafting_fraction']:>8.0%} {row['acceptance']:>7.0%} {row['drafter_us_per_step']:>7.1f} "
                f"{row['drafter_us_p99']:>7.0f} "
                f"{row['projected_tok_s_bf16']:>10.0f} {row['speedup_bf16']:>5.2f} "
                f"{row['projected_tok_s_mxfp8']:>11.0f} {row['speedup_mxfp8']:>5.2f} {f'{count}/{total}':>7}"
            )
            summary.append({"kind": kind, "context": context, **row, "slower_bf16": count, "changes": total})
    print(
        f"\nbaseline (no speculation): {1000 / step_ms(1, 'bf16'):.0f} tok/s bf16, "
        f"{1000 / step_ms(1, 'mxfp8'):.0f} tok/s MXFP8; 'slower': changes projected slower than that (bf16)"
    )
    print("\ntokens per verify step by repository and output kind; contexts: plain / numbered / numbered+doc")
    columns = [(kind, context) for kind in kinds for context in contexts]
    width = 7 * len(contexts)
    print(f"{'repository':20} {'n':>3} " + " ".join(f"{kind:>{width}}" for kind in kinds))
    per_repo = []
    for repo in repos:
        count = sum(1 for change in changes if change.repo == repo)
        cells = []
        for kind, context in columns:
            run = by_repo.get((repo, kind, context))
            value = run.summary() if run else None
            cells.append(f"{value['tokens_per_step']:>7.2f}" if value else f"{'-':>7}")
            if value:
                per_repo.append({"repo": repo, "kind": kind, "context": context, **value})
        groups = ["".join(cells[i : i + len(contexts)]) for i in range(0, len(cells), len(contexts))]
        print(f"{repo:20} {count:>3} " + " ".join(groups))
    return {
        "config": asdict(config),
        "guard": guard,
        "step_ms": {precision: {str(rows): ms for rows, ms in points} for precision, points in STEP_MS.items()},
        "changes": [
            {"repo": c.repo, "commit": c.commit, "parent": c.parent, "path": c.path, "licence": c.licence}
            for c in changes
        ],
        "summary": summary,
        "per_repo": per_repo,
    }


# Mining the fixture from bare git mirrors


def _git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, check=True).stdout


def mine(git_dir: str, per_repo: int, commits: int = 4000) -> list[Change]:
    """The latest `per_repo` commits (newest first, no merges) that change one source file of moderate size, with a
    change of a few lines to a few hundred, at most MAX_PER_PATH per file."""
    repo = Path(git_dir).parent.name.replace("+", "/")
    log = _git(git_dir, "log", "--no-merges", f"-n{commits}", "--format=%H %P", "HEAD").decode().splitlines()
    taken: list[Change] = []
    per_path: dict[str, int] = defaultdict(int)
    for entry in log:
        ids = entry.split()
        if len(ids) != 2:
            continue
        commit, parent = ids
        stats = _git(git_dir, "diff-tree", "-r", "--no-renames", "--numstat", parent, commit).decode().splitlines()
        if len(stats) != 1:
            continue  # one file changed in the commit
        added, deleted, path = stats[0].split("\t", 2)
        if added == "-" or Path(path).suffix not in SOURCE_EXTENSIONS or per_path[path] >= MAX_PER_PATH:
            continue
        if not MIN_CHANGED_LINES <= int(added) + int(deleted) <= MAX_CHANGED_LINES:
            continue
        try:
            old = _git(git_dir, "show", f"{parent}:{path}")
            new = _git(git_dir, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            continue  # added or deleted
        if not MIN_OLD_BYTES <= len(old) <= MAX_OLD_BYTES or len(new) > MAX_NEW_BYTES or b"\r" in old + new:
            continue
        try:
            change = Change(repo, commit, parent, path, LICENCES.get(repo, ""), old.decode(), new.decode())
        except UnicodeDecodeError:
            continue
        taken.append(change)
        per_path[path] += 1
        if len(taken) >= per_repo:
            break
    return taken


def write_fixture(changes: Sequence[Change], path: Path = FIXTURE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(asdict(change), ensure_ascii=False) + "\n" for change in changes)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as stream:
        stream.write(lines.encode("utf-8"))
    sources = [
        "# Speculative decoding's acceptance: real single-file changes",
        "",
        "`commits.jsonl.gz`: one JSON object a line, `repo`, `commit`, `parent`, `path`, `licence`, `old` (the file",
        "at `parent`), `new` (at `commit`), mined by `python -m warpcode.bench.speculative_acceptance --mine",
        "GIT_DIR... --write` from bare mirrors of the public GitHub repositories below (commits changing one source",
        f"file of {MIN_OLD_BYTES:,}-{MAX_OLD_BYTES:,} bytes, {MIN_CHANGED_LINES}-{MAX_CHANGED_LINES} lines changed).",
        "",
        "| repository | licence | commit | path |",
        "| --- | --- | --- | --- |",
    ]
    sources += [f"| {c.repo} | {c.licence} | {c.commit} | {c.path} |" for c in changes]
    (path.parent / "SOURCES.md").write_text("\n".join(sources) + "\n", encoding="utf-8")
    print(f"wrote {len(changes)} changes, {path.stat().st_size:,} bytes, to {path}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE, help="changes to measure (JSONL, gzipped)")
    parser.add_argument("--limit", type=int, help="only the first N changes")
    parser.add_argument("--repo", action="append", default=[], help="only this repository's changes (repeatable)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"output kinds, of {','.join(KINDS)}")
    parser.add_argument("--contexts", default=",".join(CONTEXTS), help=f"contexts, of {','.join(CONTEXTS)}")
    parser.add_argument("--tokenizer", help="a tokenizer.json (default: the built-in model's)")
    parser.add_argument("--min-match", type=int, default=DraftConfig.min_match)
    parser.add_argument("--max-draft", type=int, default=DraftConfig.max_draft)
    parser.add_argument("--probe", type=int, default=DraftConfig.probe)
    parser.add_argument("--patience", type=int, default=DraftConfig.patience)
    parser.add_argument("--retry-after", type=int, default=DraftConfig.retry_after)
    parser.add_argument("--growth", type=int, default=DraftConfig.growth, help="draft growth (0: max_draft at once)")
    parser.add_argument("--no-guard", action="store_true", help="draft max_draft every step (no draft policy)")
    parser.add_argument("--json-args", action="store_true", help="tool calls in Hermes' JSON instead of XML")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--mine", nargs="+", metavar="GIT_DIR", help="mine changes from bare git mirrors instead")
    parser.add_argument("--per-repo", type=int, default=9, help="with --mine: changes per repository")
    parser.add_argument("--write", action="store_true", help="with --mine: write them as the fixture (--fixture)")
    args = parser.parse_args(argv)
    if args.mine:
        changes = [change for git_dir in args.mine for change in mine(git_dir, args.per_repo)]
        for change in changes:
            print(f"{change.repo:20} {change.commit[:10]} {len(change.old):>6} {len(change.new):>6} {change.path}")
        if args.write:
            write_fixture(changes, args.fixture)
        return None
    kinds, contexts = args.kinds.split(","), args.contexts.split(",")
    unknown = sorted(set(kinds) - set(KINDS)) + sorted(set(contexts) - set(CONTEXTS))
    if unknown:
        parser.error(f"unknown kinds or contexts: {', '.join(unknown)}")
    config = DraftConfig(args.min_match, args.max_draft, args.probe, args.patience, args.retry_after, args.growth)
    changes = load_changes(args.fixture, args.limit, args.repo)
    if not changes:
        parser.error("no changes to measure")
    results = measure(
        changes, load_tokenizer(args.tokenizer), config, kinds, contexts, not args.no_guard, args.json_args
    )
    document = report(results, changes, config, not args.no_guard)
    document["tokenizer"] = args.tokenizer or "model_runtime/builtin/tokenizer.json"
    document["json_args"] = args.json_args
    if args.out:
        args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return document


if __name__ == "__main__":
    main()
