"""The chat checkpoint's tokenizer (a byte-level BPE, conftest.train_bpe): chat template with tools, EOS ids,
streaming text and stop strings."""

from __future__ import annotations

import pytest

from tests.model_runtime.checkpoints import CHAT_TEMPLATE as TEMPLATE
from tests.model_runtime.conversations import MESSAGES, TOOLS
from warpcode.model_runtime import load
from warpcode.model_runtime.chat.template import ChatTemplateError
from warpcode.model_runtime.detokenize import IncrementalDetokenizer, StopStringFilter
from warpcode.model_runtime.tokenizer import Tokenizer

MULTIBYTE = "naïve café — 日本語 🙂🚀 done"


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
