"""Renders Hugging Face chat templates (Jinja) in a sandbox, with the helpers those templates expect."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2 import Template, nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template raised an error (raise_exception) or could not be compiled."""


def render_chat_template(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    mark_literal: Callable[[str], str] | None = None,
    documents: list[dict[str, Any]] | None = None,
    **variables: Any,
) -> str:
    """The prompt text for `messages` (and JSON-schema `tools`), as transformers' apply_chat_template renders it.

    `mark_literal` rewrites the template's own literal text (between its tags, and its string constants) before it
    renders: ControlTokens.mark, so that only the template's markup can become control tokens.
    `documents` is always defined (None without any), as transformers defines it; `variables` reach the template
    too: the tokenizer's special tokens (bos_token, eos_token, ...), enable_thinking, ...
    """
    try:
        return _compile(template, mark_literal).render(
            messages=messages,
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            **variables,
        )
    except TemplateError as error:
        raise ChatTemplateError(f"chat template error: {error}") from error


@lru_cache(maxsize=8)
def _compile(template: str, mark_literal: Callable[[str], str] | None = None) -> Template:
    # Same environment options as transformers, so whitespace renders identically.
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationBlock]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        tree = env.parse(template)
        if mark_literal is not None:
            for data in tree.find_all(nodes.TemplateData):
                data.data = mark_literal(data.data)
            for const in tree.find_all(nodes.Const):
                if isinstance(const.value, str):
                    const.value = mark_literal(const.value)
        return env.from_string(tree)
    except TemplateError as error:
        raise ChatTemplateError(f"chat template does not compile: {error}") from error


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters (<, >, &, '), which would change what the model was trained on.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


class _GenerationBlock(Extension):
    """`{% generation %}...{% endgeneration %}`: transformers uses it to mark assistant text for training masks;
    templates that contain it (several recent chat models) only need the body rendered."""

    tags = frozenset({"generation"})

    def parse(self, parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)
