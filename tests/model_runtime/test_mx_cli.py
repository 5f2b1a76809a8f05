"""`--weights mxfp8` on `warpcode generate` and `warpcode bench decode` reaches the runtime and runs (tiny, CPU)."""

from __future__ import annotations

import json

import pytest

import warpcode.model_runtime as runtime
from warpcode.agent.cli import main
from warpcode.kernels import MXTensor


@pytest.fixture
def engines_built(monkeypatch):
    """The engines `load` and `load_random` return during the test, recorded."""
    built = []
    for name in ("load", "load_random"):
        real = getattr(runtime, name)

        def recording(*args, _real=real, **kwargs):
            built.append(engine := _real(*args, **kwargs))
            return engine

        monkeypatch.setattr(runtime, name, recording)
    return built


def uses_mx(engine) -> bool:
    return isinstance(engine.model.model.layers[0].self_attn.o_proj.weight, MXTensor)


def test_generate_with_mxfp8_random_weights(engines_built, capsys):
    argv = ["generate", "--random-weights", "--preset", "tiny", "--prompt-ids", "1,2,3", "--max-new-tokens", "4"]
    assert main([*argv, "--device", "cpu", "--weights", "mxfp8"]) == 0
    (engine,) = engines_built
    assert uses_mx(engine)
    tokens = [int(t) for t in capsys.readouterr().out.split()]
    assert tokens == engine.generate([1, 2, 3], 4, stop_token_ids=[])


def test_generate_with_an_mxfp8_checkpoint(engines_built, hf_checkpoints, capsys):
    path = hf_checkpoints["qwen3_moe"][1]
    argv = ["generate", "--model", str(path), "--prompt-ids", "5,6", "--max-new-tokens", "3", "--device", "cpu"]
    assert main([*argv, "--weights", "mxfp8"]) == 0
    assert main(argv) == 0
    assert [uses_mx(engine) for engine in engines_built] == [True, False]


def test_an_unknown_weight_format_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--random-weights", "--preset", "tiny", "--prompt-ids", "1", "--weights", "int8"])
    assert "invalid choice: 'int8'" in capsys.readouterr().err


def test_bench_decode_with_mxfp8(engines_built, capsys):
    argv = ["bench", "decode", "--preset", "tiny", "--random-weights", "--device", "cpu", "--batch", "1"]
    argv += ["--prefill", "0"]
    assert main([*argv, "--context", "8", "--steps", "2", "--weights", "mxfp8", "--json"]) == 0
    assert uses_mx(engines_built[0])
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["weights"] == "mxfp8" and row["tokens_per_second"] > 0
    mx_bytes = row["bytes_per_step"]
    assert main([*argv, "--context", "8", "--steps", "2", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["weights"] == "bf16" and mx_bytes < row["bytes_per_step"]  # MX projections read fewer bytes
