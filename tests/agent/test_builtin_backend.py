"""The built-in model as the agent's backend: its spec (`builtin[#OPTIONS]`), the default when no model is
configured, and its notice, on real generation from the shipped weights on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.agent.backends import BackendError, MissingModel, backend_from_spec, spec_relative_to
from warpcode.agent.backends import spec as spec_module
from warpcode.agent.backends.builtin import ANSWER_TOKENS, BuiltinBackend
from warpcode.agent.loop import Agent, Limits
from warpcode.model_runtime import builtin_model
from warpcode.model_runtime.builtin_model import BUILTIN_DIR, BUILTIN_NOTICE
from warpcode.training.tasks import make_task
from warpcode.training.tasks.check import write_repo

pytest.importorskip("torch")  # the runtime extra: the model runs in-process


def test_the_spec_names_the_shipped_checkpoint_with_a_local_models_options():
    plain = backend_from_spec("builtin")
    assert isinstance(plain, BuiltinBackend) and plain.path == BUILTIN_DIR
    assert (plain.weights, plain.tool_grammar, plain.max_new_tokens) == ("bf16", True, ANSWER_TOKENS)
    assert plain.context_window == 8192  # the model's own context (its config.json)
    tuned = backend_from_spec("builtin#mxfp8,context=4096,tool-grammar=off", max_tokens=200)
    assert (tuned.weights, tuned.context_window, tuned.tool_grammar, tuned.max_new_tokens) == (
        "mxfp8",
        4096,
        False,
        200,
    )
    with pytest.raises(BackendError, match="unknown option #fast"):
        backend_from_spec("builtin#fast")
    assert spec_relative_to("builtin#mxfp8", Path("/elsewhere")) == "builtin#mxfp8"  # no path to resolve


def test_it_is_the_default_unless_the_installation_cannot_run_it(monkeypatch):
    assert isinstance(backend_from_spec(None), BuiltinBackend)
    monkeypatch.setattr(builtin_model, "BUILTIN_DIR", Path("/nonexistent"))  # an installation without the weights
    assert isinstance(backend_from_spec(None), MissingModel)
    monkeypatch.setattr(builtin_model, "BUILTIN_DIR", BUILTIN_DIR)
    monkeypatch.setattr(spec_module, "RUNTIME_MODULES", ("no_such_module_anywhere",))  # ... or without torch
    assert isinstance(backend_from_spec(None), MissingModel)


async def test_the_first_answer_of_a_session_says_what_the_model_is_and_the_model_never_sees_it(tmp_path, events):
    task = make_task("config_value", "heldout", 3)
    write_repo(task.files, tmp_path)
    agent = Agent(tmp_path, BuiltinBackend(), events, mode="auto", limits=Limits(max_turn_requests=2))
    await agent.prompt(task.instruction)
    said = "".join(u.content.text for u in events.of("agent_message_chunk"))
    assert said.startswith(BUILTIN_NOTICE) and said.count(BUILTIN_NOTICE) == 1
    assert len([m for m in agent.messages if m.role == "assistant"]) == 2  # a second answer came, without it
    assert not any("built-in model" in m.content for m in agent.messages if m.role == "assistant")
    # real generation: the model's own words or calls follow the notice, in a well-formed call when it calls
    assert len(said) > len(BUILTIN_NOTICE) or events.of("tool_call")
    assert not [m for m in agent.messages if m.role == "tool" and m.content.startswith("Error: the call to ")]
