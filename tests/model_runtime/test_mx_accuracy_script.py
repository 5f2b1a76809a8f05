"""bench/mx_accuracy.py: its scoring against float64 references, and a tiny CPU run end to end."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "mx_accuracy.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("mx_accuracy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_greedy_agreement(script):
    reference = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 9]]
    other = [[1, 2, 0, 4], [5, 6, 7, 8], [0, 9]]
    result = script.greedy_agreement(reference, other)
    assert result["token_agreement"] == pytest.approx(8 / 10)  # 3 of 4, 4 of 4, 1 of 2
    assert result["common_prefix_mean"] == pytest.approx((2 + 4 + 0) / 3)
    assert result["identical_fraction"] == pytest.approx(1 / 3)


def test_scores_match_float64_reference(script):
    generator = torch.Generator().manual_seed(0)
    windows = torch.randint(0, 11, (5, 7), generator=generator)
    table_a = torch.randn(5, 7, 11, generator=generator, dtype=torch.float64) * 3
    table_b = table_a + 0.3 * torch.randn(5, 7, 11, generator=generator, dtype=torch.float64)

    def logits_of(table):
        rows = {tuple(w.tolist()): i for i, w in enumerate(windows)}
        return lambda ids: torch.stack([table[rows[tuple(w.tolist())]] for w in ids]).float()

    a = script.score_windows(logits_of(table_a), windows, batch=2, keep=3)
    b = script.score_windows(logits_of(table_b), windows, batch=2, keep=3)

    nll, kl = 0.0, 0.0
    for w in range(5):
        for t in range(6):
            p = [math.exp(x) for x in table_a[w, t].tolist()]
            q = [math.exp(x) for x in table_b[w, t].tolist()]
            p, q = [x / sum(p) for x in p], [x / sum(q) for x in q]
            nll -= math.log(p[windows[w, t + 1]])
            if w < 3:
                kl += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))
    assert a["nll"] == pytest.approx(nll / 30, rel=1e-5)
    assert a["ppl"] == pytest.approx(math.exp(nll / 30), rel=1e-5)
    comparison = script.compare_scores(a, b)
    assert comparison["kl"] == pytest.approx(kl / 18, rel=1e-4)
    top1_agree = (table_a[:, :-1].argmax(-1) == table_b[:, :-1].argmax(-1)).double().mean().item()
    assert comparison["top1_agreement"] == pytest.approx(top1_agree)
    assert script.compare_scores(a, a) == {"top1_agreement": 1.0, "kl": 0.0}


@pytest.mark.slow
def test_tiny_run_writes_report(script, tmp_path):
    formats = "bf16,mxfp8"
    out = tmp_path / "report.json"
    script.main(["--tiny", "--device", "cpu", "--weights", formats, "--out", str(out)])
    report = json.loads(out.read_text())

    names = formats.split(",")
    assert set(report["results"]) == {*names, "transformers"}
    assert set(report["ppl_relative_change"]) == set(names) - {"bf16"}
    for name, result in report["results"].items():
        for key in ("ppl", "nll", "ppl_relative_change", "top1_agreement", "kl"):
            assert math.isfinite(result[key]), (name, key)
        assert result["ppl"] == pytest.approx(math.exp(result["nll"]))
        if name != "transformers":
            greedy = result["greedy"]
            assert 0 <= greedy["token_agreement"] <= 1 and 0 <= greedy["common_prefix_mean"] <= 6
            assert result["load_seconds"] >= 0 and result["generate_seconds"] >= 0
    bf16 = report["results"]["bf16"]
    assert bf16["ppl_relative_change"] == 0 and bf16["kl"] == 0 and bf16["greedy"]["token_agreement"] == 1
    # the runtime and transformers compute the same model (float32 on the CPU)
    assert abs(report["runtime_vs_transformers_ppl_relative"]) < 1e-4
    assert report["results"]["transformers"]["top1_agreement"] > 0.99
    for name in set(names) - {"bf16"}:
        assert abs(report["ppl_relative_change"][name]) < 0.05

    assert report["train"]["steps"] == report["setup"]["max_steps"] > 0
    assert report["train"]["tokens"] == report["train"]["steps"] * report["setup"]["batch_size"] * 64
    assert math.isfinite(report["train"]["final_loss"])
    data = report["data"]
    assert data["files_train"] > 0 and data["files_heldout"] > 0 and data["tokens_heldout"] > 0
    assert report["eval"]["windows"] > 0 and report["eval"]["prompts"] > 0
    assert report["model_config"]["model_type"] == "qwen3_moe"
    assert report["total_seconds"] > 0


@pytest.mark.slow
def test_it_measures_the_built_in_model_without_training(script, tmp_path):
    out = tmp_path / "builtin.json"
    script.main(["--model", "builtin", "--tiny", "--device", "cpu", "--max-mb", "2", "--heldout", "0.3", "--out",
                 str(out)])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["model"] == "builtin" and "train" not in report
    assert abs(report["runtime_vs_transformers_ppl_relative"]) < 1e-4  # the shipped checkpoint, read by both
    assert math.isfinite(report["ppl_relative_change"]["mxfp8"]) and report["eval"]["windows"] > 0
