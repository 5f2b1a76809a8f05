"""The shipped built-in model (model_runtime/builtin/): a Hugging Face checkpoint that transformers loads too, with
the same logits and greedy tokens as our runtime on the CPU (transformers is the reference), the serving engine's
batched and cached generation equal to full forwards, MXFP8 weights close to bf16, and a chat template in
Qwen3-Coder's tool-call format that our parser reads back."""

from __future__ import annotations

import json

import pytest
import torch

from tests.model_runtime.serving_reference import generate_from_threads, greedy_reference
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime import load
from warpcode.model_runtime.builtin_model import BUILTIN_DIR, BUILTIN_SPEC, builtin_model_dir, model_directory
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template

transformers = pytest.importorskip("transformers")

SIZE_BUDGET = 32 * 10**6  # bytes of weights the package may carry (issue 49)


@pytest.fixture(scope="module")
def engine():
    return load(builtin_model_dir(), device="cpu", dtype=torch.float32, show_progress=False)


@pytest.fixture(scope="module")
def reference():
    return transformers.AutoModelForCausalLM.from_pretrained(BUILTIN_DIR, dtype=torch.float32).eval()


def agent_prompt(engine) -> list[int]:
    """A prompt as the agent sends one: system prompt, the tools, a call and its result."""
    tools = [t for t in tool_schemas() if t["function"]["name"] in ("read_file", "edit_file", "run_tests")]
    messages = [
        Message("system", "You are warpcode, a coding agent. Use the tools to change the repository."),
        Message("user", "Set MAX_RETRIES to 7 in app/settings.py."),
        Message("assistant", "", [ToolCall("call_1", "read_file", {"path": "app/settings.py"})]),
        Message("tool", "     1\tMAX_RETRIES = 3\n     2\tTIMEOUT = 10\n", tool_call_id="call_1", name="read_file"),
    ]
    return conversation_prompt_ids(engine.tokenizer, messages, tools)


def test_it_is_a_complete_checkpoint_within_the_size_budget():
    names = {p.name for p in BUILTIN_DIR.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json"} <= names  # fmt: skip
    assert (BUILTIN_DIR / "model.safetensors").stat().st_size <= SIZE_BUDGET
    config = json.loads((BUILTIN_DIR / "config.json").read_text())
    assert config["model_type"] == "qwen3_moe" and config["num_experts"] > config["num_experts_per_tok"] > 1
    assert model_directory(BUILTIN_SPEC) == BUILTIN_DIR and model_directory("some/dir").as_posix() == "some/dir"


def test_logits_and_greedy_tokens_match_transformers(engine, reference):
    ids = agent_prompt(engine)
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits
    actual = engine.logits(torch.tensor([ids]))
    assert ((actual - expected).norm() / expected.norm()).item() < 1e-4
    greedy = reference.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                                attention_mask=torch.ones(1, len(ids), dtype=torch.long))  # fmt: skip
    assert engine.generate(ids, 24, stop_token_ids=[]) == greedy[0, len(ids) :].tolist()


def test_the_serving_engine_batches_agent_turns_to_the_tokens_of_full_forwards(engine):
    """Continuous batching, chunked prefill and the prefix cache on a trained model's agent prompts (ties between
    near-equal logits, which random weights are full of, are rare here): each request's greedy tokens are those of
    full forwards without a cache."""
    base = agent_prompt(engine)
    prompts = [base, base[:-7], [*base[:-3], *engine.tokenizer.encode("\n", add_special_tokens=False)], base[:40]]
    expected = [greedy_reference(engine, p, 12) for p in prompts]
    serving = load(BUILTIN_DIR, device="cpu", dtype=torch.float32, show_progress=False, block_size=16,
                   max_prefill_tokens=256)  # fmt: skip
    assert generate_from_threads(serving, prompts, 12) == expected
    again = serving.submit(prompts[0], 12, stop_token_ids=[])
    assert again.result() == expected[0] and again.stats.cached_tokens > 0
    serving.shutdown()


def test_mxfp8_weights_stay_close_to_bf16():
    ids = torch.tensor([agent_prompt(load(BUILTIN_DIR, device="cpu", show_progress=False))])
    targets = ids[0, 1:]
    losses = {}
    for weights in ("bf16", "mxfp8"):
        engine = load(BUILTIN_DIR, device="cpu", dtype=torch.float32, weights=weights, show_progress=False)
        logits = engine.logits(ids)[0, :-1]
        losses[weights] = torch.nn.functional.cross_entropy(logits, targets).item()
    assert abs(losses["mxfp8"] - losses["bf16"]) < 0.01 * losses["bf16"]


def test_its_template_writes_qwen3_coder_calls_that_the_parser_reads_back(engine):
    call = ToolCall("call_2", "edit_file", {"path": "app/settings.py", "old_text": "MAX_RETRIES = 3",
                                              "new_text": "MAX_RETRIES = 7"})  # fmt: skip
    tools = [t for t in tool_schemas() if t["function"]["name"] == "edit_file"]
    before = conversation_prompt_ids(engine.tokenizer, [Message("user", "go")], tools)
    after = conversation_prompt_ids(engine.tokenizer, [Message("user", "go"), Message("assistant", "", [call])],
                                    tools, add_generation_prompt=False)  # fmt: skip
    written = engine.tokenizer.decode(after[len(before) :])
    assert "<function=edit_file>" in written
    parser = parser_for_template(str(engine.tokenizer.chat_template), tools)
    parsed = [item for item in [*parser.feed(written.split("<|im_end|>")[0]), *parser.finish()]
              if isinstance(item, ToolCall)]  # fmt: skip
    assert [(c.name, c.arguments) for c in parsed] == [(call.name, call.arguments)]
