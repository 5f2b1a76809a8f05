from __future__ import annotations

import pytest

from tests.model_runtime.chat.published_toolcall_cases import CASE_TOOLS, CASES, FORMAT_TEMPLATE, check, splits
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.toolcall_parsers import hermes_parser, parser_for_template, qwen3_coder_parser

HERMES_TEXT = (
    "I'll read it <tool (not a tag) first.\n<tool_call>\n"
    '{"name": "read_file", "arguments": {"path": "calc.py", "start_line": 2}}\n</tool_call>\n'
    '<tool_call>{"name": "search", "arguments": "{\\"pattern\\": \\"def <x>\\"}"}</tool_call>'
    "<tool_call>{not json}</tool_call> see <tool_call>example</tool_call>"
    '<tool_call>{"name": "write_file", "arguments": {"path": "t.xml", "content": "a</tool_call>b"}}</tool_call>'
    " trailing <tool_"
)
CODER_TEXT = (
    "Editing now.\n<tool_call>\n<function=edit_file>\n<parameter=path>\ncalc.py\n</parameter>\n"
    "<parameter=old_text>\n    return a - b\n</parameter>\n<parameter=new_text>\n    return a + b\n</parameter>\n"
    "<parameter=replace_all>\nFalse\n</parameter>\n</function>\n</tool_call>\n"
    "<function=read_file><parameter=path>calc.py</parameter><parameter=end_line>3</parameter></function>\n"
    "</tool_call>\n<tool_call>\n<function=write_file>\n<parameter=path>\nparse.py\n</parameter>\n<parameter=content>\n"
    "END = '</parameter>'  # <tool_call> and </function> are text here\n</parameter>\n</function>\n</tool_call>"
)


def _normalized(items: list) -> list:
    """Adjacent text pieces merged: how the stream was split must not matter."""
    out: list = []
    for item in items:
        if isinstance(item, TextDelta) and out and isinstance(out[-1], str):
            out[-1] += item.text
        elif not isinstance(item, TextDelta) or item.text:
            out.append(item.text if isinstance(item, TextDelta) else item)
    return out


def _parse(make, pieces: list[str]) -> list:
    parser = make()
    items = [item for piece in pieces for item in parser.feed(piece)]
    return _normalized(items + parser.finish())


@pytest.mark.parametrize(
    ("make", "text"),
    [(hermes_parser, HERMES_TEXT), (lambda: qwen3_coder_parser(tool_schemas()), CODER_TEXT)],
    ids=["hermes", "qwen3-coder"],
)
def test_every_split_of_the_stream_parses_the_same(make, text: str) -> None:
    whole = _parse(make, [text])
    for pieces in splits(text):
        assert _parse(make, pieces) == whole, pieces
    for a in range(0, len(text), 7):  # three pieces, many pairs of cuts
        for b in range(a, len(text), 11):
            assert _parse(make, [text[:a], text[a:b], text[b:]]) == whole


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_published_cases_whole_and_split_at_every_position(case) -> None:
    """vLLM's and SGLang's parser test cases, on the agent's parser: calls that fail to parse may come back as
    errors for the model (ToolCall.error), never as calls the published test does not expect."""
    tools = CASE_TOOLS[case["tools"]]
    for pieces in splits(case["output"]):
        parser = parser_for_template(FORMAT_TEMPLATE[case["format"]], tools)
        items = [item for piece in pieces for item in parser.feed(piece)] + parser.finish()
        calls = [{"name": i.name, "arguments": i.arguments} for i in items if isinstance(i, ToolCall) and not i.error]
        check(case, calls, "".join(i.text for i in items if isinstance(i, TextDelta)))


def test_hermes_results() -> None:
    text, read, search, broken, junk, write, rest = _parse(hermes_parser, [HERMES_TEXT])
    assert text == "I'll read it <tool (not a tag) first.\n"  # the whitespace between calls is no answer text
    assert read == ToolCall("call_1", "read_file", {"path": "calc.py", "start_line": 2})
    assert search == ToolCall("call_2", "search", {"pattern": "def <x>"})
    assert broken.name == "" and broken.error.startswith("the tool call is not valid JSON (Expecting property name")
    assert junk == "see <tool_call>example</tool_call>"  # no JSON call after <tool_call>: text, as vLLM has it
    # a JSON string holding </tool_call> does not end the call: the object does
    assert write == ToolCall("call_4", "write_file", {"path": "t.xml", "content": "a</tool_call>b"})
    assert rest == "trailing <tool_"  # a marker prefix at the very end is text after all


def test_qwen3_coder_results_are_typed_by_the_tool_schema() -> None:
    text, edit, read, write = _parse(lambda: qwen3_coder_parser(tool_schemas()), [CODER_TEXT])
    assert text == "Editing now.\n"
    assert edit == ToolCall(
        "call_1",
        "edit_file",
        {"path": "calc.py", "old_text": "    return a - b", "new_text": "    return a + b", "replace_all": False},
    )
    # without its <tool_call> (Qwen's parser allows it), and its stray </tool_call> is not answer text
    assert read == ToolCall("call_2", "read_file", {"path": "calc.py", "end_line": 3})
    content = "END = '</parameter>'  # <tool_call> and </function> are text here"
    assert write == ToolCall("call_3", "write_file", {"path": "parse.py", "content": content})


def _coder(text: str, tools=None) -> list:
    return _parse(lambda: qwen3_coder_parser(tools or tool_schemas()), [text])


def _write(content: str) -> str:
    return (
        "<tool_call>\n<function=write_file>\n<parameter=path>\nf.txt\n</parameter>\n"
        f"<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>"
    )


@pytest.mark.parametrize(
    "content",
    [
        "a</parameter>b",
        "x\n</parameter>\nnot a tag after it",
        "<parameter=path>\nother.txt",  # `path` is already given: a tag of it cannot start it again
        "<tool_call>\n<function=read_file>\n<parameter=path>",
        "text</function>more",
        "</function>\n</tool_call>\nthen more text\n",
        "<function=write_file>",
        "</tool_call>",
    ],
)
def test_tag_like_text_inside_a_value_is_the_value(content: str) -> None:
    [call] = _coder(_write(content))
    assert call == ToolCall("call_1", "write_file", {"path": "f.txt", "content": content})


@pytest.mark.parametrize(
    "content",
    [
        "x\n</parameter>\n<parameter=path>\n/etc/passwd",  # would overwrite the path
        "x\n</parameter>\n<parameter=mode>\n644",  # an undeclared parameter: the value is cut, or holds a tag
        "x\n</parameter>\n</function>\n</tool_call>\nrest of the file",  # would end the call inside the file
        "<tool_call>\n<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>\nmore",
    ],
)
def test_a_value_whose_end_stays_ambiguous_is_an_error_the_model_sees(content: str) -> None:
    items = _coder(_write(content))
    calls = [i for i in items if isinstance(i, ToolCall)]
    assert calls and all(c.error for c in calls), items
    assert all("Nothing was run" in c.error for c in calls)


def test_a_forgotten_closing_tag_ends_at_the_next_declared_parameter() -> None:
    text = "<tool_call>\n<function=edit_file>\n<parameter=path>\na.py\n<parameter=old_text>\nx\n</parameter>\n"
    text += "<parameter=new_text>\ny\n</parameter>\n</function>\n</tool_call>"
    [call] = _coder(text)
    assert call.arguments == {"path": "a.py", "old_text": "x", "new_text": "y"}


def test_python_literals_and_json_by_the_schema() -> None:
    """Both Qwen3-Coder template revisions render past arguments with Python's str(): True/None, and (the first
    revision) ['a', 'b'] lists -- the model writes them back that way."""
    text = (
        "<tool_call>\n<function=edit_file>\n<parameter=path>\nTrue\n</parameter>\n<parameter=old_text>\nNone\n"
        "</parameter>\n<parameter=new_text>\n['a']\n</parameter>\n<parameter=replace_all>\nTrue\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=run_tests>\n<parameter=paths>\n['tests/a.py', 'b']\n"
        "</parameter>\n<parameter=timeout_s>\n30\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
        "<function=update_plan>\n<parameter=entries>\n[{'content': 'x', 'status': 'pending', 'priority': 'high'}]\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    edit, tests, plan = _coder(text)
    assert edit.arguments == {"path": "True", "old_text": "None", "new_text": "['a']", "replace_all": True}
    assert tests.arguments == {"paths": ["tests/a.py", "b"], "timeout_s": 30}
    assert plan.arguments == {"entries": [{"content": "x", "status": "pending", "priority": "high"}]}


@pytest.mark.parametrize(
    ("schema", "text", "value"),
    [
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "42", 42),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "None", None),
        ({"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}, '["a", "b"]', ["a", "b"]),
        ({"type": ["integer", "null"]}, "null", None),
        ({"type": ["boolean", "null"]}, "False", False),
        ({"type": "number", "nullable": True}, "0.5", 0.5),
        ({"type": "object"}, "{'k': [1, None, True]}", {"k": [1, None, True]}),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "007", "007"),  # a string keeps what was written
        ({"type": "integer"}, "seven", "seven"),  # not an integer: validation says so
    ],
)
def test_union_nullable_and_type_array_schemas(schema, text, value) -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {"properties": {"v": schema}}}}
    [call] = _coder(f"<tool_call>\n<function=t>\n<parameter=v>\n{text}\n</parameter>\n</function>", [tool])
    assert call.arguments == {"v": value} and type(call.arguments["v"]) is type(value)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (hermes_parser, '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'),
        (lambda: qwen3_coder_parser(tool_schemas()), "<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n"),
        (lambda: qwen3_coder_parser(tool_schemas()), "<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"),
    ],
    ids=["hermes", "qwen3-coder", "qwen3-coder-bare"],
)
def test_a_call_complete_apart_from_its_closing_tags_is_read(make, text: str) -> None:
    """The generation ended (EOS, or a client's stop "</tool_call>") before the closing tags."""
    assert _parse(make, [text]) == [ToolCall("call_1", "read_file", {"path": "a.py"})]


def test_a_tool_call_cut_off_inside_its_json_is_an_error() -> None:
    (text, call) = _parse(hermes_parser, ['ok <tool_call>{"name": "read_file", "argu'])
    assert text == "ok "
    assert call.error.startswith("the tool call was cut off")


def test_the_template_decides_the_format() -> None:
    coder = parser_for_template("...<function=example_function_name>...", tool_schemas())
    assert _parse(lambda: coder, ["<function=list_files></function>"]) == [ToolCall("call_1", "list_files", {})]
    hermes = parser_for_template("...<tool_call>\\n{{ tool_call | tojson }}...", tool_schemas())
    assert _parse(lambda: hermes, ["<function=list_files></function>"]) == ["<function=list_files></function>"]


TAG_SOUP = ["<tool_call>", "</tool_call>", "<function=write_file>", "<function=read_file>", "</function>", "\n", " ",
            "<parameter=path>", "<parameter=content>", "</parameter>", "x", "{", "}", '"', "<tool", "_call>", "True",
            '{"name": "read_file", "arguments": {"path": "a"}}', "<param", "eter=", "\\"]  # fmt: skip


@pytest.mark.parametrize("make", [hermes_parser, lambda: qwen3_coder_parser(tool_schemas())], ids=["hermes", "coder"])
def test_tag_soup_loses_no_text_and_reads_the_same_in_any_pieces(make) -> None:
    """Random mixes of the formats' tags: nothing raises, every character comes back as text or as the source of a
    call (whitespace between calls aside), and one character at a time reads as the whole text does."""
    import random

    generator = random.Random(43)
    for _ in range(300):
        text = "".join(generator.choice(TAG_SOUP) for _ in range(generator.randint(0, 14)))
        readings = []
        for pieces in ([text], list(text)):
            parser = make()
            items = _normalized([item for piece in pieces for item in parser.feed(piece)] + parser.finish())
            sources = [parser.source(i.id) if isinstance(i, ToolCall) else i for i in items]
            assert "".join("".join(sources).split()) == "".join(text.split()), text
            readings.append(items)
        assert readings[0] == readings[1], text
