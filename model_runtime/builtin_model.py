"""The built-in model: warpcode's own small Mixture-of-Experts coding model, shipped inside the package.

It is a Hugging Face checkpoint directory like any other (config.json, generation_config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with a chat template in Qwen3-Coder's tool-call format), made by
warpcode.training (docs/training.md says how) and loaded by the same runtime, so everything that runs a local model
runs it: the agent's backends, `warpcode generate` and `warpcode serve-model`. It is small (15M parameters) so that
it answers on any CPU with no download; it is no substitute for a real coding model.

`builtin` is its model spec, the default when no model is configured; `builtin#OPTIONS` takes a local checkpoint's
options (`builtin#mxfp8`).
"""

from __future__ import annotations

from pathlib import Path

BUILTIN_SPEC = "builtin"
BUILTIN_NAME = "warpcode-builtin"  # its name where a server lists it (serve-model's /v1/models)
BUILTIN_DIR = Path(__file__).parent / "builtin"
# The first answer of a session with the built-in model starts with this, so nobody mistakes it for a real one.
BUILTIN_NOTICE = (
    "(This is warpcode's small built-in model, a 15M-parameter demonstration: it manages simple edits -- a rename, "
    "a missing import, a constant -- only some of the time. For real work configure a model: --model openai:URL "
    "for a vLLM, SGLang, llama.cpp or Ollama server, or --model local:DIR for a Hugging Face checkpoint; "
    "`warpcode --help` says more.)\n\n"
)


def is_builtin(spec: str | None) -> bool:
    """`builtin` or `builtin#OPTIONS`."""
    return spec is not None and spec.partition("#")[0] == BUILTIN_SPEC


def builtin_installed() -> bool:
    """Whether this installation holds the built-in model's weights."""
    return (BUILTIN_DIR / "model.safetensors").is_file()


def builtin_model_dir() -> Path:
    """The built-in model's checkpoint directory; FileNotFoundError when this installation lacks it."""
    if not builtin_installed():
        raise FileNotFoundError(
            f"the built-in model's weights are not in {BUILTIN_DIR}: reinstall warpcode (pip install warpcode), or "
            "configure a model with --model"
        )
    return BUILTIN_DIR


def model_directory(spec: str) -> Path:
    """A `--model` value of `generate` or `serve-model` as a checkpoint directory: `builtin` is the built-in one."""
    return builtin_model_dir() if spec == BUILTIN_SPEC else Path(spec)
