"""A tiny byte-level BPE trained here: chat template with tools, EOS ids, streaming text and stop strings."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer as FastTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from warpcode.model_runtime import load
from warpcode.model_runtime.chat_template import ChatTemplateError
from warpcode.model_runtime.detokenize import IncrementalDetokenizer, StopStringFilter
from warpcode.model_runtime.tokenizer import Tokenizer

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "the quick brown fox jumps over the lazy dog",
    "café naïve résumé",
    "print('hello world')",
    "import os\nimport sys\n",
] * 20
MULTIBYTE = "naïve café — 日本語 🙂🚀 done"

# A Qwen-style template: system prompt with a tools section, tool calls, tool results, generation prompt.
TEMPLATE = """{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role not in ['system', 'user', 'assistant', 'tool'] %}
{{- raise_exception('unknown role ' + message.role) }}
{%- endif %}
{%- if message.role != 'system' %}
{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}
{%- for call in message.tool_calls or [] %}
{{- '\\n<tool_call>\\n' + (call.function | tojson) + '\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read <path> & return it (ünïcode)",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Show me a.py"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}],
    },
    {"role": "tool", "content": "print('hi')"},
]


@pytest.fixture(scope="module")
def fast_tokenizer() -> FastTokenizer:
    tokenizer = FastTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


@pytest.fixture(scope="module")
def chat_checkpoint(tmp_path_factory, fast_tokenizer, make_hf_model):
    """A tiny qwen3_moe checkpoint with tokenizer files. Tokens that decode to part of a character (or are special)
    get zero LM-head rows, so greedy text is clean and comparisons with a one-shot decode are exact."""
    path = tmp_path_factory.mktemp("chat")
    model = make_hf_model("qwen3_moe", vocab_size=320, tie_word_embeddings=False)
    with torch.no_grad():
        for token in range(320):
            text = fast_tokenizer.decode([token], skip_special_tokens=False)
            if token >= fast_tokenizer.get_vocab_size() or "\ufffd" in text or text in SPECIAL or not text:
                model.lm_head.weight[token] = 0
    model.save_pretrained(path)
    fast_tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE, "eos_token": "<|im_end|>"}))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0]}))
    return path


def test_chat_template_with_tools_matches_transformers(fast_tokenizer):
    transformers = pytest.importorskip("transformers")
    reference = transformers.PreTrainedTokenizerFast(tokenizer_object=fast_tokenizer)
    ours = Tokenizer(fast_tokenizer, chat_template=TEMPLATE)
    for tools in (TOOLS, None):
        expected = reference.apply_chat_template(
            MESSAGES, tools=tools, chat_template=TEMPLATE, tokenize=False, add_generation_prompt=True
        )
        assert ours.apply_chat_template(MESSAGES, tools=tools, add_generation_prompt=True) == expected
    text = ours.apply_chat_template(MESSAGES, tools=TOOLS)
    assert '"description": "Read <path> & return it (ünïcode)"' in text  # tojson: no HTML escaping, no \\u
    assert text.endswith("<|im_start|>assistant\n")
    assert '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>' in text
    assert not ours.apply_chat_template(MESSAGES[:2], add_generation_prompt=False).endswith("assistant\n")


def test_template_raise_exception_and_sandbox(fast_tokenizer):
    ours = Tokenizer(fast_tokenizer, chat_template=TEMPLATE)
    with pytest.raises(ChatTemplateError, match="unknown role robot"):
        ours.apply_chat_template([{"role": "robot", "content": "hi"}])
    tracked = Tokenizer(
        fast_tokenizer,
        chat_template="{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}",
    )
    assert tracked.apply_chat_template(MESSAGES[:2]) == "[You are a coding agent.][Show me a.py]"
    sneaky = Tokenizer(fast_tokenizer, chat_template="{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatTemplateError):
        sneaky.apply_chat_template(MESSAGES)


def test_streaming_never_splits_a_character(fast_tokenizer):
    ids = fast_tokenizer.encode(MULTIBYTE).ids
    assert any("\ufffd" in fast_tokenizer.decode([token]) for token in ids)  # some characters span tokens
    detokenizer = IncrementalDetokenizer(fast_tokenizer.decode)
    deltas = [detokenizer.push(token) for token in ids] + [detokenizer.flush()]
    assert all("\ufffd" not in delta for delta in deltas)
    assert "".join(deltas) == MULTIBYTE


def test_stop_string_filter_holds_back_partial_matches():
    stops = StopStringFilter(["</tool_call>", "STOP"])
    out = [stops.feed(piece) for piece in ["ab</to", "ol_ca", "x", "y S", "TO", "P", "zz"]]
    assert out == ["ab", "", "</tool_cax", "y ", "", "", ""]
    assert stops.stopped and stops.flush() == ""


def test_checkpoint_tokenizer_and_eos_ids(chat_checkpoint, fast_tokenizer):
    engine = load(chat_checkpoint, show_progress=False)
    assert set(engine.eos_token_ids) == {0, fast_tokenizer.token_to_id("<|im_end|>")}
    prompt = engine.tokenizer.apply_chat_template(MESSAGES[:2], tools=TOOLS)
    assert engine.tokenizer.decode(engine.tokenizer.encode(prompt, add_special_tokens=False)) == prompt


def test_stream_and_stop_strings(chat_checkpoint):
    engine = load(chat_checkpoint, show_progress=False)
    tokenizer = engine.tokenizer
    prompt = tokenizer.encode(tokenizer.apply_chat_template(MESSAGES[:2]), add_special_tokens=False)
    ids = engine.generate(prompt, 40, stop_token_ids=[])
    text = tokenizer.decode(ids, skip_special_tokens=True)
    assert len(text) > 20
    assert "".join(engine.stream(prompt, 40, stop_token_ids=[])) == text

    stop = text[len(text) // 2 : len(text) // 2 + 3]
    cut = text.index(stop)
    assert "".join(engine.stream(prompt, 40, stop_token_ids=[], stop_strings=[stop])) == text[:cut]
    stopped = engine.generate(prompt, 40, stop_token_ids=[], stop_strings=[stop])
    assert stop in tokenizer.decode(stopped) and stop not in tokenizer.decode(stopped[:-1])
    assert stopped == ids[: len(stopped)]

    eos = ids[5]
    streamed = "".join(engine.stream(prompt, 40, stop_token_ids=[eos]))
    assert streamed == tokenizer.decode(ids[: ids.index(eos)], skip_special_tokens=True)


def test_id_level_api_works_without_tokenizer(hf_checkpoints):
    engine = load(hf_checkpoints["olmoe"][1], show_progress=False)
    assert engine.tokenizer is None
    assert len(engine.generate([1, 2, 3], 4, stop_token_ids=[])) == 4
    with pytest.raises(ValueError, match="needs a tokenizer"):
        engine.generate([1, 2, 3], 4, stop_strings=["x"])


def test_generate_command_streams_text(chat_checkpoint, capsys, run_cli):
    argv = ["generate", "--model", str(chat_checkpoint), "--prompt", "hello", "--chat", "--max-new-tokens", "8"]
    assert run_cli([*argv, "--device", "cpu", "--dtype", "fp32"]) == 0
    out, err = capsys.readouterr()
    engine = load(chat_checkpoint, show_progress=False)
    prompt = engine.tokenizer.encode(
        engine.tokenizer.apply_chat_template([{"role": "user", "content": "hello"}]), add_special_tokens=False
    )
    assert out == "".join(engine.stream(prompt, 8)) + "\n"
    assert "decode:" in err and "tok/s" in err
