"""`backend_from_spec`: the backend a `--model` spec names (the spec strings are a fixed interface), and
`spec_relative_to`, a spec's path made absolute for workers that run elsewhere."""

from __future__ import annotations

from pathlib import Path

from warpcode.agent.backends.base import BackendError, MissingModel, ModelBackend
from warpcode.agent.extras import RUNTIME_MODULES, missing, require_runtime
from warpcode.model_runtime import builtin_model
from warpcode.model_runtime.builtin_model import BUILTIN_SPEC, is_builtin

# Each backend's module is imported when a spec names it: the command line starts without httpx (a tenth of a second).


def spec_relative_to(spec: str, folder: Path) -> str:
    """`spec` with its path made absolute, a relative one taken from `folder` (`~` is the home folder): how a
    JOBS.jsonl row names its model, relative to the JOBS file as its `repo` is, and how `warpcode batch --model`
    stays valid in workers that run elsewhere (Ray). `openai:`, `random:` and `builtin` specs hold no path."""
    if is_builtin(spec):
        return spec
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted":
        return f"scripted:{_from(folder, rest)}"
    if sep and kind == "local":
        return f"local:{_local_from(folder, rest)}"
    if sep and kind in ("openai", "random"):
        return spec
    return _local_from(folder, spec)  # a bare checkpoint directory, as backend_from_spec takes it


def _local_from(folder: Path, spec: str) -> str:
    """A `DIR[#OPTIONS]` spec with DIR taken from `folder`; a directory whose name holds '#' stays whole, as
    split_local_spec reads it."""
    if (whole := _from(folder, spec)).is_dir():
        return str(whole)
    directory, sep, options = spec.rpartition("#")
    return f"{_from(folder, directory)}#{options}" if sep else str(whole)


def _from(folder: Path, path: str) -> Path:
    return Path(folder).absolute() / Path(path).expanduser()


def default_spec() -> str | None:
    """The model of a command given none: the built-in one where this installation can run it (the runtime extra
    and the model's weights are installed), else None (MissingModel explains how to configure one)."""
    return BUILTIN_SPEC if builtin_model.builtin_installed() and not missing(RUNTIME_MODULES) else None


def backend_from_spec(spec: str | None, max_tokens: int | None = None) -> ModelBackend:
    """`scripted:PATH`, `openai:URL[#MODEL]`, `local:DIR[#OPTIONS]`, a bare checkpoint DIR[#OPTIONS] (OPTIONS:
    `mxfp8`, `context=N`, `tool-grammar=on|off`, `speculative=off|ngram|suffix`: local.py) or `builtin[#OPTIONS]`;
    None -> the default_spec's, or MissingModel. `max_tokens`: one answer's token limit (None: the backend's own; a
    script has none)."""
    spec = spec or default_spec()
    if not spec:
        return MissingModel()
    if is_builtin(spec):
        require_runtime("the built-in model")
        from warpcode.agent.backends.builtin import BuiltinBackend

        return BuiltinBackend(spec, max_tokens)
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted":
        from warpcode.agent.backends.scripted import ScriptedBackend

        return ScriptedBackend.from_file(rest)
    if sep and kind == "openai":
        from warpcode.agent.backends.openai import OpenAIBackend

        url, _, model = rest.partition("#")
        return OpenAIBackend(url, model or None, **({"max_tokens": max_tokens} if max_tokens else {}))
    if sep and kind == "local":
        require_runtime(f"the model {spec}")
        return _local_backend(rest, max_tokens)
    if sep and kind == "random":
        raise BackendError(
            f"{spec!r} (random weights at a preset's shape) has no tokenizer, so an agent cannot talk to it: it is "
            "the model of `warpcode batch --ray ... --replicas R` (or `warpcode serve-model --model`) for scripted "
            'jobs whose turns ask it for tokens ("generate_tokens")'
        )
    directory, sep, _ = spec.rpartition("#")
    if Path(spec).is_dir() or (sep and Path(directory).is_dir()):
        require_runtime(f"the local model {spec}")
        return _local_backend(spec, max_tokens)
    raise BackendError(
        f"Unknown model spec {spec!r}: use openai:URL[#MODEL], local:DIR[#mxfp8,context=N], a checkpoint directory, "
        "builtin or scripted:PATH."
    )


def _local_backend(spec: str, max_tokens: int | None) -> ModelBackend:
    from warpcode.agent.backends.local import LocalBackend, split_local_spec

    local = split_local_spec(spec)
    answer_limit = {"max_new_tokens": max_tokens} if max_tokens else {}
    return LocalBackend(
        local.directory, weights=local.weights, context=local.context, tool_grammar=local.tool_grammar,
        speculative=local.speculative, **answer_limit,
    )  # fmt: skip
