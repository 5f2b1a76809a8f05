"""The published tool-call parser cases (tests/fixtures/toolcall_cases.json: vLLM's and SGLang's test inputs and
expectations) and the real chat templates, shared by the tests of both consumers of our parsers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TEMPLATES = {
    name: (FIXTURES / "chat_templates" / f"{name}.jinja").read_text()
    for name in ("qwen3", "qwen3_coder_2025_07", "qwen3_coder_2025_08")
}
FORMAT_TEMPLATE = {"hermes": TEMPLATES["qwen3"], "qwen3_coder": TEMPLATES["qwen3_coder_2025_08"]}
_FIXTURE = json.loads((FIXTURES / "toolcall_cases.json").read_text())
CASES = _FIXTURE["cases"]
CASE_TOOLS = _FIXTURE["tools"]


def same(a: Any, b: Any) -> bool:
    """Equal as the published tests compare (==), except that True is not 1: a boolean must come back a boolean."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def check(case: dict[str, Any], calls: list[dict[str, Any]], content: str) -> None:
    """Assert the published expectation: the calls (name, typed arguments) and the text outside them."""
    if "calls" in case:
        assert [c["name"] for c in calls] == [e["name"] for e in case["calls"]], case["id"]
        for got, expected in zip(calls, case["calls"], strict=True):
            assert same(got["arguments"], expected["arguments"]), (case["id"], got["arguments"])
    if "calls_count" in case:
        assert len(calls) == case["calls_count"], case["id"]
    if "content" in case:
        assert content == case["content"], case["id"]
    assert case.get("content_contains", "") in content, case["id"]
    assert content.startswith(case.get("content_prefix", "")), case["id"]


def splits(text: str) -> list[list[str]]:
    """The text whole, cut in two at every position, and one character at a time."""
    return [[text], *([text[:cut], text[cut:]] for cut in range(1, len(text))), list(text)]
