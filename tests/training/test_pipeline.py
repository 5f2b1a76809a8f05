"""The whole pipeline at toy size on the CPU (`prepare --smoke`): corpus and tokenizer, pre-training that learns,
fine-tuning on conversations, and a checkpoint directory that the runtime and transformers both load and decode
greedily to the same tokens (transformers is the reference). Resuming a phase command by command gives the very
weights of one uninterrupted run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.site_packages import code_site
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime import load
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.training import trainable
from warpcode.training.checkpoint import CHECKPOINT_FILES, write_checkpoint
from warpcode.training.conversations import render_examples, write_examples
from warpcode.training.train import MEASURE_STEPS, Workspace, evaluate, final_weights, run_phase

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

TOOLS = [t for t in tool_schemas() if t["function"]["name"] in ("read_file", "edit_file")]
PRETRAIN_STEPS, FINETUNE_STEPS = 30, 10


def agent_conversation(i: int) -> tuple[list[Message], list[dict]]:
    path, old, new = f"pkg/mod{i}.py", f"return x - {i}", f"return x + {i}"
    return [
        Message("system", "You edit code."),
        Message("user", f"f{i} in {path} should add {i}."),
        Message("assistant", "", [ToolCall("c1", "read_file", {"path": path})]),
        Message("tool", f"1 def f{i}(x):\n2     {old}\n", tool_call_id="c1", name="read_file"),
        Message("assistant", "", [ToolCall("c2", "edit_file", {"path": path, "old_text": old, "new_text": new})]),
        Message("tool", f"Edited {path}", tool_call_id="c2", name="edit_file"),
        Message("assistant", f"f{i} now adds {i}."),
    ], TOOLS


def prepare(site: Path, work: Path) -> None:
    command = [sys.executable, "-m", "warpcode.training", "prepare", "--site-packages", str(site), "--out", str(work),
               "--smoke"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Toy matrices gain nothing from threads, and on a busy machine threads that wait for each other cost tenfold."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, one_thread):
    root = tmp_path_factory.mktemp("pipeline")
    work = root / "work"
    prepare(code_site(root / "site-packages"), work)
    workspace = Workspace(work)
    untrained = evaluate(trainable.new_model(workspace.config, 0), workspace, "pretrain", torch.device("cpu"))
    pretrained = run_phase(workspace, "pretrain", minutes=30, steps=PRETRAIN_STEPS)
    folder = work / "conversations"
    folder.mkdir()
    for split, seeds in (("train", range(24)), ("heldout", range(100, 104))):
        write_examples(
            render_examples(work / "tokenizer.json", [agent_conversation(i) for i in seeds], 1), folder / split
        )
    finetuned = run_phase(workspace, "finetune", minutes=30, steps=FINETUNE_STEPS)
    from tokenizers import Tokenizer

    model_dir = root / "model"
    write_checkpoint(final_weights(workspace, "finetune"), workspace.config,
                     Tokenizer.from_file(str(work / "tokenizer.json")), model_dir)  # fmt: skip
    return {"workspace": workspace, "untrained": untrained, "pretrained": pretrained, "finetuned": finetuned,
            "model_dir": model_dir}  # fmt: skip


def logged(workspace: Workspace, phase: str, key: str) -> list[float]:
    lines = (workspace.root / phase / "log.jsonl").read_text().splitlines()
    return [record[key] for record in map(json.loads, lines) if key in record]


def test_prepare_lists_the_corpus(pipeline):
    manifest = json.loads((pipeline["workspace"].root / "corpus.json").read_text())
    packages = {p["name"]: (p["taken"], p["split"]) for p in manifest["packages"]}
    assert packages == {"alpha": (True, "train"), "gamma": (False, "train"), "six": (True, "heldout")}
    assert manifest["documents"] == {"train": 7, "heldout": 3}
    train_bytes = (pipeline["workspace"].root / "train.tokens").stat().st_size
    assert train_bytes == 2 * manifest["tokens"]["train"]


def test_pretraining_learns_the_code(pipeline):
    losses = logged(pipeline["workspace"], "pretrain", "code_loss")
    untrained = pipeline["untrained"]["heldout_code"]
    assert len(losses) == PRETRAIN_STEPS // 10 and losses[-1] < untrained["loss"] - 1.0
    assert pipeline["pretrained"]["heldout_code"]["perplexity"] < 0.5 * untrained["perplexity"]
    assert pipeline["pretrained"]["steps"] == PRETRAIN_STEPS and pipeline["pretrained"]["done"]


def test_finetuning_learns_the_conversations(pipeline):
    result = pipeline["finetuned"]
    assert result["done"] and result["heldout_conversations"]["tokens"] > 0
    # the held-out conversations' assistant turns: much better than the pre-trained model's guess at them
    pretrained = Workspace(pipeline["workspace"].root)
    model = trainable.new_model(pretrained.config, 0)
    model.load_state_dict(final_weights(pretrained, "pretrain"))
    before = evaluate(model, pretrained, "finetune", torch.device("cpu"))["heldout_conversations"]["perplexity"]
    assert result["heldout_conversations"]["perplexity"] < 0.5 * before


def test_the_checkpoint_loads_in_the_runtime_and_transformers_with_the_same_greedy_tokens(pipeline):
    model_dir = pipeline["model_dir"]
    assert sorted(p.name for p in model_dir.iterdir()) == sorted(CHECKPOINT_FILES)
    config = json.loads((model_dir / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("qwen3_moe", ["Qwen3MoeForCausalLM"])
    engine = load(model_dir, device="cpu", dtype=torch.float32, show_progress=False)
    reference = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    prompts = [conversation_prompt_ids(engine.tokenizer, agent_conversation(i)[0][:n], TOOLS) for i, n in
               ((200, 2), (201, 4), (202, 6))]  # fmt: skip
    for prompt in prompts:
        ids = torch.tensor([prompt])
        with torch.no_grad():
            expected = reference.generate(ids, max_new_tokens=24, do_sample=False, attention_mask=torch.ones_like(ids))
        expected = expected[0, len(prompt) :].tolist()
        got = engine.generate(prompt, 24, stop_token_ids=reference.generation_config.eos_token_id)
        assert got == expected
        with torch.no_grad():
            torch.testing.assert_close(engine.logits(ids), reference(ids).logits, rtol=1e-4, atol=1e-4)
    engine.shutdown()


def test_a_phase_resumed_command_by_command_ends_with_the_weights_of_one_run(pipeline, tmp_path):
    prepared = pipeline["workspace"].root
    copies = []
    for name in ("whole", "chunks"):
        work = tmp_path / name
        work.mkdir()
        for file in ("settings.json", "tokenizer.json", "train.tokens", "heldout.tokens"):
            shutil.copy(prepared / file, work / file)
        copies.append(Workspace(work))
    whole, chunks = copies
    run_phase(whole, "pretrain", minutes=30, steps=4)
    progress = [run_phase(chunks, "pretrain", minutes=0, steps=4)]  # minutes=0: one step per command
    while not progress[-1]["done"]:
        progress.append(run_phase(chunks, "pretrain", minutes=0))
    assert [p.get("step", p.get("steps")) for p in progress] == [1, 2, 3, 4]
    a, b = final_weights(whole, "pretrain"), final_weights(chunks, "pretrain")
    assert all(torch.equal(a[name], b[name]) for name in a)
    with pytest.raises(ValueError, match="started with steps=4"):
        run_phase(chunks, "pretrain", minutes=0, steps=5)


def test_a_phase_measured_by_time_fixes_its_length_after_its_first_steps(pipeline, tmp_path):
    work = tmp_path / "budget"
    work.mkdir()
    for file in ("settings.json", "tokenizer.json", "train.tokens", "heldout.tokens"):
        shutil.copy(pipeline["workspace"].root / file, work / file)
    result = run_phase(Workspace(work), "pretrain", minutes=30, budget_minutes=0.01)
    assert result["done"] and result["steps"] == MEASURE_STEPS[1]  # 0.6 s of training: no more than measured
    log = [json.loads(line) for line in (work / "pretrain" / "log.jsonl").read_text().splitlines()]
    [fixed] = [record for record in log if "from_budget_minutes" in record]
    assert (fixed["total_steps"], fixed["from_budget_minutes"]) == (MEASURE_STEPS[1], 0.01)
    assert [record["of"] for record in log if "step" in record] == [None, MEASURE_STEPS[1]]


def test_export_and_evaluate_commands(pipeline, tmp_path):
    """The CLI's export writes the checkpoint the fixture wrote; its held-out perplexity through the runtime is the
    one training measured (within bf16 rounding of the weights), and MXFP8 weights stay within 1% of it."""
    work, model_dir = pipeline["workspace"].root, tmp_path / "exported"
    run = lambda *args: subprocess.run([sys.executable, "-m", "warpcode.training", *args], capture_output=True,
                                       text=True, timeout=300)  # fmt: skip
    exported = run("export", "--out", str(work), "--model-dir", str(model_dir))
    assert exported.returncode == 0, exported.stderr
    for name in CHECKPOINT_FILES:
        assert (model_dir / name).read_bytes() == (pipeline["model_dir"] / name).read_bytes(), name
    evaluated = run("evaluate", "--model-dir", str(model_dir), "--tokens", str(work / "heldout.tokens"),
                    "--windows", "1000", "--length", "64")  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    bf16, mxfp8 = (json.loads(line) for line in evaluated.stdout.splitlines())
    trained = pipeline["finetuned"]["heldout_code"]
    assert bf16["tokens"] == trained["tokens"]
    assert bf16["perplexity"] == pytest.approx(trained["perplexity"], rel=2e-3)
    assert mxfp8["weights"] == "mxfp8" and mxfp8["perplexity"] != bf16["perplexity"]
    assert mxfp8["perplexity"] == pytest.approx(bf16["perplexity"], rel=0.01)


def test_prepare_with_a_given_tokenizer_writes_the_same_streams_in_it(pipeline, tmp_path):
    """A tokenizer trained on one machine's packages, given to prepare on another: the streams are that
    tokenizer's, token for token, and one of another shape's vocabulary is refused with what to give instead."""
    work = pipeline["workspace"].root
    again = tmp_path / "again"
    site = work.parent / "site-packages"
    command = [sys.executable, "-m", "warpcode.training", "prepare", "--site-packages", str(site), "--out",
               str(again), "--smoke", "--tokenizer", str(work / "tokenizer.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("tokenizer.json", "train.tokens", "heldout.tokens"):
        assert (again / name).read_bytes() == (work / name).read_bytes(), name
    assert json.loads((again / "corpus.json").read_text())["tokenizer_given"] == str(work / "tokenizer.json")
    other = tmp_path / "other.json"
    other.write_text((work / "tokenizer.json").read_text().replace('"<|endoftext|>"', '"<|end|>"'))
    refused = subprocess.run([*command[:-1], str(other)], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and refused.stderr.startswith("error: ") and "for the same shape" in refused.stderr
