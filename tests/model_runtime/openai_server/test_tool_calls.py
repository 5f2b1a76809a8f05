"""Generated text -> OpenAI content and tool_calls, fed in fixed pieces (random weights never write a tool call):
markers split across pieces, several calls, both template formats, blocks that do not parse kept as text, and the
published parser cases of vLLM and SGLang, whole and split at every position."""

from __future__ import annotations

import json

import pytest

from tests.model_runtime.chat.published_toolcall_cases import CASE_TOOLS, CASES, FORMAT_TEMPLATE, check, splits
from tests.model_runtime.checkpoints import CHAT_TEMPLATE
from warpcode.model_runtime.openai_server.chat import ChatDelta, ToolCallStream

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}}},
    },
}
CODER_TEMPLATE = "{{ messages }} <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>"


def run(stream: ToolCallStream, pieces: list[str]) -> tuple[list[ChatDelta], ChatDelta]:
    return [stream.feed(piece) for piece in pieces], stream.finish()


def test_hermes_calls_split_across_pieces_come_out_whole_and_in_order():
    stream = ToolCallStream(CHAT_TEMPLATE, [READ_FILE])
    call = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    text = "Let me look." + call + "\n" + call.replace("a.py", "b.py")
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    deltas, rest = run(stream, pieces)
    assert "".join(d.content for d in [*deltas, rest]) == "Let me look."  # whitespace between calls: not text
    released = [c for d in deltas for c in d.tool_calls]
    assert [c["index"] for c in released] == [0, 1]
    assert [json.loads(c["function"]["arguments"]) for c in released] == [{"path": "a.py"}, {"path": "b.py"}]
    assert all(c["type"] == "function" and c["function"]["name"] == "read_file" for c in released)
    assert len({c["id"] for c in released}) == 2 and all(c["id"].startswith("call_") for c in released)
    assert stream.calls == [{k: v for k, v in c.items() if k != "index"} for c in released]
    # a call's delta comes with the piece that closes it, not before
    closing = next(i for i in range(len(pieces)) if "</tool_call>" in "".join(pieces[: i + 1]))
    assert deltas[closing].tool_calls and not any(d.tool_calls for d in deltas[:closing])


def test_qwen3_coder_calls_get_typed_arguments_when_the_generation_ends():
    """Nothing escapes a Qwen3-Coder value, so where a call ends is sure only once the generation has ended."""
    stream = ToolCallStream(CODER_TEMPLATE, [READ_FILE])
    deltas, rest = run(
        stream, ["ok <tool_call>\n<function=read_file>\n<parameter=path>\nsrc/", "x.py\n</parameter>\n",
                 "<parameter=start_line>\n12\n</parameter>\n</function>\n</tool_call>"]
    )  # fmt: skip
    assert "".join(d.content for d in [*deltas, rest]) == "ok "
    assert not any(d.tool_calls for d in deltas) and len(rest.tool_calls) == 1
    [call] = stream.calls
    assert json.loads(call["function"]["arguments"]) == {"path": "src/x.py", "start_line": 12}


def test_an_ambiguous_qwen3_coder_call_is_returned_as_the_text_the_model_wrote():
    write = {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}}}  # fmt: skip
    text = (
        "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=content>\n"
        "x\n</parameter>\n<parameter=path>\n/etc/passwd\n</parameter>\n</function>\n</tool_call>"
    )
    stream = ToolCallStream(CODER_TEMPLATE, [write])
    deltas, rest = run(stream, [text])
    assert not stream.calls and "".join(d.content for d in [*deltas, rest]) == text


WITH_TOOLS = [case for case in CASES if CASE_TOOLS[case["tools"]]]
WITHOUT_TOOLS = [case for case in CASES if not CASE_TOOLS[case["tools"]]]


@pytest.mark.parametrize("case", WITH_TOOLS, ids=[case["id"] for case in WITH_TOOLS])
def test_published_cases_whole_and_split_at_every_position(case):
    for pieces in splits(case["output"]):
        stream = ToolCallStream(FORMAT_TEMPLATE[case["format"]], CASE_TOOLS[case["tools"]])
        deltas, rest = run(stream, pieces)
        calls = [
            {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
            for d in [*deltas, rest]
            for c in d.tool_calls
        ]
        check(case, calls, "".join(d.content for d in [*deltas, rest]))


@pytest.mark.parametrize("case", WITHOUT_TOOLS, ids=[case["id"] for case in WITHOUT_TOOLS])
def test_calls_to_functions_the_request_did_not_define_are_the_text_the_model_wrote(case):
    # the parsers' own cases, given no tools (tests/model_runtime/chat/test_toolcall_parsers.py reads their calls):
    # a request defining only another function gets each of them back as text, as vLLM does, never as a call
    other = {"type": "function", "function": {"name": "unrelated", "parameters": {"type": "object"}}}
    for pieces in splits(case["output"]):
        stream = ToolCallStream(FORMAT_TEMPLATE[case["format"]], [other])
        deltas, rest = run(stream, pieces)
        assert not stream.calls and not any(d.tool_calls for d in [*deltas, rest])
        assert "".join(d.content for d in [*deltas, rest]) == case["output"]


def test_blocks_that_do_not_parse_stay_text_and_a_tool_without_properties_is_fine():
    bare = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}
    stream = ToolCallStream(CHAT_TEMPLATE, [bare])
    broken = "<tool_call>{not json}</tool_call>"
    deltas, rest = run(stream, ["a", broken, "b <tool_call>", '{"name": "now"'])
    assert not stream.calls
    assert "".join(d.content for d in [*deltas, rest]) == "a" + broken + 'b <tool_call>{"name": "now"'


def test_text_that_only_looks_like_a_marker_start_is_released():
    stream = ToolCallStream(CHAT_TEMPLATE, [READ_FILE])
    deltas, rest = run(stream, ["x <tool", "_cal", " y"])
    assert [d.content for d in deltas] == ["x ", "", "<tool_cal y"] and rest.content == ""


def test_a_real_serve_model_renders_past_calls_with_the_real_qwen3_coder_template(
    coder_chat_engine, fast_tokenizer, monkeypatch
):
    """A past call's typed arguments (a boolean, a list, text holding the format's own tags) reach the model exactly
    as transformers renders them with the published template, and the route answers through the Qwen3-Coder parser
    that template selects."""
    import httpx

    from tests.model_runtime.openai_server.servers import serving
    from tests.model_runtime.prompt_reference import reference_prompt_ids

    submitted: list[list[int]] = []
    submit = coder_chat_engine.submit
    record = lambda ids, *a, **k: submitted.append(list(ids)) or submit(ids, *a, **k)
    monkeypatch.setattr(coder_chat_engine, "submit", record)
    edit = {"type": "function", "function": {"name": "edit_file", "description": "Edit a file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "new_text": {"type": "string"},
        "replace_all": {"type": "boolean"}, "paths": {"type": "array", "items": {"type": "string"}}}}}}  # fmt: skip
    arguments = {"path": "a.py", "new_text": "x</parameter>\n<b>", "replace_all": True, "paths": ["a.py", "b"]}
    call = {"id": "call_1", "type": "function", "function": {"name": "edit_file", "arguments": json.dumps(arguments)}}
    messages = [
        {"role": "user", "content": "Fix a.py"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    body = {"model": "coder", "messages": messages, "tools": [edit], "max_tokens": 4, "temperature": 0}
    with serving(coder_chat_engine, "coder") as url:
        reply = httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()
    as_read = [messages[0], {**messages[1], "tool_calls": [{**call, "function": {**call["function"],
               "arguments": arguments}}]}, messages[2]]  # fmt: skip
    template = FORMAT_TEMPLATE["qwen3_coder"]
    assert submitted == [reference_prompt_ids(fast_tokenizer, template, as_read, [edit])], reply
    assert "\n<parameter=replace_all>\nTrue\n</parameter>\n" in fast_tokenizer.decode(submitted[0])
    assert reply["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
