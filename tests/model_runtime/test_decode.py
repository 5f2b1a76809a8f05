"""The decode path (static cache, fused decode step, runner) against full forwards without a cache."""

from __future__ import annotations

import torch

from warpcode.model_runtime import load, load_random
from warpcode.model_runtime.decode_runner import DecodeRunner, batch_bucket
from warpcode.model_runtime.decode_step import decode_step
from warpcode.model_runtime.sampling import SamplingParams

PROMPTS = [[3, 5, 7, 9, 11, 13], [4, 2], [8, 8, 8]]


def test_decode_step_logits_match_a_full_forward_for_every_architecture(arch, hf_checkpoints):
    engine = load(hf_checkpoints[arch][1], device="cpu")
    runner = engine.runner
    runner.reserve(len(PROMPTS), 16)
    first = runner.prefill(PROMPTS, SamplingParams(), seed=0)
    sequences = [[*prompt, token] for prompt, token in zip(PROMPTS, first, strict=True)]
    for sequence in sequences:
        assert sequence[-1] == int(engine.logits([sequence[:-1]])[0, -1].argmax())
    for _ in range(4):
        logits = decode_step(engine.model, runner.state, len(PROMPTS), "greedy")
        tokens = runner.state.tokens[: len(PROMPTS)].tolist()
        for row, sequence in enumerate(sequences):
            expected = engine.logits([sequence])[0, -1]
            torch.testing.assert_close(logits[row].float(), expected, rtol=1e-4, atol=1e-4)
            assert tokens[row] == int(logits[row].argmax())
        sequences = [[*sequence, token] for sequence, token in zip(sequences, tokens, strict=True)]
    assert runner.state.seq_lens[: len(PROMPTS)].tolist() == [len(s) - 1 for s in sequences]


def test_decoding_stops_at_the_reserved_context():
    engine = load_random("tiny", seed=1)
    runner = engine.runner
    runner.reserve(1, 10)  # rounds up to 256 tokens
    runner.prefill([[5] * 250], SamplingParams(), seed=0)
    assert len(list(runner.decode(1, SamplingParams()))) == 6


def test_batch_buckets():
    assert [batch_bucket(b) for b in (1, 2, 3, 5, 8, 9, 17, 32, 33, 70)] == [1, 2, 4, 8, 8, 16, 32, 32, 64, 96]


def test_random_cache_start_for_benchmarks():
    engine = load_random("tiny", seed=1)
    runner = DecodeRunner(engine.model)
    runner.reserve(2, 64)
    runner.start_from_random_cache(2, 40)
    steps = runner.decode(2, SamplingParams())
    assert all(len(next(steps)) == 2 for _ in range(3))
    assert runner.state.seq_lens.tolist() == [43, 43]
    assert torch.isfinite(runner.state.keys[0]).all()


def test_bench_decode_command_on_cpu(capsys):
    import json

    from warpcode.agent.cli import main

    argv = ["bench", "decode", "--preset", "tiny", "--random-weights", "--device", "cpu", "--batch", "1,3"]
    assert main([*argv, "--context", "20", "--steps", "3", "--prefill", "50", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows = [line for line in lines if "batch" in line]
    assert [(row["batch"], row["context"]) for row in rows] == [(1, 20), (3, 20)]
    assert all(row["tokens_per_second"] > 0 and row["percent_of_roofline"] > 0 for row in rows)
    assert lines[-1]["prefill_tokens"] == 50 and lines[-1]["ms"] > 0
    assert main(["bench", "decode", "--preset", "tiny", "--device", "cpu"]) == 1
    assert "needs --random-weights" in capsys.readouterr().err
