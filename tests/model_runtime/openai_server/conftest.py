"""Model servers over a tiny chat checkpoint (tokenizer + template) or random weights (no tokenizer), started once per
session (servers.py starts them)."""

from __future__ import annotations

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
