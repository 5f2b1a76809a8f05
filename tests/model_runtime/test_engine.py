"""Sampling, the engine's sampled generation and stats, and the `warpcode generate` command."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime import load_random
from warpcode.model_runtime.sampling import SamplingParams, filter_logits

LOGITS = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.07, 0.03]]))


def kept(params: SamplingParams) -> list[int]:
    return torch.isfinite(filter_logits(LOGITS.clone(), params))[0].nonzero().flatten().tolist()


def test_filters():
    assert kept(SamplingParams(temperature=1.0)) == [0, 1, 2, 3, 4]
    assert kept(SamplingParams(temperature=1.0, top_k=2)) == [0, 1]
    assert kept(SamplingParams(temperature=1.0, top_p=0.75)) == [0, 1]  # 0.5 + 0.25 reaches 0.75
    assert kept(SamplingParams(temperature=1.0, top_p=0.76)) == [0, 1, 2]
    assert kept(SamplingParams(temperature=1.0, top_p=0.1)) == [0]  # the most likely token always stays
    assert kept(SamplingParams(temperature=1.0, min_p=0.3)) == [0, 1, 2]  # >= 0.3 * 0.5
    assert kept(SamplingParams(temperature=1.0, top_k=4, min_p=0.1, top_p=0.9)) == [0, 1, 2]


def test_sampling_params_are_validated():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)


def test_sampled_generation_is_seeded():
    engine = load_random("tiny", seed=2)
    params = dict(temperature=1.0, top_k=50, top_p=0.95, min_p=0.01, stop_token_ids=[])
    first = engine.generate([5, 6, 7], 12, seed=11, **params)
    assert engine.generate([5, 6, 7], 12, seed=11, **params) == first
    assert engine.generate([5, 6, 7], 12, seed=12, **params) != first
    greedy = engine.generate([5, 6, 7], 12, stop_token_ids=[])
    assert engine.generate([5, 6, 7], 12, temperature=0.7, top_k=1, seed=3, stop_token_ids=[]) == greedy
    stats = engine.last_stats
    assert (stats.prompt_tokens, stats.new_tokens) == (3, 11) and stats.decode_tokens_per_second > 0


def test_logits_accepts_one_sequence_and_matches_generation():
    engine = load_random("tiny", seed=3)
    logits = engine.logits([4, 8, 15, 16])
    assert logits.shape == (1, 4, engine.config.vocab_size) and logits.dtype == torch.float32
    assert engine.generate([4, 8, 15, 16], 1, stop_token_ids=[]) == [int(logits[0, -1].argmax())]


def test_generate_command_with_random_weights(capsys, run_cli):
    assert (
        run_cli(
            [
                "generate",
                "--random-weights",
                "--preset",
                "tiny",
                "--prompt-ids",
                "1,2,3",
                "--max-new-tokens",
                "6",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    expected = load_random("tiny").generate([1, 2, 3], 6)
    assert out.split() == [str(token) for token in expected]
    assert "prompt: 3 tokens" in err and "decode: 5 tokens" in err and "tok/s" in err
    with pytest.raises(ValueError, match="needs --preset"):
        run_cli(["generate", "--random-weights", "--prompt-ids", "1"])
