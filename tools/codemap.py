"""code_outline: the definitions of one source file (kind, name, signature line, start/end lines)."""

from __future__ import annotations

from dataclasses import dataclass

from warpcode.tools import errors
from warpcode.tools.languages import language_of
from warpcode.tools.tags import Definition, extract_tags
from warpcode.tools.workspace import Workspace


@dataclass
class Outline:
    path: str
    language: str
    symbols: list[Definition]

    def render(self) -> str:
        if not self.symbols:
            return f"{self.path} ({self.language}): no definitions found."
        out = [f"{self.path} ({self.language}):"]
        enclosing: list[Definition] = []
        for symbol in self.symbols:
            while enclosing and enclosing[-1].end_line < symbol.start_line:
                enclosing.pop()
            indent = "  " * (len(enclosing) + 1)
            out.append(f"{indent}{symbol.kind} {symbol.name}  [lines {symbol.start_line}-{symbol.end_line}]")
            out.append(f"{indent}  {symbol.signature.strip()}")
            enclosing.append(symbol)
        return "\n".join(out)


def code_outline(ws: Workspace, path: str) -> Outline:
    target = ws.resolve(path)
    rel = ws.rel(target)
    language = language_of(rel)
    if language is None:
        raise errors.UnsupportedLanguage(rel)
    text_file = ws.read_text(path)
    source = text_file.encode(text_file.text)
    language = language_of(rel, source) or language
    return Outline(rel, language, extract_tags(source, language).definitions)
