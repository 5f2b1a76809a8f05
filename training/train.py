"""Training in two phases, each resumable, in chunks of at most `minutes` of wall time per command:

- pretrain: next-token prediction on the packed code stream (corpus.py), windows of PRETRAIN.sequence_length;
- finetune: the pre-trained model on agent conversations (conversations.py), loss on the assistant's tokens only,
  each step also taking some code windows (their loss weighted by CODE_LOSS_WEIGHT) so the model keeps its code.

A phase's length is fixed at its start, in optimizer steps: `steps`, or as many as fit in `budget_minutes` of
training at the speed measured over its first steps (then written down, so resuming follows the same schedule and
the run can be repeated with `steps`). The learning rate warms up linearly, then follows a cosine to a tenth of its
peak at the last step. Everything that decides a step -- the data rows (a fixed order per epoch from the seed),
the learning rate, the weights and the optimizer's moments -- is in the phase's state file, written every few
minutes and when the command's time is up, and read back by the next command.

On a GPU the forward and backward run in bf16 autocast over fp32 master weights (AdamW, fused); on a CPU (tests, the
smoke pipeline) everything is fp32. Each step's loss is the exact mean over its target tokens, however the step is
cut into micro-batches. At the end of a phase the held-out code's perplexity is measured (result.json), and after
fine-tuning also the held-out conversations' (assistant tokens only).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.training import trainable
from warpcode.training.conversations import StoredExamples
from warpcode.training.corpus import TokenWindows
from warpcode.training.model_config import SHAPES

IGNORE = -100  # target id of positions that are not learned (F.cross_entropy's ignore_index)
BALANCE_LOSS_WEIGHT = 0.01  # the load-balancing loss (trainable.py) next to the language-model loss
CODE_LOSS_WEIGHT = 0.5  # fine-tuning: the code windows' mean loss next to the conversations' mean loss
CHECKPOINT_SECONDS = 180
LOG_EVERY = 10
MEASURE_STEPS = (3, 13)  # budget_minutes: the speed is measured over these steps (after start-up costs)
EVAL_WINDOWS = 512  # held-out code windows scored at the end of a phase (1M tokens at 2,048)


@dataclass(frozen=True)
class Phase:
    name: str
    sequence_length: int  # pretrain: the window; finetune: the longest conversation kept (and the code window)
    tokens_per_step: int  # rows x their length, padding included
    tokens_per_micro_batch: int  # what one forward and backward holds at once
    peak_lr: float
    warmup_steps: int
    weight_decay: float = 0.1
    code_share: float = 1.0  # of each step's tokens; finetune takes the rest as conversations


# Peak learning rates as Pythia's 70M model was trained (1e-3), and a third of it to fine-tune from where
# pre-training's cosine ended (1e-4); batches of 128K tokens, so that a run of a few minutes still takes hundreds of
# steps past its warm-up.
PRETRAIN = Phase("pretrain", 2048, 2**17, 2**16, peak_lr=1e-3, warmup_steps=100)
FINETUNE = Phase("finetune", 8192, 2**17, 2**16, peak_lr=3e-4, warmup_steps=50, code_share=0.25)
# The same pipeline at toy size on a CPU (seconds): tests and `prepare --smoke`.
SMOKE_PHASES = {
    "pretrain": replace(PRETRAIN, sequence_length=64, tokens_per_step=2048, tokens_per_micro_batch=1024,
                        peak_lr=1e-2, warmup_steps=5),
    "finetune": replace(FINETUNE, sequence_length=2048, tokens_per_step=4096, tokens_per_micro_batch=4096,
                        peak_lr=3e-3, warmup_steps=3),
}  # fmt: skip
PHASES = {"builtin": {"pretrain": PRETRAIN, "finetune": FINETUNE}, "smoke": SMOKE_PHASES}


@dataclass
class Workspace:
    """The folder `prepare` fills and the phases train in."""

    root: Path

    @property
    def settings(self) -> dict[str, Any]:
        path = self.root / "settings.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.root} has no settings.json: run `python -m warpcode.training prepare` first"
            )
        return json.loads(path.read_text())

    @property
    def config(self) -> ModelConfig:
        return SHAPES[self.settings["shape"]]

    def phase(self, name: str) -> Phase:
        return PHASES[self.settings["shape"]][name]

    def state_path(self, phase: str) -> Path:
        return self.root / phase / "state.pt"


def device_for_training() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def run_phase(
    workspace: Workspace,
    phase_name: str,
    minutes: float,
    steps: int | None = None,
    budget_minutes: float | None = None,
    seed: int = 0,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """Trains `phase_name` for at most `minutes` of this command's time, from where its state file left it; returns
    the phase's result (its held-out measurements) once it is complete, else its progress."""
    started = time.monotonic()
    device = device or device_for_training()
    phase, config = workspace.phase(phase_name), workspace.config
    folder = workspace.root / phase_name
    folder.mkdir(exist_ok=True)
    state = _load_state(workspace, phase_name, config, seed, steps, budget_minutes)
    model = MoeForCausalLM(config)
    model.load_state_dict(state["model"])
    model.to(device).train()
    optimizer = _optimizer(model, phase, device)
    if state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    with (folder / "log.jsonl").open("a") as log:
        _train(model, optimizer, workspace, phase, state, started, minutes, log, device)
        if state["step"] < (state["total_steps"] or math.inf):
            progress = {"phase": phase_name, "step": state["step"], "of": state["total_steps"], "done": False}
            _emit(log, progress)
            return progress
        result = {"phase": phase_name, "steps": state["step"], "tokens": state["tokens"],
                  "train_minutes": round(state["seconds"] / 60, 2), "done": True,
                  **evaluate(model, workspace, phase_name, device)}  # fmt: skip
        (folder / "result.json").write_text(json.dumps(result, indent=2) + "\n")
        _emit(log, result)
    return result


def _train(model, optimizer, workspace: Workspace, phase: Phase, state, started: float, minutes: float, log,
           device) -> None:  # fmt: skip
    """Steps until the phase is complete or the command's minutes are up; the state saved as it goes and at the
    end."""
    batches = _batches(workspace, phase, state["seed"])
    measured: list[float] = []
    last_save = time.monotonic()
    step_seconds = 0.0
    first_step = state["step"]
    while state["total_steps"] is None or state["step"] < state["total_steps"]:
        # every command makes progress: one step at least, then as many as fit in its minutes
        if state["step"] > first_step and time.monotonic() - started + step_seconds > minutes * 60:
            break
        step_start = time.monotonic()
        lr = _learning_rate(phase, state["step"], state["total_steps"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        stats = _train_step(model, optimizer, batches.step(state["step"]), phase.tokens_per_micro_batch, device)
        step_seconds = time.monotonic() - step_start
        state["step"] += 1
        state["seconds"] += step_seconds
        state["tokens"] += stats["tokens"]
        if state["total_steps"] is None:
            measured.append(step_seconds)
            if state["step"] == MEASURE_STEPS[1]:
                state["total_steps"] = _steps_in_budget(state, measured, phase)
                _emit(log, {"phase": phase.name, "total_steps": state["total_steps"], "from_budget_minutes":
                            state["budget_minutes"], "step_seconds": round(step_seconds, 4)})  # fmt: skip
        if state["step"] % LOG_EVERY == 0 or state["step"] == state["total_steps"]:
            _emit(log, {"phase": phase.name, "step": state["step"], "of": state["total_steps"], "lr": lr,
                        **{k: round(v, 4) for k, v in stats.items() if k != "tokens"},
                        "tokens": state["tokens"], "tokens_per_s": round(stats["tokens"] / step_seconds),
                        "train_minutes": round(state["seconds"] / 60, 2)})  # fmt: skip
        if time.monotonic() - last_save > CHECKPOINT_SECONDS:
            _save_state(workspace, phase.name, state, model, optimizer)
            last_save = time.monotonic()
    _save_state(workspace, phase.name, state, model, optimizer)


def final_weights(workspace: Workspace, phase_name: str) -> dict[str, torch.Tensor]:
    """The weights a complete phase ended with (fp32)."""
    path = workspace.state_path(phase_name)
    if not path.is_file():
        raise FileNotFoundError(f"no {path}: run the {phase_name} phase first")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state["total_steps"] is None or state["step"] < state["total_steps"]:
        raise ValueError(f"the {phase_name} phase is not complete (step {state['step']} of {state['total_steps']}): "
                         "run it again to finish it")  # fmt: skip
    return state["model"]


def _load_state(workspace, phase_name, config, seed, steps, budget_minutes) -> dict[str, Any]:
    path = workspace.state_path(phase_name)
    if path.is_file():
        state = torch.load(path, map_location="cpu", weights_only=True)
        asked = {"steps": steps, "budget_minutes": budget_minutes}
        if any(value is not None and value != state[key] for key, value in asked.items()):
            raise ValueError(f"{path} is a phase started with steps={state['steps']}, budget_minutes="
                             f"{state['budget_minutes']}: resume it without those options, or delete the folder "
                             f"{path.parent} to start the phase again")  # fmt: skip
        return state
    if (steps is None) == (budget_minutes is None):
        raise ValueError(f"starting the {phase_name} phase needs its length: --steps N or --budget-minutes M")
    if phase_name == "finetune":
        weights = final_weights(workspace, "pretrain")
    else:
        weights = trainable.new_model(config, seed).state_dict()
    return {"model": weights, "optimizer": None, "step": 0, "total_steps": steps, "steps": steps,
            "budget_minutes": budget_minutes, "seconds": 0.0, "tokens": 0, "seed": seed}  # fmt: skip


def _save_state(workspace, phase_name, state, model, optimizer) -> None:
    state = {**state, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    path = workspace.state_path(phase_name)
    torch.save(state, path.with_suffix(".tmp"))
    os.replace(path.with_suffix(".tmp"), path)  # a command killed while saving leaves the last state whole


def _steps_in_budget(state, measured: list[float], phase: Phase) -> int:
    per_step = float(np.median(measured[MEASURE_STEPS[0] :] or measured))  # a resumed command measured fewer
    left = state["budget_minutes"] * 60 - state["seconds"]
    return max(state["step"], phase.warmup_steps, state["step"] + int(left / per_step))


def _optimizer(model: MoeForCausalLM, phase: Phase, device: torch.device) -> torch.optim.AdamW:
    # weight decay on the matrices (embeddings, projections, experts, routers), none on the norms' gains
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    gains = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": matrices, "weight_decay": phase.weight_decay}, {"params": gains, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=phase.peak_lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")


def _learning_rate(phase: Phase, step: int, total_steps: int | None) -> float:
    if step < phase.warmup_steps or total_steps is None:
        return phase.peak_lr * min(1.0, (step + 1) / phase.warmup_steps)
    progress = (step - phase.warmup_steps) / max(1, total_steps - phase.warmup_steps)
    return phase.peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@dataclass
class Rows:
    """Rows of one kind ("code" or "conversations"): inputs and targets [R, L] (IGNORE where nothing is learned)."""

    kind: str
    inputs: np.ndarray
    targets: np.ndarray

    def micro_batches(self, tokens_per_micro_batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rows = max(1, tokens_per_micro_batch // self.inputs.shape[1])
        for start in range(0, len(self.inputs), rows):
            yield self.inputs[start : start + rows], self.targets[start : start + rows]


class _Batches:
    """The rows of every step, a pure function of the step (so a resumed phase reads on where it stopped)."""

    def __init__(self, phase: Phase, code: TokenWindows, seed: int, conversations: StoredExamples | None = None):
        self.phase, self.code, self.seed, self.conversations = phase, code, seed, conversations
        self.code_rows = max(1, round(phase.code_share * phase.tokens_per_step / code.length))
        if conversations is not None:
            mean_length = float(np.diff(conversations.offsets).mean())
            self.conversation_rows = max(1, round((1 - phase.code_share) * phase.tokens_per_step / mean_length))

    def step(self, step: int) -> list[Rows]:
        windows = np.stack([self.code.window(i) for i in _indices(len(self.code), self.code_rows, step, self.seed)])
        code = Rows("code", windows[:, :-1], windows[:, 1:])
        if self.conversations is None:
            return [code]
        examples = [self.conversations[i] for i in
                    _indices(len(self.conversations), self.conversation_rows, step, self.seed + 1)]  # fmt: skip
        return [*_padded_by_length(examples, self.phase.tokens_per_micro_batch), code]


def _indices(count: int, rows: int, step: int, seed: int) -> np.ndarray:
    """Rows step * rows ... of the endless sequence of epochs, each epoch a fresh permutation of range(count)."""
    positions = np.arange(step * rows, (step + 1) * rows)
    epochs, within = positions // count, positions % count
    orders = {e: np.random.default_rng([seed, e]).permutation(count) for e in np.unique(epochs)}
    return np.array([orders[e][i] for e, i in zip(epochs, within, strict=True)])


def _padded_by_length(examples, tokens_per_micro_batch: int) -> list[Rows]:
    """Conversations in micro-batches of similar length, each padded at the end to its longest (causal attention
    makes end padding invisible to the real tokens; its targets are IGNORE)."""
    examples = sorted(examples, key=lambda e: len(e.ids))
    groups: list[list] = [[]]
    for example in examples:
        longest = len(example.ids) - 1
        if groups[-1] and (len(groups[-1]) + 1) * longest > tokens_per_micro_batch:
            groups.append([])
        groups[-1].append(example)
    out = []
    for group in groups:
        length = max(len(e.ids) for e in group) - 1
        inputs = np.zeros((len(group), length), dtype=np.int64)
        targets = np.full((len(group), length), IGNORE, dtype=np.int64)
        for row, example in enumerate(group):
            n = len(example.ids) - 1
            inputs[row, :n] = example.ids[:-1]
            targets[row, :n] = np.where(example.targets[1:], example.ids[1:], IGNORE)
        out.append(Rows("conversations", inputs, targets))
    return out


def _batches(workspace: Workspace, phase: Phase, seed: int) -> _Batches:
    code = TokenWindows(workspace.root / "train.tokens", workspace.phase("pretrain").sequence_length)
    if phase.name == "pretrain":
        return _Batches(phase, code, seed)
    conversations_path = workspace.root / "conversations" / "train"
    if not conversations_path.with_suffix(".offsets.npy").is_file():
        raise FileNotFoundError(f"no conversations in {conversations_path.parent}: run "
                                "`python -m warpcode.training render` first")  # fmt: skip
    return _Batches(phase, code, seed, StoredExamples(conversations_path))


def _train_step(model: MoeForCausalLM, optimizer, kinds: list[Rows], tokens_per_micro_batch: int, device) -> dict:
    """One optimizer step over every micro-batch of `kinds`. The loss is each kind's exact mean over its targets
    (however many micro-batches it spans), the code's weighted by CODE_LOSS_WEIGHT when conversations are there
    too, plus the load-balancing loss."""
    targets_of = {kind: sum(int((r.targets != IGNORE).sum()) for r in kinds if r.kind == kind) for kind in
                  {r.kind for r in kinds}}  # fmt: skip
    weight_of = {kind: CODE_LOSS_WEIGHT if kind == "code" and len(targets_of) > 1 else 1.0 for kind in targets_of}
    micro_batches = [(rows.kind, mb) for rows in kinds for mb in rows.micro_batches(tokens_per_micro_batch)]
    # summed on the device, read once at the end: a read per micro-batch would stall the GPU's queue
    sums = {name: torch.zeros((), device=device) for name in [*(f"{kind}_loss" for kind in targets_of), "balance"]}
    tokens = 0
    for kind, (inputs, targets) in micro_batches:
        inputs = torch.from_numpy(inputs).to(device, non_blocking=True)
        targets = torch.from_numpy(targets).to(device, non_blocking=True)
        with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
            logits, balance = trainable.forward(model, inputs)
        loss_sum = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                   reduction="sum")  # fmt: skip
        mean_part = loss_sum / max(1, targets_of[kind])
        balance_part = balance / len(micro_batches)
        (weight_of[kind] * mean_part + BALANCE_LOSS_WEIGHT * balance_part).backward()
        sums[f"{kind}_loss"] += mean_part.detach()
        sums["balance"] += balance_part.detach()
        tokens += inputs.numel()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {name: value.item() for name, value in sums.items()} | {"grad_norm": grad_norm.item(), "tokens": tokens}


@torch.no_grad()
def evaluate(model: MoeForCausalLM, workspace: Workspace, phase_name: str, device: torch.device) -> dict[str, Any]:
    """Held-out code perplexity (and, after fine-tuning, the held-out conversations' on the assistant's tokens)."""
    model.eval()
    pretrain = workspace.phase("pretrain")
    windows = TokenWindows(workspace.root / "heldout.tokens", pretrain.sequence_length)
    count = min(len(windows), EVAL_WINDOWS)
    code = np.stack([windows.window(i) for i in range(count)])
    result = {"heldout_code": _perplexity(model, [Rows("code", code[:, :-1], code[:, 1:])], device, pretrain)}
    heldout_conversations = workspace.root / "conversations" / "heldout"
    if phase_name == "finetune" and heldout_conversations.with_suffix(".offsets.npy").is_file():
        stored = StoredExamples(heldout_conversations)
        examples = [stored[i] for i in range(len(stored))]
        phase = workspace.phase("finetune")
        result["heldout_conversations"] = _perplexity(
            model, _padded_by_length(examples, phase.tokens_per_micro_batch), device, phase
        )
    model.train()
    return result


def _perplexity(model, kinds: list[Rows], device, phase: Phase) -> dict[str, float]:
    total, count = 0.0, 0
    for rows in kinds:
        for inputs, targets in rows.micro_batches(phase.tokens_per_micro_batch):
            inputs, targets = torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device)
            with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
                logits, _ = trainable.forward(model, inputs)
            total += F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                     reduction="sum").item()  # fmt: skip
            count += int((targets != IGNORE).sum())
    return {"tokens": count, "loss": round(total / count, 4), "perplexity": round(math.exp(total / count), 3)}


def _emit(log, record: dict[str, Any]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    log.write(line + "\n")
    log.flush()
