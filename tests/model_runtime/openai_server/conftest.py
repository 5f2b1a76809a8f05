"""Model servers over a tiny chat checkpoint (tokenizer + template) or random weights (no tokenizer), started once per
session (servers.py starts them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model_runtime.checkpoints import save_agent_checkpoint, save_chat_checkpoint
from tests.model_runtime.openai_server.servers import CHAT_MODEL, CONTEXT, RANDOM_MODEL, serving


@pytest.fixture(scope="session")
def chat_engine(tmp_path_factory, fast_tokenizer):
    from warpcode.model_runtime import load

    path = save_chat_checkpoint(tmp_path_factory.mktemp("chat"), fast_tokenizer, max_position_embeddings=CONTEXT)
    engine = load(path, device="cpu", show_progress=False)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def coder_chat_engine(tmp_path_factory, fast_tokenizer):
    """The chat checkpoint with the published Qwen3-Coder template (its XML tool-call format)."""
    from tests.model_runtime.chat.published_toolcall_cases import FORMAT_TEMPLATE
    from warpcode.model_runtime import load

    # the published template spells the tools out at length: a longer context than the other servers'
    path = save_chat_checkpoint(tmp_path_factory.mktemp("coder-chat"), fast_tokenizer, max_position_embeddings=4096)
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": FORMAT_TEMPLATE["qwen3_coder"]}))
    engine = load(path, device="cpu", show_progress=False)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def coder_chat_url(coder_chat_engine) -> Iterator[str]:
    with serving(coder_chat_engine, CHAT_MODEL) as url:
        yield url


@pytest.fixture(scope="session")
def random_engine():
    from warpcode.model_runtime import load_random

    engine = load_random("tiny", device="cpu")
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def chat_url(chat_engine) -> Iterator[str]:
    with serving(chat_engine, CHAT_MODEL) as url:
        yield url


@pytest.fixture(scope="session")
def random_url(random_engine) -> Iterator[str]:
    with serving(random_engine, RANDOM_MODEL) as url:
        yield url


@pytest.fixture(scope="session")
def agent_checkpoint(tmp_path_factory, fast_tokenizer) -> Path:
    """A chat checkpoint that ends its answer at once, with room for an agent's whole prompt (tools included)."""
    return save_agent_checkpoint(tmp_path_factory.mktemp("agent-model"), fast_tokenizer)


@pytest.fixture(scope="session")
def reference_engine(chat_checkpoint):
    """An engine over the chat checkpoint that `reference` reads with transformers."""
    from warpcode.model_runtime import load

    engine = load(chat_checkpoint, device="cpu", show_progress=False)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def reference_url(reference_engine) -> Iterator[str]:
    with serving(reference_engine, CHAT_MODEL) as url:
        yield url


@pytest.fixture(scope="session")
def reference_logits(chat_checkpoint):
    """token ids -> transformers' logits [T, V] (fp32) over the chat checkpoint: what the model gives, by an
    implementation nobody here wrote."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(chat_checkpoint, torch_dtype=torch.float32).eval()

    @torch.no_grad()
    def logits(ids: list[int]) -> torch.Tensor:
        return model(torch.tensor([ids])).logits[0].float()

    return logits


@pytest.fixture(scope="session")
def reference(reference_logits):
    """token ids -> log_softmax of transformers' logits [T, V]: the logprobs the model gives."""
    import torch

    return lambda ids: torch.log_softmax(reference_logits(ids), dim=-1)
