"""One device call's GPU work as a table of named steps: install, GPU tests, tuning, benchmarks, sweeps, probes and
A/B runs, each step's output in a log under --out ($OUT on the device machine: what is there comes back).

    python3 experiments/gpu_session.py --list                       # the steps, their logs and default arguments
    python3 experiments/gpu_session.py tests tune bench
    python3 experiments/gpu_session.py --dry-run install tests      # the commands, not run
    git archive HEAD~1 -o ab_base.tar && python3 experiments/gpu_session.py ab --batch 1,8   # this tree vs a base

The device machine starts bare and reaches no network: `install` runs first (unless --no-install) and installs
offline the wheels carried in .whl, then this tree (experiments/trees.py). Steps run in the order named; a failing
step is reported and the next one still runs (a call's device time is precious), and the exit status says whether
any failed. A step's extra arguments go to the script it runs (`--args STEP="..."` replaces the defaults that
--list shows), so the scripts' own options need no knob here. The A/B and variant steps run their arms alternating
(experiments/ab.py) and print each arm's ratio to the reference arm.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import trees
from ab import Arm
from steps import BASE_TREE, Action, Compare, Session, Step, describe, pack

ROOT = Path(__file__).resolve().parents[1]
PY = "python3"
CONFIG_FILE = "kernels/configs/NVIDIA_H200.json"  # the tuners write the launchers' tables here; it comes back
CONFIGS_ENV = "WARPCODE_TUNED_CONFIG_FOLDER"  # names the variant the launchers read instead (README: Configuration)
QWEN3_LAYER = "2048,768,128,8"  # H,I,E,K of qwen3-30b-a3b's MoE layer
MOE_BATCHES = "1,2,4,8,16,32,64,128"
# H,I,E,K:largest batch (mixtral's experts are 235 MB each: beyond 16 tokens the expert-centric path wins)
TUNE_SHAPES = (f"{QWEN3_LAYER}:128", "2048,1024,64,8:128", "4096,14336,8,2:16")
MOE_SHAPES = (QWEN3_LAYER, "2048,1024,64,8", "4096,14336,8,2")


class StepError(ValueError):
    """A step cannot be built from the options given (the message says which option it needs)."""


@dataclass(frozen=True)
class Options:
    """The runner's parameters: where the logs go, and what several steps share."""

    out: Path = Path("/tmp/warpcode-gpu")
    wheels: Path = ROOT / ".whl"
    rounds: int = 2
    base_tarball: Path = ROOT / "ab_base.tar"
    batch: str | None = None  # decode batches of the decode-benchmark steps (None: each step's own)
    context: str | None = None
    tune_shapes: tuple[str, ...] = TUNE_SHAPES
    centric_shapes: tuple[str, ...] = (QWEN3_LAYER,)
    moe_shapes: tuple[str, ...] = MOE_SHAPES
    ab_command: str | None = None
    config_variants: tuple[Path, ...] = ()
    sweep_env: tuple[str, ...] = ()  # NAME=VALUE
    step_args: Mapping[str, str] = field(default_factory=dict)  # step name -> its extra arguments

    def args_for(self, step: Step) -> list[str]:
        return shlex.split(self.step_args.get(step.name, step.args))


# --- the commands the steps are made of


def run(*argv: str, label: str = "", env: Mapping[str, str | None] | None = None) -> Arm:
    """A command of a plain step, in the repository root; LABEL (if any) starts each of its log lines."""
    return Arm(label, tuple(argv), env=env or {})


def module(name: str, *args: str) -> tuple[str, ...]:
    return (PY, "-m", name, *args)


def script(name: str, *args: str) -> tuple[str, ...]:
    return (PY, f"experiments/{name}", *args)


def warpcode(*args: str) -> tuple[str, ...]:
    return module("warpcode.agent", *args)


def gpu_pytest(*paths: str) -> tuple[str, ...]:
    # The device image has no FastAPI: the server's test modules (no GPU tests among them) cannot be collected there.
    keep_going = "--continue-on-collection-errors"
    return module("pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "-rs", keep_going, *paths)


def decode(o: Options, batch: str, context: str, *extra: str) -> tuple[str, ...]:
    """`bench decode` of qwen3-30b-a3b on random weights at --batch and --context, else the step's own."""
    return ("bench", "decode", "--preset", "qwen3-30b-a3b", "--random-weights", "--batch", o.batch or batch,
            "--context", o.context or context, *extra)  # fmt: skip


def moe(shape: str, *extra: str) -> tuple[str, ...]:
    return warpcode("bench", "moe", "--shape", shape, *extra, "--json")


def this_and_base(argv: tuple[str, ...]) -> list[Arm]:
    """The same command in this tree and in the base tree (--base-tarball), each installed before its run."""
    return [Arm("this", argv, install=True), Arm("base", argv, cwd=BASE_TREE, install=True)]


def batches_up_to(spec: str) -> tuple[str, str]:
    shape, _, largest = spec.partition(":")
    if not re.fullmatch(r"\d+(,\d+){3}", shape) or not largest.isdigit():
        raise StepError(f"--tune-shapes takes H,I,E,K:LARGEST_BATCH (e.g. {TUNE_SHAPES[0]}), not {spec!r}")
    return shape, ",".join(str(batch) for batch in (1, 2, 4, 8, 16, 32, 64, 128) if batch <= int(largest))


def settings(o: Options) -> list[tuple[str, dict[str, str]]]:
    """--sweep-env's settings as (label, environment), or one run as is."""
    found = []
    for setting in o.sweep_env:
        name, separator, value = setting.partition("=")
        if not separator or not name:
            raise StepError(f"--sweep-env takes NAME=VALUE, not {setting!r}")
        found.append((setting, {name: value}))
    return found or [("", {})]


def config_variant_arms(o: Options, args: list[str]) -> list[Arm]:
    if not o.config_variants:
        raise StepError("mx-configs needs --config-variant PATH (written by experiments/config_variant.py)")
    argv = warpcode(*decode(o, "1,8", "512", "--weights", "mxfp8", "--prefill", "0"), *args, "--json")
    arms = [Arm("package", argv, env={CONFIGS_ENV: None})]
    for variant in o.config_variants:
        if not variant.exists():
            raise StepError(f"no config variant {variant}: write it with experiments/config_variant.py first")
        arms.append(Arm(variant.stem, argv, env={CONFIGS_ENV: str(variant.resolve())}))
    return arms


def ab_command(o: Options, args: list[str]) -> list[Arm]:
    if not o.ab_command:
        raise StepError('ab-cmd needs --ab-command "COMMAND" (run by bash in each tree\'s root)')
    return this_and_base(("bash", "-c", o.ab_command))


NCU_SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "WarpStateStats",
                "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats")  # fmt: skip
NCU_PIPES = ("inst_executed_pipe_alu", "inst_executed_pipe_fma", "inst_executed_pipe_xu", "inst_executed_pipe_lsu",
             "pipe_fmaheavy_cycles_active", "pipe_shared_cycles_active")  # fmt: skip


def ncu(*argv: str) -> tuple[str, ...]:
    """Hardware counters of the batch-1 warp decode and q/k/v GEMV kernels (the clocks left as they are)."""
    sections = [part for section in NCU_SECTIONS for part in ("--section", section)]
    metrics = ",".join(f"sm__{pipe}.avg.pct_of_peak_sustained_active" for pipe in NCU_PIPES)
    kernels = "regex:_gate_up_kernel|_down_kernel|_gemv_kernel"
    return ("ncu", "--clock-control", "none", "-k", kernels, *sections, "--metrics", metrics, *argv)


# --- the install step's own work


def install_wheels(session: Session, log: TextIO, folder: Path) -> int:
    session.base_env.update(trees.install_wheels(folder, log, session.base_env))
    return 0


def install_this_tree(session: Session, log: TextIO) -> int:
    session.tree_env = trees.install(ROOT, log, session.base_env)
    if session.tree_env:
        print("the editable install does not import here (see install.log): importing from linked folders", flush=True)
    return 0


def note_commit(session: Session, log: TextIO) -> int:
    try:
        found = subprocess.run(["git", "log", "-1", "--format=commit %H"], cwd=ROOT, capture_output=True, text=True)
        line = found.stdout.strip()
    except OSError:
        line = ""
    line = line or "commit: unknown (no git history in this copy of the tree)"
    log.write(line + "\n")
    print(line, flush=True)
    return 0


# --- console views of output lines (the logs keep the lines as they are)


def moe_row(line: str) -> str:
    """A `bench moe --json` line as one table row."""
    if not line.startswith("{"):
        return line
    row = json.loads(line)
    speedup = row.get("speedup_vs_transformers") or 0.0
    return (
        f"{row['path']:<24} {row.get('weights', 'bf16'):<6} T={row['batch']:<4} {row['microseconds']:8.1f} us "
        f"{row['gigabytes_per_second']:6.0f} GB/s {row['percent_of_copy']:5.1f}% err {row['relative_error']:.2e} "
        f"x{speedup:5.1f} {row['timing']}"
    )


def tune_row(line: str) -> str:
    """A tuner's JSON line as one row: the winning config per token count, or the crossover."""
    if not line.startswith("{"):
        return line
    row = json.loads(line)
    if "crossover" in row:
        return f"{row['shape']}: warp decode faster up to T={row['crossover']}"
    return (
        f"{row['shape']} T={row['batch']:<4} gate_up {row['gate_up_us']:7.1f} down {row['down_us']:7.1f} "
        f"total {row['total_us']:7.1f} us  expert-centric {row['expert_centric_us']:7.1f} us  {row['config']}"
    )


def matching(pattern: str) -> Callable[[str], str | None]:
    compiled = re.compile(pattern)
    return lambda line: line if compiled.search(line) else None


# --- the table

DECODE = Compare("base", keys=("path", "weights", "batch", "context"), metrics=("tokens_per_second",))
MOE = ("path", "weights", "batch")
DECODE_TESTS = ("tests/kernels/test_decode_attention_gpu.py tests/kernels/test_decode_small_kernels_gpu.py "
                "tests/kernels/test_gemv_gpu.py tests/model_runtime/test_sampling_device.py "
                "tests/model_runtime/test_decode_gpu.py")  # fmt: skip
MX_KERNEL_TESTS = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests/kernels").glob("*mx*_gpu.py"))
MX_TESTS = " ".join(["tests/kernels/test_mx.py", *MX_KERNEL_TESTS, "tests/model_runtime/test_mx_gpu.py"])
TRITON_VERSION = 'import triton, triton.language.extra.cuda as c; print("triton", triton.__version__, c.gdc_wait)'
NCU_LINES = r"^  _|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|pct_of_peak|Registers Per|Achieved Occ"
NCU_LINES += "|Local"
TURN_LINES = r"cached turn|budget|_paged_prefill_attention_kernel|_qk_norm_rope"

STEPS = {step.name: step for step in (
    Step("install", "carried wheels (.whl) and this tree, offline; the GPU, driver, clocks and commit",
         "install.log", lambda o, a: [
             Action(f"pip install --no-index --no-deps --target {trees.SITE} {o.wheels}/*.whl, then "
                    f"{trees.SITE} on PYTHONPATH (when {o.wheels} holds wheels)",
                    lambda session, log: install_wheels(session, log, o.wheels)),
             Action("pip install --no-deps --no-build-isolation -e . (if that does not import: a folder of links "
                    "to this tree first on PYTHONPATH)", install_this_tree),
             run("nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv"),
             Action("note the commit (git log -1)", note_commit)]),
    Step("tests", "pytest -m gpu over the test paths in ARGS (default: kernels and runtime)", "gpu_tests.log",
         lambda o, a: [run(PY, "-c", TRITON_VERSION), run(*gpu_pytest(*a))],
         args="tests/kernels tests/model_runtime", tail=25),
    Step("decode-tests", "the decode path's GPU tests: attention, small kernels, GEMV, sampling, decode",
         "decode_tests.log", lambda o, a: [run(*gpu_pytest(*a))], args=DECODE_TESTS, tail=30),
    Step("mx-tests", "MXFP8's GPU tests: the quantiser, every MX kernel, the runtime on MX weights", "mx_tests.log",
         lambda o, a: [run(*gpu_pytest(*a))], args=MX_TESTS, tail=25),
    Step("tune", f"warp-decode launch parameters and crossover per --tune-shapes, into {CONFIG_FILE}", "tune.log",
         lambda o, a: [run(*module("warpcode.bench.tune_warp_decode", "--shape", shape, "--batch", batches,
                                   "--write", CONFIG_FILE, *a))
                       for shape, batches in map(batches_up_to, o.tune_shapes)],
         show=tune_row, keep=(CONFIG_FILE,)),
    Step("tune-centric", f"the expert-centric path's grouped-GEMM tiles per --centric-shapes, into {CONFIG_FILE}",
         "tune_centric.log",
         lambda o, a: [run(*module("warpcode.bench.tune_expert_centric", "--shape", shape, *a, "--write", CONFIG_FILE))
                       for shape in o.centric_shapes],
         args="--batch 16,32,64,128", keep=(CONFIG_FILE,)),
    Step("mx-tune", f"MX warp-decode tiles and crossover (ARGS), then MX grouped-GEMM tiles, into {CONFIG_FILE}",
         "mx_tune.log", lambda o, a: [
             run(*module("warpcode.bench.tune_warp_decode", "--weights", "mxfp8", "--shape", QWEN3_LAYER, *a,
                         "--write", CONFIG_FILE)),
             run(*module("warpcode.bench.tune_expert_centric", "--weights", "mxfp8", "--shape", QWEN3_LAYER,
                         "--batch", "16,32,64,128", "--write", CONFIG_FILE))],
         args="--batch 1,2,4,8,16", show=tune_row, keep=(CONFIG_FILE,)),
    Step("bench", "one MoE layer per path and --moe-shapes: us, GB/s, % of copy, error", "bench_moe.jsonl",
         lambda o, a: [run(*moe(shape, *a)) for shape in o.moe_shapes], args=f"--batch {MOE_BATCHES}", show=moe_row),
    Step("moe-small", "qwen3's MoE layer at batch 1-8, our two paths only", "bench_moe_small.jsonl",
         lambda o, a: [run(*moe(QWEN3_LAYER, "--batch", "1,2,4,8", "--paths", "warp-decode,expert-centric", *a))],
         show=moe_row),
    Step("mx-bench", "qwen3's MoE layer with bf16 and MX weights in one run", "bench_moe_mx.jsonl",
         lambda o, a: [run(*moe(QWEN3_LAYER, "--weights", "bf16,mxfp8", *a))], args=f"--batch {MOE_BATCHES}",
         show=moe_row),
    Step("pdl", "qwen3's MoE layer at batch 1-8 without and with programmatic dependent launch", "pdl.log",
         lambda o, a: [Arm(name, moe(QWEN3_LAYER, "--batch", "1,2,4,8", "--paths", "warp-decode,expert-centric", *a),
                           env={"WARPCODE_DISABLE_PDL": disabled})
                       for name, disabled in (("pdl-off", "1"), ("pdl-on", "0"))],
         show=moe_row, compare=Compare("pdl-off", keys=MOE, metrics=("microseconds",))),
    Step("profile", "where a decode step's time goes (ARGS: --batch, --weights ...)", "profile.log",
         lambda o, a: [run(*module("warpcode.bench.profile_decode", *a))], args="--batch 1", tail=45),
    Step("decode", "whole-model decode of qwen3-30b-a3b, random weights (--batch, --context; default 1,8,32 and "
         "512,8192)", "bench_decode.jsonl",
         lambda o, a: [run(*warpcode(*decode(o, "1,8,32", "512,8192"), *a, "--json"))]),
    Step("decode-hf", "decode at batch 1 against transformers' (16 steps)", "bench_decode_hf.jsonl",
         lambda o, a: [run(*warpcode("bench", "decode", "--preset", "qwen3-30b-a3b", "--random-weights", "--batch",
                                     "1", "--context", "512", "--steps", "16", "--prefill", "0", "--compare-hf", *a,
                                     "--json"))]),
    Step("mx-decode", "whole-model decode, bf16 and MX alternating (--batch, --context; default 1,8,32 and "
         "512,8192): MX's ratio to bf16", "mx_decode.log",
         lambda o, a: [Arm(weights, warpcode(*decode(o, "1,8,32", "512,8192", "--weights", weights), *a, "--json"))
                       for weights in ("bf16", "mxfp8")],
         compare=Compare("bf16", keys=DECODE.keys, metrics=DECODE.metrics)),
    Step("serve", "the serving engine: concurrency, multi-turn trace, long prompt under load, cold prefill",
         "bench_serve.jsonl",
         lambda o, a: [run(*warpcode("bench", "serve", "--preset", "qwen3-30b-a3b", "--random-weights", *a,
                                     "--json"))]),
    Step("structured", "decode tok/s free, in a json_schema, in the tool-call grammar, with logprobs, with logit_bias "
         "(ARGS: --batch, --tokens, --rounds)", "structured.jsonl",  # the repository root: the tests' tokenizer
         lambda o, a: [run("bash", "-c", f"PYTHONPATH=.:$PYTHONPATH {shlex.join(script('grammar_gpu_cost.py', *a))}")],
         args="--batch 1,32 --tokens 256"),
    Step("gemv", "the GEMV's configs against cuBLAS, per shape and batch", "bench_gemv.log",
         lambda o, a: [run(*module("warpcode.bench.gemv", "--shapes", "5120x2048,2048x4096,128x2048", *a))],
         args="--batch 1,4,8,16 --quick", tail=40),
    Step("mx-gemv", "MX GEMV, mx_linear and dequantise + cuBLAS against bf16 cuBLAS", "mx_gemv.log",
         lambda o, a: [run(*module("warpcode.bench.gemv", "--weights", "mxfp8", *a))],
         args="--shapes 5120x2048,2048x4096,2048x768", tail=40),
    Step("attention", "decode attention's split sweep", "sweep_attention.log",
         lambda o, a: [run(*script("sweep_attention.py", *a))]),
    Step("small", "the decode step's small kernels, swept", "sweep_small.log",
         lambda o, a: [run(*script("sweep_small_kernels.py", *a))]),
    Step("variants", "the batch-1 graph step under config variants, each in a process of its own (ARGS: the sweep's)",
         "variants.log", lambda o, a: [run(*script("sweep_decode_variants.py", *a))]),
    Step("boundaries", "what a kernel boundary costs in a graph; when PDL secondaries start and pass gdc_wait",
         "boundaries.log", lambda o, a: [run(*script("kernel_chain.py", *a)), run(*script("probe_pdl.py"))]),
    Step("prefill", "cold prefill per chunk budget, and a profile of the longest", "prefill.log",
         lambda o, a: [run(*script("sweep_prefill.py", *a))], tail=45),
    Step("prefill-attention", "one layer's prefill attention: the paged Triton kernel against gather + SDPA",
         "prefill_attention.log", lambda o, a: [run(*script("sweep_prefill_attention.py", *a))]),
    Step("mx-sweep", "the batch-1 MX kernels against bf16 over a few tiles, once per --sweep-env", "sweep_mx.log",
         lambda o, a: [run(*script("sweep_mx_kernels.py", *a), label=label, env=env) for label, env in settings(o)],
         args="--tokens 1,8"),
    Step("mx-ncu", "hardware counters (ncu) of the batch-1 warp decode and q/k/v GEMV kernels, bf16 and MX",
         "mx_ncu.log",
         lambda o, a: [run(*ncu(*script("sweep_mx_kernels.py", "--once", *a)), label=label, env=env)
                       for label, env in settings(o)],
         show=matching(NCU_LINES)),
    Step("mx-accuracy", "a small qwen3_moe trained here on the machine's Python files: perplexity bf16 vs MXFP8",
         "mx_accuracy.log",
         lambda o, a: [run(*module("warpcode.bench.mx_accuracy", "--device", "cuda", "--out",
                                   str(o.out / "mx_accuracy.json"), *a))],
         args="--train-seconds 180", tail=30),
    Step("ab", "decode, this tree against the base tree (--base-tarball), alternating (--batch, --context; "
         "default 1 and 512,8192)", "ab.log",
         lambda o, a: this_and_base(warpcode(*decode(o, "1", "512,8192", "--prefill", "0"), *a, "--json")),
         compare=DECODE),
    Step("ab-mx", "MX decode, this tree against the base tree, alternating (default batch 1,8, context 512)",
         "ab_mx.log",
         lambda o, a: this_and_base(warpcode(*decode(o, "1,8", "512", "--weights", "mxfp8", "--prefill", "0"), *a,
                                             "--json")),
         compare=DECODE),
    Step("ab-turn", "a cached agent turn (16K cached + 300 new) and a cold 2K prefill, this tree against the base",
         "ab_turn.log",
         lambda o, a: this_and_base((PY, str(ROOT / "experiments/sweep_prefill.py"), *a)),
         args="--lengths 2048 --budgets 16384 --profile 16384", show=matching(TURN_LINES), compare=Compare("base")),
    Step("ab-prefill-attention", "one layer's prefill attention (kernel + split merge), this tree against the base",
         "ab_prefill_attention.log",
         lambda o, a: this_and_base((PY, str(ROOT / "experiments/sweep_prefill_attention.py"), *a)),
         args="--cases 300:16000,384:16000,1024:31000", compare=Compare("base")),
    Step("ab-cmd", "--ab-command in this tree and the base tree, alternating; JSON lines compared", "ab_cmd.log",
         ab_command, tail=40, compare=Compare("base")),
    Step("mx-configs", f"MX decode under the package's kernel configs and each --config-variant ({CONFIGS_ENV}), "
         "alternating (default batch 1,8, context 512)", "mx_configs.log", config_variant_arms,
         compare=Compare("package", keys=DECODE.keys, metrics=DECODE.metrics)),
)}  # fmt: skip


def steps_table() -> str:
    lines = ["steps (run in the order named; `install` always first unless --no-install):"]
    for step in STEPS.values():
        lines.append(f"  {step.name:<21} {step.help}")
        args = f"; ARGS: {step.args}" if step.args else ""
        lines.append(f"  {'':<21}   log {step.log}{args}")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 experiments/gpu_session.py",
        description="One device call's GPU work: named steps, logs under --out.",
        epilog=steps_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("steps", nargs="*", metavar="STEP", help="the steps to run (--list shows them)")
    p.add_argument("--list", action="store_true", help="print the steps, their logs and default ARGS, and exit")
    p.add_argument("--dry-run", action="store_true", help="print each step's commands instead of running them")
    p.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT") or "/tmp/warpcode-gpu"),
        help="where the logs go (default: $OUT, else /tmp/warpcode-gpu)",
    )
    p.add_argument("--no-install", action="store_true", help="skip `install` (this tree is installed already)")
    p.add_argument("--wheels", type=Path, help="carried wheels, installed offline (default: the repository's .whl)")
    p.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="STEP=ARGS",
        help="replace a step's extra arguments, e.g. --args variants='--variant \"route: prefetch_rows=0\"'",
    )
    p.add_argument("--batch", help="decode batch sizes of the decode, mx-decode, ab* and mx-* variant steps")
    p.add_argument("--context", help="decode context lengths of the same steps")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the A/B and variant steps (default 2)")
    p.add_argument(
        "--base-tarball",
        type=Path,
        help="the ab steps' base tree: `git archive REF -o ab_base.tar` in the repository root",
    )
    p.add_argument("--ab-command", help="ab-cmd's command, run by bash in each tree's root")
    p.add_argument(
        "--config-variant",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="mx-configs: a variant folder as experiments/config_variant.py or mx_linear_variant.py writes it; repeat",
    )
    p.add_argument(
        "--sweep-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="mx-sweep, mx-ncu: one run per setting, with that variable set (default: one run as is)",
    )
    p.add_argument(
        "--tune-shapes",
        action="append",
        metavar="H,I,E,K:LARGEST_BATCH",
        help=f"tune's shapes, repeat for more (default {' '.join(TUNE_SHAPES)})",
    )
    p.add_argument(
        "--centric-shapes", action="append", metavar="H,I,E,K", help=f"tune-centric's shapes (default {QWEN3_LAYER})"
    )
    p.add_argument(
        "--moe-shapes", action="append", metavar="H,I,E,K", help=f"bench's shapes (default {' '.join(MOE_SHAPES)})"
    )
    return p


def options_from(args: argparse.Namespace) -> Options:
    step_args = {}
    for text in args.args:
        name, separator, value = text.partition("=")
        if not separator or name not in STEPS:
            raise StepError(f"--args takes STEP=ARGS with a step --list shows, not {text!r}")
        step_args[name] = value
    # Paths given are the caller's (the steps run in the repository root); the defaults are in that root.
    return Options(
        out=args.out.resolve(),
        wheels=args.wheels.resolve() if args.wheels else Options.wheels,
        rounds=args.rounds,
        base_tarball=args.base_tarball.resolve() if args.base_tarball else Options.base_tarball,
        batch=args.batch,
        context=args.context,
        tune_shapes=tuple(args.tune_shapes or TUNE_SHAPES),
        centric_shapes=tuple(args.centric_shapes or (QWEN3_LAYER,)),
        moe_shapes=tuple(args.moe_shapes or MOE_SHAPES),
        ab_command=args.ab_command,
        config_variants=tuple(path.resolve() for path in args.config_variant),
        sweep_env=tuple(args.sweep_env),
        step_args=step_args,
    )


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_intermixed_args(argv)
    if args.list:
        print(steps_table())
        return 0
    unknown = [name for name in args.steps if name not in STEPS]
    if unknown:
        cli.error(f"no step {', '.join(unknown)} (--list shows the steps)")
    if not args.steps:
        cli.error("name the steps to run, e.g. tests tune bench (--list shows them)")
    names = list(dict.fromkeys(["install", *args.steps] if not args.no_install else args.steps))
    try:
        options = options_from(args)
        os.chdir(ROOT)  # the steps' paths are the repository's
        plans = {name: STEPS[name].commands(options, options.args_for(STEPS[name])) for name in names}
    except StepError as error:
        cli.error(str(error))
    if args.dry_run:
        print(f"(in {ROOT})")
        for name in names:
            print("\n".join(describe(STEPS[name], plans[name], options.out, options.rounds)))
        return 0
    options.out.mkdir(parents=True, exist_ok=True)
    session, results = Session(ROOT, options.out, options.rounds, options.base_tarball), []
    for name in names:
        started = time.monotonic()
        status = session.run(STEPS[name], plans[name])
        results.append((name, status, time.monotonic() - started))
    pack(options.out)
    print("== steps", flush=True)
    for name, status, seconds in results:
        print(f"{name:<21} {'ok' if status == 0 else f'failed ({status})':<12} {seconds:7.1f} s", flush=True)
    return 0 if all(status == 0 for _, status, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
