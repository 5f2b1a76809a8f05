"""Count the published tool-call parser cases (tests/fixtures/toolcall_cases.json: vLLM's and SGLang's test
inputs and expectations) that pass on each of our consumers: the agent's stream parser (`local:` backend) and
serve-model's chat stream (ToolCallStream). A case passes when it passes fed whole and fed one character at a time.

    python -m warpcode.bench.toolcall_cases [-v]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template
from warpcode.model_runtime.openai_server.chat import ToolCallStream

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
TEMPLATES = {"qwen3_coder": "qwen3_coder_2025_08.jinja", "hermes": "qwen3.jinja"}


def same(a: Any, b: Any) -> bool:
    """Equal as the published tests compare (==), except that True is not 1: a boolean must come back a boolean."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def agent_result(case: dict, tools: list, pieces: list[str]) -> tuple[list[dict], str]:
    parser = parser_for_template(case["template"], tools)
    items = [item for piece in pieces for item in parser.feed(piece)] + parser.finish()
    calls = [{"name": i.name, "arguments": i.arguments} for i in items if isinstance(i, ToolCall) and not i.error]
    return calls, "".join(i.text for i in items if isinstance(i, TextDelta))


def served_result(case: dict, tools: list, pieces: list[str]) -> tuple[list[dict], str]:
    stream = ToolCallStream(case["template"], tools)
    deltas = [stream.feed(piece) for piece in pieces] + [stream.finish()]
    calls = [
        {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
        for d in deltas
        for c in d.tool_calls
    ]
    return calls, "".join(d.content for d in deltas)


def passes(case: dict, calls: list[dict], content: str) -> bool:
    expected = case.get("calls", calls)
    if len(calls) != len(expected) or not all(
        c["name"] == e["name"] and same(c["arguments"], e["arguments"]) for c, e in zip(calls, expected, strict=True)
    ):
        return False
    if "calls_count" in case and len(calls) != case["calls_count"]:
        return False
    if "content" in case and content != case["content"]:
        return False
    if "content_contains" in case and case["content_contains"] not in content:
        return False
    return "content_prefix" not in case or content.startswith(case["content_prefix"])


def run_case(case: dict, tools: list, consumer) -> bool:
    try:
        return all(passes(case, *consumer(case, tools, pieces)) for pieces in ([case["output"]], list(case["output"])))
    except Exception:  # a parser that raises on model output fails the case
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="name every case that fails")
    args = parser.parse_args()
    fixture = json.loads((FIXTURES / "toolcall_cases.json").read_text())
    templates = {fmt: (FIXTURES / "chat_templates" / name).read_text() for fmt, name in TEMPLATES.items()}
    for name, consumer in (("agent (local:)", agent_result), ("serve-model chat", served_result)):
        failed = []
        for case in fixture["cases"]:
            case = {**case, "template": templates[case["format"]]}
            if not run_case(case, fixture["tools"][case["tools"]], consumer):
                failed.append(case["id"])
        total = len(fixture["cases"])
        print(f"{name}: {total - len(failed)} of {total} published cases pass")
        for case_id in failed if args.verbose else []:
            print(f"  FAIL {case_id}")


if __name__ == "__main__":
    main()
