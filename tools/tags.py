"""Definition and reference tags of one source file, from a tree-sitter query."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tree_sitter import QueryCursor

from warpcode.tools.languages import parser_and_query

CLASS_LIKE = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "union", "namespace", "module"})
MAX_SIGNATURE_CHARS = 200


@dataclass(frozen=True)
class Definition:
    kind: str
    name: str
    start_line: int  # 1-based, inclusive
    end_line: int
    signature: str  # the definition's first source line, indentation kept


class FileTags:
    """Definitions and reference counts of one file. Loaded from the cache, definitions stay raw lists until
    asked for: ranking a large repository needs only their names."""

    def __init__(self, definitions: list[Definition] | None = None, references: dict[str, int] | None = None) -> None:
        self._definitions = definitions if definitions is not None else []
        self._raw: list[list[object]] | None = None
        self.references: dict[str, int] = references if references is not None else Counter()

    @property
    def definitions(self) -> list[Definition]:
        if self._raw is not None:
            self._definitions = [Definition(*entry) for entry in self._raw]  # type: ignore[arg-type]
            self._raw = None
        return self._definitions

    def names(self) -> list[str]:
        if self._raw is not None:
            return [entry[1] for entry in self._raw]  # type: ignore[misc]
        return [definition.name for definition in self._definitions]

    def to_json(self) -> list[object]:
        if self._raw is not None:
            return [self._raw, dict(self.references)]
        defs = [[d.kind, d.name, d.start_line, d.end_line, d.signature] for d in self._definitions]
        return [defs, dict(self.references)]

    @classmethod
    def from_json(cls, data: list[object]) -> FileTags:
        defs, refs = data
        tags = cls(references=refs)  # type: ignore[arg-type]
        tags._raw = defs  # type: ignore[assignment]
        return tags


def extract_tags(source: bytes, language: str) -> FileTags:
    parser, query = parser_and_query(language)
    tree = parser.parse(source)
    lines = source.split(b"\n")
    tags = FileTags()
    seen: set[int] = set()  # a node matched by two definition patterns is reported once
    name_spans: set[tuple[int, int]] = set()
    refs: list[tuple[int, int]] = []
    for _, captures in QueryCursor(query).matches(tree.root_node):
        if "reference" in captures:
            refs.extend((node.start_byte, node.end_byte) for node in captures["reference"])
            continue
        name_node = captures["name"][0]
        kind, node = next((key.split(".", 1)[1], nodes[0]) for key, nodes in captures.items() if key != "name")
        if node.id in seen:
            continue
        seen.add(node.id)
        name_spans.add((name_node.start_byte, name_node.end_byte))
        row = node.start_point[0]
        signature = lines[row].decode("utf-8", "replace").rstrip()[:MAX_SIGNATURE_CHARS]
        # C++ out-of-line methods are named by their qualified name (ns::A::m); the map wants the last part.
        name = source[name_node.start_byte : name_node.end_byte].decode("utf-8", "replace").rsplit("::", 1)[-1]
        end_row, end_column = node.end_point
        end_line = max(row + 1, end_row + (1 if end_column else 0))  # a node ending at column 0 ends a line earlier
        tags.definitions.append(Definition(_refine(kind, node), name, row + 1, end_line, signature))
    tags.references.update(
        source[start:end].decode("utf-8", "replace") for start, end in refs if (start, end) not in name_spans
    )
    tags.definitions.sort(key=lambda d: (d.start_line, -d.end_line))
    _mark_methods(tags.definitions)
    return tags


def _refine(kind: str, node: object) -> str:
    """Go declares every named type with type_spec; tell structs and interfaces apart by the type node."""
    if kind == "type":
        inner = node.child_by_field_name("type")  # type: ignore[attr-defined]
        if inner is not None and inner.type in ("struct_type", "interface_type"):
            return inner.type.removesuffix("_type")
    return kind


def _mark_methods(definitions: list[Definition]) -> None:
    """A function nested directly in a class-like definition is a method (Python's grammar has no method node)."""
    enclosing: list[Definition] = []
    for index, definition in enumerate(definitions):
        while enclosing and enclosing[-1].end_line < definition.start_line:
            enclosing.pop()
        if definition.kind == "function" and enclosing and enclosing[-1].kind in CLASS_LIKE:
            definitions[index] = Definition("method", *_fields(definition)[1:])
        enclosing.append(definitions[index])


def _fields(definition: Definition) -> tuple[str, str, int, int, str]:
    return (definition.kind, definition.name, definition.start_line, definition.end_line, definition.signature)
