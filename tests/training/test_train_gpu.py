"""Training on the GPU, where the built-in model is trained: bf16 autocast over fp32 weights, flash attention and the
fused optimizer. The toy pipeline learns there as on the CPU, and one optimizer step of the built-in shape at the
phases' real batch sizes runs (memory, kernels) and moves the loss."""

from __future__ import annotations

import pytest
import torch

from tests.training.site_packages import code_site
from warpcode.training import trainable
from warpcode.training.model_config import BUILTIN
from warpcode.training.prepare import prepare
from warpcode.training.train import FINETUNE, PRETRAIN, Rows, Workspace, _optimizer, _train_step, evaluate, run_phase

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


def test_the_toy_pipeline_learns_on_the_gpu(tmp_path):
    work = tmp_path / "work"
    prepare([code_site(tmp_path / "site-packages")], work, "smoke", log=lambda line: None)
    workspace = Workspace(work)
    untrained = evaluate(trainable.new_model(workspace.config, 0).to(CUDA), workspace, "pretrain", CUDA)
    result = run_phase(workspace, "pretrain", minutes=5, steps=30, device=CUDA)
    assert result["heldout_code"]["perplexity"] < 0.5 * untrained["heldout_code"]["perplexity"]


@pytest.mark.parametrize("phase", [PRETRAIN, FINETUNE], ids=["pretrain", "finetune"])
def test_a_builtin_step_at_full_batch_fits_and_learns(phase):
    model = trainable.new_model(BUILTIN, seed=0, device=CUDA)
    optimizer = _optimizer(model, phase, CUDA)
    for group in optimizer.param_groups:
        group["lr"] = phase.peak_lr / 10  # as early in the warm-up: the first steps at full rate overshoot
    generator = torch.Generator().manual_seed(0)
    # the phase's micro-batch at its longest rows: a pretraining window, or the longest conversation kept
    rows = phase.tokens_per_micro_batch // phase.sequence_length
    ids = torch.randint(3, 300, (rows, phase.sequence_length + 1), generator=generator).numpy()
    batch = [Rows("code", ids[:, :-1], ids[:, 1:])]
    losses = [_train_step(model, optimizer, batch, phase.tokens_per_micro_batch, CUDA)["code_loss"] for _ in range(3)]
    assert losses[-1] < losses[0]
    assert torch.cuda.max_memory_allocated() < 100 * 2**30
