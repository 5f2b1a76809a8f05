"""experiments/gpu_session.py and experiments/ab.py without a GPU: the step table names only files and modules that
are there, --list and --dry-run print it, and the A/B harness alternates its arms and computes the ratios of known
numbers printed by two fake trees."""

import importlib.util
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1]
ROOT = EXPERIMENTS.parent
sys.path.insert(0, str(EXPERIMENTS))
import ab  # noqa: E402
import gpu_session  # noqa: E402
import steps  # noqa: E402
from gpu_session import STEPS, Options  # noqa: E402
from steps import Action, Arm, Compare, Session, Step  # noqa: E402

RETURNABLE_NAME = re.compile(r"[A-Za-z0-9._-]+")  # what a device call brings back from $OUT


def every_plan(tmp_path):
    variant = tmp_path / "variant.json"
    variant.write_text("{}")
    options = Options(
        out=tmp_path / "out",
        config_variants=(variant,),
        ab_command="python3 -m warpcode.agent bench decode --json",
        sweep_env=("SOME_SETTING=1",),
    )
    return {name: step.commands(options, options.args_for(step)) for name, step in STEPS.items()}


def test_every_step_runs_scripts_modules_and_tests_that_are_there(tmp_path):
    for name, plan in every_plan(tmp_path).items():
        arms = [item for item in plan if isinstance(item, Arm)]
        assert arms or name == "install", name
        for arm in arms:
            argv = arm.argv
            if "-m" in argv:  # python3 -m MODULE: importable from this tree
                module = argv[argv.index("-m") + 1]
                assert importlib.util.find_spec(module) is not None, (name, module)
            for word in argv:
                if word.endswith(".py") or word.startswith(("tests/", "kernels/", "experiments/")):
                    assert (ROOT / word).exists(), (name, word)
        for kept in STEPS[name].keep:
            assert (ROOT / kept).is_file(), (name, kept)


def test_steps_have_a_one_line_help_and_a_log_of_their_own_that_comes_back(tmp_path):
    logs = [step.log for step in STEPS.values()]
    assert len(set(logs)) == len(logs)
    for step in STEPS.values():
        assert step.help and "\n" not in step.help, step.name
        assert RETURNABLE_NAME.fullmatch(step.log), step.log
    for name, plan in every_plan(tmp_path).items():
        rule = STEPS[name].compare
        if rule is None:
            continue
        names = [arm.name for arm in plan if isinstance(arm, Arm)]
        assert len(set(names)) == len(names) >= 2 and all(names), name
        assert rule.reference in names, name


def run_script(script: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    command = [sys.executable, str(EXPERIMENTS / script), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_list_and_help_print_every_step():
    listed = run_script("gpu_session.py", "--list")
    helped = run_script("gpu_session.py", "--help")
    assert listed.returncode == 0 and helped.returncode == 0
    for name in STEPS:
        assert f"  {name} " in listed.stdout and f"  {name} " in helped.stdout, name


def test_dry_run_prints_the_commands_and_runs_none(tmp_path):
    result = run_script("gpu_session.py", "--dry-run", "--out", str(tmp_path), "install", "tests", "ab", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    pytest = "python3 -m pytest -q -m gpu -p no:cacheprovider -rs --continue-on-collection-errors"
    assert f"{pytest} tests/kernels tests/model_runtime" in result.stdout
    assert "cd /tmp/warpcode-ab-base && python3 -m warpcode.agent bench decode" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mx-configs"], "mx-configs needs --config-variant PATH"),
        (["nonsense"], "no step nonsense"),
        (["tests", "--args", "nonsense=-x"], "--args takes STEP=ARGS"),
        (["tune", "--tune-shapes", "2048,768"], "--tune-shapes takes H,I,E,K:LARGEST_BATCH"),
    ],
)
def test_a_step_that_lacks_its_option_is_refused_before_anything_runs(tmp_path, args, message):
    result = run_script("gpu_session.py", "--out", str(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr
    assert list(tmp_path.iterdir()) == []


# Two fake trees: each run prints a non-JSON line and two measurements, the rate growing by 1 with each run of that
# tree (a counter file in the tree), so that the means over two rounds are RATE + 0.5.
MEASURE = """import json, pathlib
count = pathlib.Path("count")
run = int(count.read_text()) if count.exists() else 0
count.write_text(str(run + 1))
print("compiling")
print(json.dumps({"batch": 1, "context": 512, "tokens_per_second": RATE + run, "copy_tb_s": 4.0}))
print(json.dumps({"batch": 8, "context": 512, "tokens_per_second": 4 * RATE + run, "copy_tb_s": 4.0}))
"""


def fake_tree(folder: Path, rate: float) -> Path:
    folder.mkdir()
    (folder / "measure.py").write_text(f"RATE = {rate}\n{MEASURE}")
    return folder


def test_the_harness_alternates_the_trees_and_gives_each_ratio_to_the_reference(tmp_path):
    base, this = fake_tree(tmp_path / "base", 100.0), fake_tree(tmp_path / "this", 119.5)
    log = tmp_path / "ab.log"
    result = run_script(
        "ab.py", "--arm", f"this={this}", "--arm", f"base={base}", "--rounds", "2", "--log", str(log),
        "--reference", "base", "--", sys.executable, "measure.py",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    starts = [" ".join(line.split()[:3]) for line in log.read_text().splitlines() if line.endswith("compiling")]
    assert starts == ["this round 1", "base round 1", "this round 2", "base round 2"]

    found = ab.measurements(log.read_text().splitlines())
    comparisons = ab.compare(found, reference="base")
    rates = {(c.case, c.arm): c for c in comparisons if c.metric == "tokens_per_second"}
    batch_1 = (("batch", 1), ("context", 512))
    assert rates[batch_1, "this"].values == (119.5, 120.5)
    assert rates[batch_1, "this"].ratio == pytest.approx(120.0 / 100.5)
    assert rates[batch_1, "base"].ratio == pytest.approx(1.0)
    batch_8 = (("batch", 8), ("context", 512))
    assert rates[batch_8, "this"].ratio == pytest.approx(478.5 / 400.5)
    copy = [c for c in comparisons if c.metric == "copy_tb_s" and c.arm == "this"]
    assert [c.ratio for c in copy] == [pytest.approx(1.0)] * 2
    assert f"x{120.0 / 100.5:.4f}" in result.stdout and "batch=1 context=512: tokens_per_second" in result.stdout

    keyed = ab.compare(found, reference="this", keys=["batch"], metrics=["tokens_per_second"])
    assert {c.case for c in keyed} == {(("batch", 1),), (("batch", 8),)}
    assert next(c for c in keyed if c.arm == "base" and c.case == (("batch", 1),)).ratio == pytest.approx(100.5 / 120)
    with pytest.raises(ValueError, match="no arm 'other'"):
        ab.compare(found, reference="other")


def test_a_rows_note_does_not_split_its_case():
    """`bench serve` rows carry a note quoting the run's own numbers: the arms' rows are still one case."""
    lines = [
        'this round 1 {"scenario": "cold-prefill", "streams": 1, "ttft_ms_p50": 45.0, "note": "TTFT 45.0 ms"}',
        'base round 1 {"scenario": "cold-prefill", "streams": 1, "ttft_ms_p50": 60.0, "note": "TTFT 60.0 ms"}',
    ]
    comparisons = ab.compare(ab.measurements(lines), reference="base")
    assert {c.case for c in comparisons} == {(("scenario", "cold-prefill"), ("streams", 1))}
    assert next(c for c in comparisons if c.arm == "this").ratio == pytest.approx(0.75)


def test_a_compared_step_logs_each_arm_and_round_and_prints_the_ratios(tmp_path, capsys):
    print_rate = "import json, sys; print(json.dumps({'batch': 1, 'microseconds': float(sys.argv[1])}))"
    step = Step("fake", "two variants", "fake.log", lambda o, a: [], compare=Compare("slow", metrics=("microseconds",)))
    arms = [
        Arm("slow", (sys.executable, "-c", print_rate, "20.0")),
        Arm("fast", (sys.executable, "-c", print_rate, "15.0")),
    ]
    session = Session(ROOT, tmp_path, rounds=3)
    assert session.run(step, arms) == 0
    lines = (tmp_path / "fake.log").read_text().splitlines()
    assert [line.split(" {")[0] for line in lines if "{" in line and not line.startswith("#")] == [
        f"{arm} round {n}" for n in (1, 2, 3) for arm in ("slow", "fast")
    ]
    printed = capsys.readouterr().out
    assert "fast  15 / 15 / 15" in printed and "x0.7500" in printed


def test_a_plain_step_keeps_stdout_and_stderr_of_a_jsonl_log_apart_and_labels_its_runs(tmp_path, capsys):
    talk = "import sys; print('{\"a\": 1}'); print('progress', file=sys.stderr)"
    step = Step("fake", "labelled runs", "fake.jsonl", lambda o, a: [], tail=1)
    plan = [gpu_session.run(sys.executable, "-c", talk, label="first"), Action("nothing", lambda session, log: 0)]
    assert Session(ROOT, tmp_path).run(step, plan) == 0
    assert (tmp_path / "fake.jsonl").read_text() == 'first {"a": 1}\n'
    assert (tmp_path / "fake_err.log").read_text() == "progress\n"
    assert 'first {"a": 1}' in capsys.readouterr().out


def test_the_console_views_fold_the_benchmark_lines():
    row = {"path": "warp-decode", "weights": "mxfp8", "batch": 4, "microseconds": 12.5}
    row |= {"gigabytes_per_second": 3000.0, "percent_of_copy": 70.0, "relative_error": 1e-3, "timing": "graph"}
    assert gpu_session.moe_row(json.dumps(row)).split()[:5] == ["warp-decode", "mxfp8", "T=4", "12.5", "us"]
    crossover = {"shape": "2048,768,128,8", "crossover": 16}
    assert gpu_session.tune_row(json.dumps(crossover)) == "2048,768,128,8: warp decode faster up to T=16"
    assert gpu_session.tune_row("compiling") == "compiling"


def test_more_logs_than_a_device_call_brings_back_go_into_one_tarball(tmp_path):
    for index in range(steps.RETURNED_FILES):
        (tmp_path / f"step{index}.log").write_text(f"log {index}\n")
    steps.pack(tmp_path)
    assert len(list(tmp_path.iterdir())) == steps.RETURNED_FILES  # as many as come back: left as they are
    (tmp_path / "one_more.log").write_text("log\n")
    steps.pack(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["session.tar.gz"]
    with tarfile.open(tmp_path / "session.tar.gz") as archive:
        assert len(archive.getnames()) == steps.RETURNED_FILES + 1
