from __future__ import annotations

import pytest

from warpcode.agent.backends import TextDelta
from warpcode.agent.backends.toolcall_parsers import (
    ToolCallStreamParser,
    hermes_parser,
    parser_for_template,
    qwen3_coder_parser,
)
from warpcode.agent.messages import ToolCall
from warpcode.agent.toolbox import tool_schemas

HERMES_TEXT = (
    "I'll read it <tool (not a tag) first.\n<tool_call>\n"
    '{"name": "read_file", "arguments": {"path": "calc.py", "start_line": 2}}\n</tool_call>\n'
    '<tool_call>{"name": "search", "arguments": "{\\"pattern\\": \\"def <x>\\"}"}</tool_call>'
    "<tool_call>{not json}</tool_call> trailing <tool_"
)
CODER_TEXT = (
    "Editing now.\n<tool_call>\n<function=edit_file>\n<parameter=path>\ncalc.py\n</parameter>\n"
    "<parameter=old_text>\n    return a - b\n</parameter>\n<parameter=new_text>\n    return a + b\n</parameter>\n"
    "<parameter=replace_all>\nfalse\n</parameter>\n</function>\n</tool_call>\nThen "
    "<function=read_file><parameter=path>calc.py</parameter><parameter=end_line>3</parameter></function>"
    "<tool_call><parameter=path>x</parameter></tool_call> end"
)


def _normalized(items: list) -> list:
    """Adjacent text pieces merged: how the stream was split must not matter."""
    out: list = []
    for item in items:
        if isinstance(item, TextDelta) and out and isinstance(out[-1], str):
            out[-1] += item.text
        else:
            out.append(item.text if isinstance(item, TextDelta) else item)
    return out


def _parse(make, pieces: list[str]) -> list:
    parser: ToolCallStreamParser = make()
    items = [item for piece in pieces for item in parser.feed(piece)]
    return _normalized(items + parser.finish())


@pytest.mark.parametrize(
    ("make", "text"),
    [(hermes_parser, HERMES_TEXT), (lambda: qwen3_coder_parser(tool_schemas()), CODER_TEXT)],
    ids=["hermes", "qwen3-coder"],
)
def test_every_split_of_the_stream_parses_the_same(make, text: str) -> None:
    whole = _parse(make, [text])
    for cut in range(len(text) + 1):
        assert _parse(make, [text[:cut], text[cut:]]) == whole, cut
    assert _parse(make, list(text)) == whole
    for a in range(0, len(text), 7):  # three pieces, many pairs of cuts
        for b in range(a, len(text), 11):
            assert _parse(make, [text[:a], text[a:b], text[b:]]) == whole


def test_hermes_results() -> None:
    text, read, newline, search, broken, rest = _parse(hermes_parser, [HERMES_TEXT])
    assert (text, newline) == ("I'll read it <tool (not a tag) first.\n", "\n")
    assert read == ToolCall("call_1", "read_file", {"path": "calc.py", "start_line": 2})
    assert search == ToolCall("call_2", "search", {"pattern": "def <x>"})
    assert broken.name == "" and broken.error.startswith("the tool call is not valid JSON (Expecting property name")
    assert rest == " trailing <tool_"  # a marker prefix at the very end is text after all


def test_qwen3_coder_results_are_typed_by_the_tool_schema() -> None:
    text, edit, then, read, broken, end = _parse(lambda: qwen3_coder_parser(tool_schemas()), [CODER_TEXT])
    assert (text, then, end) == ("Editing now.\n", "\nThen ", " end")
    assert edit == ToolCall(
        "call_1",
        "edit_file",
        {"path": "calc.py", "old_text": "    return a - b", "new_text": "    return a + b", "replace_all": False},
    )
    assert read == ToolCall("call_2", "read_file", {"path": "calc.py", "end_line": 3})
    assert broken.error.startswith("expected <function=NAME>...</function> in the tool call")


def test_a_tool_call_cut_off_by_the_end_of_generation_is_an_error() -> None:
    (text, call) = _parse(hermes_parser, ['ok <tool_call>{"name": "read_file", "argu'])
    assert text == "ok "
    assert call.error.startswith("the tool call was cut off before its closing </tool_call>")


def test_the_template_decides_the_format() -> None:
    coder = parser_for_template("...<function=example_function_name>...", tool_schemas())
    assert _parse(lambda: coder, ["<function=list_files></function>"]) == [ToolCall("call_1", "list_files", {})]
    hermes = parser_for_template("...<tool_call>\\n{{ tool_call | tojson }}...", tool_schemas())
    assert _parse(lambda: hermes, ["<function=list_files></function>"]) == ["<function=list_files></function>"]
