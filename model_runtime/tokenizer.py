"""Tokenizer from a checkpoint directory: `tokenizer.json` (tokenizers), chat template, special and EOS tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as FastTokenizer

from warpcode.model_runtime.chat.template import ChatTemplateError, render_chat_template
from warpcode.model_runtime.control_tokens import ControlTokens

# The named special tokens transformers hands a chat template (those the tokenizer has; the others stay undefined,
# so `bos_token is defined` and `bos_token | default(...)` read as they do there).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class Tokenizer:
    def __init__(
        self,
        tokenizer: FastTokenizer,
        chat_template: str | dict[str, str] | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
        special_tokens: dict[str, str | None] | None = None,  # more of SPECIAL_TOKEN_NAMES: pad_token, ...
    ):
        self.tokenizer = tokenizer
        self.chat_template = chat_template  # a template, or several by name ("default", "tool_use")
        self.bos_token, self.eos_token = bos_token, eos_token
        named = {**(special_tokens or {}), "bos_token": bos_token, "eos_token": eos_token}
        self.special_tokens = {name: token for name, token in named.items() if token is not None}
        self.control_tokens = ControlTokens(tokenizer)

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> Tokenizer | None:
        """None when the directory has no tokenizer.json (id-level use needs none)."""
        model_dir = Path(model_dir)
        if not (model_dir / "tokenizer.json").is_file():
            return None
        tokenizer_config = _read_json(model_dir / "tokenizer_config.json")
        template: str | dict[str, str] | None = tokenizer_config.get("chat_template")
        if isinstance(template, list):  # [{"name": ..., "template": ...}, ...]
            template = {entry["name"]: entry["template"] for entry in template}
        if (model_dir / "chat_template.jinja").is_file():  # transformers >= 4.43 saves the template here instead
            template = (model_dir / "chat_template.jinja").read_text()
        # transformers reads the named tokens from tokenizer_config.json, and from the older special_tokens_map.json
        named = {**_read_json(model_dir / "special_tokens_map.json"), **tokenizer_config}
        special = {name: _token_text(named.get(name)) for name in SPECIAL_TOKEN_NAMES}
        return cls(
            FastTokenizer.from_file(str(model_dir / "tokenizer.json")),
            chat_template=template,
            bos_token=special["bos_token"],
            eos_token=special["eos_token"],
            special_tokens=special,
        )

    def encode(self, text: str, add_special_tokens: bool = True, split_special_tokens: bool = False) -> list[int]:
        """`split_special_tokens`: special tokens' text is plain text (as transformers' option of that name); off,
        it is the special tokens, as a raw completion prompt wants."""
        if split_special_tokens:
            return self.control_tokens.encode_text(text, add_special_tokens)
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **variables: Any,
    ) -> str:
        """The prompt text, to read. What the model is given is chat_prompt_ids: encoding this text would turn the
        text of special tokens in a message into control tokens."""
        variables = {**self.special_tokens, **variables}
        return render_chat_template(self._template(tools), messages, tools, add_generation_prompt, **variables)

    def chat_prompt_ids(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **variables: Any,
    ) -> list[int]:
        """The prompt's token ids, in which only the template's own markup is control tokens: the messages, tools
        and `variables` are text (control_tokens.py says how)."""
        control = self.control_tokens
        control.check_absent([messages, tools, variables])
        variables = {**{name: control.mark(token) for name, token in self.special_tokens.items()}, **variables}
        try:
            rendered = render_chat_template(
                self._template(tools), messages, tools, add_generation_prompt, mark_literal=control.mark, **variables
            )
        except ChatTemplateError as error:  # raise_exception('...') may quote the template's markup
            raise ChatTemplateError(control.unmark(str(error))) from None
        return control.encode(rendered)

    def _template(self, tools: list[dict[str, Any]] | None) -> str:
        template = self.chat_template
        if isinstance(template, dict):  # HF picks the tool-use variant when tools are passed and one exists
            template = template.get("tool_use") if tools and "tool_use" in template else template.get("default")
        if not template:
            raise ValueError("this tokenizer has no chat template (tokenizer_config.json / chat_template.jinja)")
        return template


def eos_token_ids(model_dir: str | Path, config_eos: list[int], tokenizer: Tokenizer | None) -> list[int]:
    """Every id that ends generation: config.json, generation_config.json and the tokenizer's eos_token."""
    ids = list(config_eos)
    generation_eos = _read_json(Path(model_dir) / "generation_config.json").get("eos_token_id")
    ids += [generation_eos] if isinstance(generation_eos, int) else list(generation_eos or [])
    if (
        tokenizer is not None
        and tokenizer.eos_token
        and (eos := tokenizer.token_to_id(tokenizer.eos_token)) is not None
    ):
        ids.append(eos)
    return list(dict.fromkeys(ids))


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _token_text(token: str | dict | None) -> str | None:
    # tokenizer_config.json stores special tokens as strings or as serialised AddedToken {"content": ...}
    return token.get("content") if isinstance(token, dict) else token
