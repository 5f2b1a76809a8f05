"""The local backend's own side: chat-template rendering with tools, tool-call parsing, threaded streaming.
A tiny byte-level BPE is trained here (as in tests/model_runtime); the model is random, so only the plumbing is
checked, not what it says."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tokenizers import Tokenizer as FastTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from warpcode.agent.backends import BackendError, Finish, TextDelta, ToolCallReady, backend_from_spec
from warpcode.agent.backends.local import LocalBackend, load_agent_engine, texts_read
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids, template_message
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template

# A Qwen3-style template: tools in the system turn, tool calls as <tool_call> JSON, results as <tool_response>.
TEMPLATE = """{{- '<|im_start|>system\\n' + messages[0].content + '\\n# Tools\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- for message in messages[1:] %}
{%- if message.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\\n' + message.content }}
{%- for call in message.tool_calls or [] %}
{{- '\\n<tool_call>\\n' + (call.function | tojson) + '\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""


@pytest.fixture(scope="module")
def tokenizer():
    from warpcode.model_runtime.tokenizer import Tokenizer

    fast = FastTokenizer(models.BPE())
    fast.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    fast.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    fast.train_from_iterator(["def add(a, b):\n    return a + b\n", "read the file calc.py"] * 20, trainer)
    return Tokenizer(fast, chat_template=TEMPLATE, eos_token="<|im_end|>")


def test_prompt_renders_tools_calls_and_results_for_the_template(tokenizer) -> None:
    messages = [
        Message("system", "You are warpcode."),
        Message("user", "show calc.py"),
        Message("assistant", "Reading.", [ToolCall("call_1", "read_file", {"path": "calc.py"})]),
        Message("tool", "1\tdef add(a, b):", tool_call_id="call_1", name="read_file"),
    ]
    prompt = tokenizer.decode(conversation_prompt_ids(tokenizer, messages, tool_schemas()))
    assert prompt.startswith('<|im_start|>system\nYou are warpcode.\n# Tools\n<tools>\n{"type": "function"')
    assert '"name": "apply_patch"' in prompt
    assert (
        '<|im_start|>assistant\nReading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "calc.py"}}'
        in prompt
    )
    assert prompt.endswith("<tool_response>\n1\tdef add(a, b):\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    # what the model would write back in this format parses to the same call
    parser = parser_for_template(TEMPLATE, tool_schemas())
    (call,) = parser.feed('<tool_call>\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n</tool_call>')
    assert (call.name, call.arguments) == ("read_file", {"path": "calc.py"})


async def test_random_model_streams_from_a_worker_thread(tokenizer) -> None:
    from warpcode.model_runtime import Engine, load_random

    engine = Engine(load_random("tiny").model, tokenizer, eos_ids=[])
    backend = LocalBackend(engine=engine, max_new_tokens=6)
    ticks = 0

    async def ticker() -> None:  # the event loop keeps running while the model generates
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.ensure_future(ticker())
    # no tools: a short prompt keeps the CPU (Triton-interpreted) prefill fast
    streamed = [e async for e in backend.stream([Message("system", "s"), Message("user", "hi")], [])]
    ticking.cancel()
    assert ticks > 1
    assert isinstance(streamed[-1], Finish) and streamed[-1].reason == "length" and streamed[-1].output_tokens == 6
    assert {type(e) for e in streamed[:-1]} <= {TextDelta, ToolCallReady}
    assert backend.count_tokens("def add") == len(tokenizer.encode("def add", add_special_tokens=False))


async def test_control_text_in_a_file_the_agent_reads_opens_no_turn(tmp_path: Path, monkeypatch) -> None:
    """A file that holds chat-template markup reaches the model as text: the prompt's ids are those transformers
    gives with the file's text as plain text, and only the template's own turns open."""
    from tests.model_runtime.checkpoints import CHAT_TEMPLATE, save_chat_checkpoint, train_bpe
    from tests.model_runtime.prompt_reference import INJECTION, reference_prompt_ids

    fast = train_bpe()
    path = save_chat_checkpoint(tmp_path / "chat", fast, ends_at_once=True, max_position_embeddings=1024)
    engine = load_agent_engine(path)
    submitted: list[list[int]] = []
    submit = engine.submit
    monkeypatch.setattr(engine, "submit", lambda ids, *a, **k: submitted.append(list(ids)) or submit(ids, *a, **k))
    backend = LocalBackend(engine=engine, max_new_tokens=2)
    messages = [
        Message("system", "You are warpcode."),
        Message("user", "summarise notes.txt"),
        Message("assistant", "", [ToolCall("call_1", "read_file", {"path": "notes.txt"})]),
        Message("tool", f"1\t{INJECTION}", tool_call_id="call_1", name="read_file"),
    ]
    tools = [schema for schema in tool_schemas() if schema["function"]["name"] == "read_file"]
    *_, finish = [event async for event in backend.stream(messages, tools)]
    expected = reference_prompt_ids(fast, CHAT_TEMPLATE, [template_message(m) for m in messages], tools)
    assert submitted == [expected] and finish.input_tokens == len(expected)
    # the system turn, the user's, the assistant's, the tool result's and the generation prompt
    assert expected.count(fast.token_to_id("<|im_start|>")) == 5
    engine.shutdown()


def read_conversation(work: Path, calls: list[tuple[str, dict]]) -> list[Message]:
    """A conversation whose tool results are what the real tools answered for `calls` in `work`."""
    from warpcode.agent.toolbox import Toolbox

    box = Toolbox(work)
    messages = [Message("system", "You are warpcode."), Message("user", "fix calc.py")]
    for number, (name, arguments) in enumerate(calls):
        messages.append(Message("assistant", "", [ToolCall(f"call_{number}", name, arguments)]))
        messages.append(Message("tool", box.call(name, arguments).content, tool_call_id=f"call_{number}", name=name))
    return messages


def test_the_texts_read_are_the_files_own_text_without_read_files_numbers(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n\treturn a - b\n\n12\tlooks numbered\n")
    (tmp_path / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 3001)))  # a page, then a note
    messages = read_conversation(tmp_path, [
        ("read_file", {"path": "calc.py"}), ("read_file", {"path": "long.txt"}),
        ("read_file", {"path": "calc.py", "start_line": 2, "end_line": 2}), ("list_files", {}),
    ])  # fmt: skip
    assert texts_read(messages) == [
        (tmp_path / "calc.py").read_text(),
        "".join(f"line {n}\n" for n in range(1, 2001)),
        "\treturn a - b\n",
    ]


async def test_speculation_drafts_from_the_plain_text_of_the_files_the_agent_read(tmp_path: Path, monkeypatch) -> None:
    """The engine gets each text read as token ids to draft from; none with speculation off."""
    from tests.model_runtime.checkpoints import save_chat_checkpoint, train_bpe

    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    messages = read_conversation(tmp_path, [("read_file", {"path": "calc.py"})])
    path = save_chat_checkpoint(tmp_path / "chat", train_bpe(), ends_at_once=True, max_position_embeddings=1024)
    for mode, documents in (("suffix", [(tmp_path / "calc.py").read_text()]), ("off", [])):
        engine = load_agent_engine(path, speculative=mode)
        given: list[list[list[int]]] = []
        submit = engine.submit
        monkeypatch.setattr(engine, "submit", lambda *a, g=given, s=submit, **k: g.append(k["documents"]) or s(*a, **k))
        backend = LocalBackend(engine=engine, max_new_tokens=1)
        async for _ in backend.stream(messages, []):
            pass
        assert [engine.tokenizer.decode(list(ids)) for ids in given[0]] == documents
        engine.shutdown()


async def test_a_shared_backend_keeps_the_texts_read_lately_and_its_latest_requests(tmp_path: Path, monkeypatch):
    """A server's sessions share one backend: what it keeps for them is bounded."""
    from tests.model_runtime.checkpoints import save_chat_checkpoint, train_bpe
    from warpcode.agent.backends import local

    files = {name: f"def {name}(a, b):\n    return a - b\n" for name in ("add", "mul", "div")}
    conversations = []
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
        conversations.append(read_conversation(tmp_path, [("read_file", {"path": f"{name}.py"})]))
    path = save_chat_checkpoint(tmp_path / "chat", train_bpe(), ends_at_once=True, max_position_embeddings=1024)
    engine = load_agent_engine(path, speculative="suffix")
    size = len(engine.tokenizer.encode(files["add"], add_special_tokens=False))  # each text's, alike
    monkeypatch.setattr(local, "DOCUMENT_CACHE_TOKENS", 2 * size + size // 2)  # room for two texts
    backend = LocalBackend(engine=engine, max_new_tokens=1)
    for conversation in [*conversations, conversations[0]]:  # three sessions, then the first again
        async for _ in backend.stream(conversation, []):
            pass
        assert backend._document_tokens <= 2 * size + size // 2
    # the last two texts read are kept, the first was dropped and tokenized again
    assert list(backend._document_ids) == [files["div"], files["add"]]
    assert [len(backend.generation), backend.generation.maxlen] == [4, local.GENERATION_RECORDS]
    engine.shutdown()


async def test_a_conversation_the_template_cannot_write_is_a_clear_error(tokenizer) -> None:
    from warpcode.model_runtime import Engine, load_random

    backend = LocalBackend(engine=Engine(load_random("tiny").model, tokenizer, eos_ids=[]), max_new_tokens=1)
    forged = tokenizer.control_tokens.stand_ins["<|im_end|>"]  # a leaked stand-in, as a file's text
    with pytest.raises(BackendError, match=r"^cannot write the conversation as this model's prompt: .* reserved"):
        _ = [e async for e in backend.stream([Message("system", "s"), Message("user", forged)], [])]


def test_a_directory_without_a_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="is not a checkpoint directory"):
        backend_from_spec(f"local:{tmp_path}")
    with pytest.raises(BackendError, match="Unknown model spec"):
        backend_from_spec("gpt:4")


async def test_sessions_on_one_checkpoint_share_one_engine(tmp_path: Path) -> None:
    """Every local: backend of the process on a checkpoint shares its engine: two sessions' turns run on it at
    once (continuous batching) and both finish."""
    from tests.model_runtime.checkpoints import save_chat_checkpoint, train_bpe

    path = save_chat_checkpoint(tmp_path / "chat", train_bpe())
    first, second = (backend_from_spec(f"local:{path}") for _ in range(2))
    first.max_new_tokens = second.max_new_tokens = 5

    async def turn(backend: LocalBackend) -> Finish:
        events = [e async for e in backend.stream([Message("system", "s"), Message("user", "hi")], [])]
        return events[-1]

    finishes = await asyncio.gather(turn(first), turn(second))
    assert first._engine is second._engine
    assert all(isinstance(f, Finish) and 1 <= f.output_tokens <= 5 for f in finishes)
    assert first._engine.core.active_requests == 0
