"""Tool-call grammars against the parsers that read the calls: a text the grammar accepts is read back by our
Hermes / Qwen3-Coder parser to the arguments written, valid against the tool's schema (jsonschema); texts the
parser would misread or the schema rejects are refused by the grammar at the first byte that makes them so."""

from __future__ import annotations

import json

import jsonschema
import llguidance
import pytest

from tests.model_runtime.checkpoints import EOS_TOKEN, train_bpe
from warpcode.model_runtime.chat.toolcall_grammars import (
    HERMES,
    QWEN3_CODER,
    forced_calls,
    special_markers,
    text_with_calls,
)
from warpcode.model_runtime.chat.toolcall_parsers import hermes_parser, qwen3_coder_parser

EDIT = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "pattern": "^[a-z_/]+\\.py$"},
        "old": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "mode": {"enum": ["exact", "fuzzy"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["path", "old"],
    "additionalProperties": False,
}
RUN = {"type": "object", "properties": {"command": {"type": "string", "maxLength": 20}}, "required": ["command"]}
TOOLS = [("edit_file", EDIT), ("run", RUN)]
SCHEMAS = dict(TOOLS)
OPENAI_TOOLS = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in TOOLS]


def llg_tokenizer(bpe) -> tuple:
    eos = [bpe.token_to_id(EOS_TOKEN)]
    return bpe, llguidance.LLTokenizer(bpe.to_str(), n_vocab=bpe.get_vocab_size(), eos_token=eos)


@pytest.fixture(scope="module")
def tokenizer():
    return llg_tokenizer(train_bpe())


@pytest.fixture(scope="module")
def marker_tokenizer():
    """Qwen's way: the markers are added tokens of their own, which llguidance holds as special tokens."""
    bpe = train_bpe()
    bpe.add_tokens(["<tool_call>", "</tool_call>", "<think>", "</think>"])
    return llg_tokenizer(bpe)


def accepts(tokenizer, grammar: str, text: str) -> bool:
    """Whether the grammar takes `text` whole (and may end there)."""
    bpe, llg = tokenizer
    matcher = llguidance.LLMatcher(llg, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return all(matcher.consume_token(t) for t in bpe.encode(text).ids) and matcher.is_accepting()


def coder_call(name: str, arguments: dict[str, str]) -> str:
    params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def hermes_call(name: str, arguments: dict) -> str:
    body = json.dumps({"name": name, "arguments": arguments})  # as the template's tojson writes a past call
    return f"<tool_call>\n{body}\n</tool_call>"


def read(fmt: str, text: str) -> list:
    parser = qwen3_coder_parser(OPENAI_TOOLS) if fmt == QWEN3_CODER else hermes_parser()
    return [item for item in [*parser.feed(text), *parser.finish()] if hasattr(item, "arguments")]


VALID_CODER = coder_call(
    "edit_file", {"path": "pkg/a.py", "old": "x = 1\n  y </param", "count": "3", "mode": "fuzzy", "tags": '["a"]'}
)


@pytest.mark.parametrize("fmt", [HERMES, QWEN3_CODER])
def test_an_accepted_call_reads_back_valid_against_its_schema(tokenizer, fmt):
    arguments = {"path": "pkg/a.py", "old": "x = 1\n  y </param", "count": 3, "mode": "fuzzy", "tags": ["a"]}
    call = VALID_CODER if fmt == QWEN3_CODER else hermes_call("edit_file", arguments)
    assert accepts(tokenizer, forced_calls(fmt, TOOLS, several=False), call)
    (parsed,) = read(fmt, call)
    assert parsed.name == "edit_file" and parsed.error is None and parsed.arguments == arguments
    jsonschema.validate(parsed.arguments, EDIT)


@pytest.mark.parametrize(
    "call",
    [
        coder_call("delete_all", {"path": "a.py"}),  # not a tool
        coder_call("edit_file", {"old": "x"}),  # the required path missing
        coder_call("edit_file", {"path": "a.txt", "old": "x"}),  # path against its pattern
        coder_call("edit_file", {"path": "a.py", "old": "x", "count": "many"}),  # not an integer
        coder_call("edit_file", {"path": "a.py", "old": "x", "count": "0"}),  # below the minimum
        coder_call("edit_file", {"path": "a.py", "old": "x", "mode": "slow"}),  # outside the enum
        coder_call("edit_file", {"path": "a.py", "old": "null"}),  # read as None, not a string
        coder_call("edit_file", {"path": "a.py", "old": "a</parameter>\n<parameter=count>"}),  # read two ways
        coder_call("run", {"command": "x" * 21}),  # past maxLength
        coder_call("edit_file", {"old": "x", "path": "a.py"}),  # out of the schema's order
    ],
)
def test_what_the_parser_would_misread_or_the_schema_rejects_is_refused(tokenizer, call):
    assert not accepts(tokenizer, forced_calls(QWEN3_CODER, TOOLS, several=False), call)


@pytest.mark.parametrize("fmt", [HERMES, QWEN3_CODER])
def test_free_text_keeps_every_call_whole_and_valid(tokenizer, fmt):
    grammar = text_with_calls(fmt, TOOLS)
    call = VALID_CODER if fmt == QWEN3_CODER else hermes_call("run", {"command": "pytest -q"})
    bad = coder_call("run", {"command": "x" * 21}) if fmt == QWEN3_CODER else hermes_call("run", {"cmd": "ls"})
    assert accepts(tokenizer, grammar, "Any text at all, < and tool_call included.\n")
    assert accepts(tokenizer, grammar, f"Let me look.\n{call}\nthen more text\n{call}")
    assert not accepts(tokenizer, grammar, f"Let me look.\n{bad}")
    assert not accepts(tokenizer, grammar, "Let me look.\n<tool_call>\n")  # a call opened must be finished
    headless = "Let me look.\n<function=run>\n<parameter=command>\nls\n</parameter>\n</function>"
    # Qwen3-Coder: a call without its <tool_call> would be left as text by the parser: refused (Hermes: just text)
    assert accepts(tokenizer, grammar, headless) == (fmt == HERMES)


@pytest.mark.parametrize("fmt", [HERMES, QWEN3_CODER])
def test_reasoning_is_free_text_and_calls_after_it_are_constrained(tokenizer, fmt):
    call = VALID_CODER if fmt == QWEN3_CODER else hermes_call("run", {"command": "pytest -q"})
    bad = "<tool_call>\n{} right now"
    thought = f"<think>\nI could write {bad}, but read a.py first.\n</think>\n\n"
    assert accepts(tokenizer, text_with_calls(fmt, TOOLS), f"{thought}Reading it.\n{call}")
    assert not accepts(tokenizer, text_with_calls(fmt, TOOLS), f"{thought}Reading it.\n{bad}")
    # a prompt that leaves the model thinking: the answer ends the reasoning first, whatever it holds
    inside = f"I could write {bad}.\n</think>\n\n"
    assert accepts(tokenizer, text_with_calls(fmt, TOOLS, thinking=True), f"{inside}Reading it.\n{call}")
    assert not accepts(tokenizer, text_with_calls(fmt, TOOLS, thinking=True), "Reading it without thinking")
    if fmt == HERMES:  # JSON spaced as the template writes it, not compact
        assert not accepts(tokenizer, text_with_calls(fmt, TOOLS), call.replace(": ", ":"))


def test_forced_calls_follow_parallel_calls_and_close_the_reasoning(tokenizer):
    one = coder_call("run", {"command": "ls"})
    assert accepts(tokenizer, forced_calls(QWEN3_CODER, TOOLS, several=True), f"{one}\n{one}")
    assert not accepts(tokenizer, forced_calls(QWEN3_CODER, TOOLS, several=False), f"{one}\n{one}")
    assert accepts(
        tokenizer, forced_calls(QWEN3_CODER, TOOLS, several=False, close_reasoning=True), f"</think>\n\n{one}"
    )
    assert not accepts(tokenizer, forced_calls(QWEN3_CODER, TOOLS, several=False), f"text first {one}")


@pytest.mark.parametrize("fmt", [HERMES, QWEN3_CODER])
def test_markers_that_are_tokens_are_named_as_tokens(marker_tokenizer, fmt):
    bpe, llg = marker_tokenizer
    specials = special_markers(lambda m: llg.is_special_token(bpe.token_to_id(m)))
    assert specials == {"<tool_call>", "</tool_call>", "<think>", "</think>"}
    call = VALID_CODER if fmt == QWEN3_CODER else hermes_call("run", {"command": "pytest -q"})
    thought = "<think>\nI could write <tool_call>\n{} right now.\n</think>\n\n"
    grammar = text_with_calls(fmt, TOOLS, specials=specials)
    assert accepts(marker_tokenizer, grammar, f"{thought}Reading it.\n{call}")
    assert not accepts(marker_tokenizer, grammar, "Reading it.\n<tool_call>\n{} now")
    assert accepts(marker_tokenizer, forced_calls(fmt, TOOLS, False, True, specials), f"</think>\n\n{call}")
    # without naming them as tokens, the grammar cannot take the model's own marker tokens
    assert not accepts(marker_tokenizer, text_with_calls(fmt, TOOLS), f"Reading it.\n{call}")


def test_a_hermes_schema_with_defs_resolves_its_refs(tokenizer):
    """Pydantic and MCP servers write nested models as $defs + $ref: the arguments' own schema keeps its root."""
    point = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    to = {"to": {"$ref": "#/$defs/Point"}}
    move = {"type": "object", "$defs": {"Point": point}, "properties": to, "required": ["to"]}
    grammar = forced_calls(HERMES, [("move", move)], several=False)
    assert accepts(tokenizer, grammar, hermes_call("move", {"to": {"x": 3}}))
    assert not accepts(tokenizer, grammar, hermes_call("move", {"to": {"x": "3"}}))
