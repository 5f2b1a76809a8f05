"""What a chat template sees, against transformers: the tokenizer's named special tokens (bos_token undefined when
the tokenizer has none, as in Qwen's tokenizer_config.json), `documents` defined as None, and the published Qwen3 and
Qwen3-Coder templates (tests/fixtures/chat_templates) rendering the same prompts, with reasoning under each of its
names and enable_thinking, through serve-model's request path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.model_runtime.checkpoints import train_bpe
from warpcode.model_runtime.openai_server.chat import chat_prompt_ids
from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest
from warpcode.model_runtime.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")
TEMPLATES = Path(__file__).parents[1] / "fixtures" / "chat_templates"
PUBLISHED = ["qwen3.jinja", "qwen3_coder_2025_07.jinja", "qwen3_coder_2025_08.jinja"]
PROBE = (
    "bos:{{ bos_token is defined }} eos:{{ eos_token }} pad:{{ pad_token | default('-') }} "
    "unk:{{ unk_token is defined }} documents:{{ documents is defined }}/{{ documents is none }}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace text in a file",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old": {"type": "string"},
                    "replace_all": {"type": "boolean"},
                    "count": {"type": ["integer", "null"]},
                },
                "required": ["path", "old"],
            },
        },
    }
]
CALL = {"path": "a.py", "old": "x = 1", "replace_all": True, "count": None}


@pytest.fixture(scope="module")
def fast():
    tokenizer = train_bpe()
    tokenizer.add_tokens(["<think>", "</think>", "<tool_call>", "</tool_call>"])  # as in Qwen's vocabulary
    return tokenizer


def checkpoint_tokenizers(path: Path, fast, template: str) -> tuple[Tokenizer, object]:
    """Ours and transformers' tokenizers of one directory holding Qwen's special-token settings."""
    fast.save(str(path / "tokenizer.json"))
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None}
    config.update(chat_template=template, tokenizer_class="PreTrainedTokenizerFast")
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return Tokenizer.from_dir(path), transformers.AutoTokenizer.from_pretrained(path)


def conversations(reasoning_name: str) -> list[list[dict]]:
    call = {"id": "c1", "type": "function", "function": {"name": "edit_file", "arguments": CALL}}
    first = [{"role": "system", "content": "You edit code."}, {"role": "user", "content": "fix a.py"}]
    step = {"role": "assistant", "content": "Editing.", reasoning_name: "\nx is wrong.\n", "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "edited a.py"}
    answer = {"role": "assistant", "content": "Done.", reasoning_name: "It is fixed."}
    return [
        first,
        [*first, step, result],  # reasoning of the current request's steps is shown
        [*first, step, result, answer, {"role": "user", "content": "and b.py?"}],  # older reasoning is dropped
        [*first, {"role": "assistant", "content": "<think>\nold style\n</think>\n\nHi"}, first[1]],
    ]


def test_special_tokens_and_documents_are_what_transformers_gives(tmp_path: Path, fast) -> None:
    ours, reference = checkpoint_tokenizers(tmp_path, fast, PROBE)
    messages = [{"role": "user", "content": "hi"}]
    expected = reference.apply_chat_template(messages, tokenize=False)
    assert expected == "bos:False eos:<|im_end|> pad:<|endoftext|> unk:False documents:True/True"
    assert ours.apply_chat_template(messages) == expected
    assert ours.decode(ours.chat_prompt_ids(messages)) == expected


@pytest.mark.parametrize("template", PUBLISHED)
@pytest.mark.parametrize("reasoning_name", ["reasoning_content", "reasoning", "thinking"])
@pytest.mark.parametrize("options", [{}, {"enable_thinking": False}])
def test_published_templates_render_requests_as_transformers(tmp_path, fast, template, reasoning_name, options):
    ours, reference = checkpoint_tokenizers(tmp_path, fast, (TEMPLATES / template).read_text())
    for messages in conversations(reasoning_name):
        text = reference.apply_chat_template(
            messages, tools=TOOLS, tokenize=False, add_generation_prompt=True, **options
        )
        request = ChatCompletionRequest.model_validate(
            {"messages": messages, "tools": TOOLS, "chat_template_kwargs": options}
        )
        assert chat_prompt_ids(ours, request) == reference.encode(text, add_special_tokens=False), messages
