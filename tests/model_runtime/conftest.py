"""Fixtures over tests/model_runtime/checkpoints.py: tiny random checkpoints of every supported architecture and the
chat checkpoint, saved once per test session."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer as FastTokenizer

from tests.model_runtime.checkpoints import HF_CONFIGS, build_hf_model, save_chat_checkpoint, train_bpe


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking an `arch` argument runs once per supported architecture."""
    if "arch" in metafunc.fixturenames:
        metafunc.parametrize("arch", list(HF_CONFIGS))


@pytest.fixture(scope="session")
def make_hf_model():
    """(arch, seed=0, **config overrides) -> a random float32 transformers model."""
    return build_hf_model


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory) -> dict[str, tuple[torch.nn.Module, Path]]:
    """arch -> (transformers model, directory it was saved to with save_pretrained)."""
    out = {}
    for arch in HF_CONFIGS:
        model = build_hf_model(arch)
        path = tmp_path_factory.mktemp(arch)
        model.save_pretrained(path)
        out[arch] = (model, path)
    return out


@pytest.fixture
def run_cli():
    """Runs `warpcode generate ARGV...` through its own argparse registration; returns the exit code."""
    from warpcode.agent.cli import generate as cli_generate

    def run(argv: list[str]) -> int:
        parser = argparse.ArgumentParser()
        cli_generate.register(parser.add_subparsers())
        args = parser.parse_args(argv)
        return args.handler(args)

    return run


@pytest.fixture(scope="session")
def fast_tokenizer() -> FastTokenizer:
    return train_bpe()


@pytest.fixture(scope="session")
def chat_checkpoint(tmp_path_factory, fast_tokenizer) -> Path:
    return save_chat_checkpoint(tmp_path_factory.mktemp("chat"), fast_tokenizer)
