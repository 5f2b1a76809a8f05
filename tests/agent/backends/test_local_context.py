"""The context a model gets: as vLLM derives it from the published Qwen3 configs (tests/fixtures/model_configs),
YaRN included, and as `local:DIR#context=N` sets it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from warpcode.agent.backends import BackendError, backend_from_spec
from warpcode.agent.backends.local import split_local_spec
from warpcode.model_runtime.config import ModelConfig, RopeScaling

CONFIGS = Path(__file__).parents[2] / "fixtures" / "model_configs"
YARN_4X = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}  # the Qwen3 model cards'


def config(name: str, **changes) -> dict:
    return {**json.loads((CONFIGS / name).read_text()), **changes}


def checkpoint_dir(tmp_path: Path, raw: dict) -> Path:
    tmp_path.mkdir()
    (tmp_path / "config.json").write_text(json.dumps(raw))  # all a spec reads: the weights load at first use
    return tmp_path


@pytest.mark.parametrize(
    ("raw", "context"),
    [
        (config("qwen3_30b_a3b.json"), 40_960),
        (config("qwen3_30b_a3b.json", rope_scaling=YARN_4X), 131_072),  # not max_position_embeddings' 40,960
        (config("qwen3_coder_30b_a3b_instruct.json"), 262_144),
        (config("qwen3_30b_a3b.json", rope_scaling={"rope_type": "linear", "factor": 2.0}), 81_920),
    ],
)
def test_the_context_is_derived_as_vllm_derives_it(raw, context) -> None:
    assert ModelConfig.from_dict(raw).context_length == context


def test_the_engine_serves_the_derived_context() -> None:
    from warpcode.model_runtime import get_preset, load_random

    preset = get_preset("tiny")
    yarn = RopeScaling("yarn", 4.0, original_max_position_embeddings=preset.max_position_embeddings)
    engine = load_random(replace(preset, rope_scaling=yarn), device="cpu")
    assert engine.context_length == 4 * preset.max_position_embeddings
    engine.shutdown()


def test_local_spec_context(tmp_path: Path) -> None:
    qwen3 = checkpoint_dir(tmp_path / "qwen3", config("qwen3_30b_a3b.json", rope_scaling=YARN_4X))
    coder = checkpoint_dir(tmp_path / "coder", config("qwen3_coder_30b_a3b_instruct.json"))
    assert backend_from_spec(f"local:{qwen3}").context_window == 131_072
    assert backend_from_spec(f"local:{coder}").context_window == 131_072  # longer only when asked for
    assert backend_from_spec(f"local:{coder}#context=262144").context_window == 262_144
    backend = backend_from_spec(f"{qwen3}#mxfp8,context=65536")
    assert (backend.weights, backend.context, backend.context_window) == ("mxfp8", 65_536, 65_536)
    assert split_local_spec(f"{qwen3}#context=8192,bf16") == (str(qwen3), "bf16", 8192, True, None)
    assert split_local_spec(f"{qwen3}#tool-grammar=off") == (str(qwen3), "bf16", None, False, None)
    assert split_local_spec(f"{qwen3}#speculative=off,mxfp8") == (str(qwen3), "mxfp8", None, True, "off")
    assert backend_from_spec(f"local:{qwen3}#speculative=ngram").speculative == "ngram"
    with pytest.raises(BackendError, match=r"context=262144 passes the 131,072 tokens the model .* holds"):
        backend_from_spec(f"local:{qwen3}#context=262144")
    for bad in ("context=lots", "context=0", "fp4", "ctx=8192", "tool-grammar=maybe", "speculative=eagle"):
        with pytest.raises(BackendError, match=rf"unknown option #{bad} in model spec .* #context=N"):
            backend_from_spec(f"local:{qwen3}#{bad}")


def test_the_local_engine_is_loaded_with_the_asked_context(tmp_path: Path) -> None:
    from tests.model_runtime.checkpoints import save_chat_checkpoint, train_bpe
    from warpcode.agent.backends.local import load_agent_engine

    path = save_chat_checkpoint(tmp_path, train_bpe())  # its own context: 256
    engine = load_agent_engine(path, context=128)
    assert engine.context_length == 128 and engine.serving.speculative.mode == "suffix"  # a CPU's default
    assert engine.serving.speculative.max_running == 2
    engine.shutdown()
    engine = load_agent_engine(path, speculative="off")
    assert engine.serving.speculative.mode == "off"
    engine.shutdown()
