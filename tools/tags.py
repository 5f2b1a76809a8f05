"""Definition and reference tags of one source file, from a tree-sitter query."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from tree_sitter import Node, QueryCursor

from warpcode.tools.languages import parser_and_query

CLASS_LIKE = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "union", "namespace", "module"})
MAX_SIGNATURE_CHARS = 200
IMPORT = "import"
MAX_SIGNATURE_ROWS = 3
ANNOTATIONS = frozenset({"annotation", "marker_annotation", "decorator", "comment", "line_comment", "block_comment"})
DECLARED_NAMES = frozenset({"identifier", "field_identifier", "type_identifier", "qualified_identifier"})
PLAIN_KINDS = frozenset({"variable", "property", "object", "field"})
CALLABLE = frozenset({"function", "method"})
# A declarator `name(...)` declares a function, unless its name is a type (`typedef int handler(int);`).
FUNCTION_NAMES = frozenset(
    {"identifier", "field_identifier", "qualified_identifier", "operator_name", "destructor_name"}
)
FILE_SCOPES = frozenset(
    {"translation_unit", "declaration_list", "namespace_definition", "linkage_specification", "template_declaration",
     "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
)  # fmt: skip
# C and C++ libraries wrap declarations in macros that tree-sitter cannot expand: a line holding only
# FMT_BEGIN_NAMESPACE or __BEGIN_DECLS reads as the return type of one function spanning the whole file, and
# FMT_API in `class FMT_API file {` or FMT_CONSTEXPR before a constructor hide the definition. For the parse,
# such macros (capitals with an underscore, in those places) are blanked: lines and offsets stay the file's.
_MACRO_SHAPES = (
    rb"^[ \t]*(?P<m1>[A-Z0-9_]*(?:BEGIN|END)[A-Z0-9_]*)[ \t]*(?=\r?$|//)",
    rb"\b(?:class|struct|union)[ \t]+(?P<m2>[A-Z][A-Z0-9]*_[A-Z0-9_]*)(?=[ \t]+[A-Za-z_]\w*[ \t]*[:{<\n])",
    rb"^[ \t]*(?P<m3>(?:[A-Z][A-Z0-9]*_[A-Z0-9_]*[ \t]+)+)"
    rb"(?=(?:template|class|struct|constexpr|inline|static|explicit|virtual|friend|auto|void|bool|int|char|unsigned"
    rb"|long|const|extern|typename)\b|~?[A-Za-z_]\w*[ \t]*\()",
    rb"\bif[ \t]+(?P<m4>[A-Z][A-Z0-9]*_[A-Z0-9_]*)(?=[ \t]*\()",  # `if FMT_CONSTEXPR20 (...)`
)
_WRAPPER_MACRO = re.compile(b"|".join(_MACRO_SHAPES), re.MULTILINE)
# tree-sitter's error recovery can read `if (x) {` as a K&R function named `if` (an #ifdef that splits an
# if/else): in these languages a keyword is never a name.
KEYWORD_NAMED = frozenset({"c", "cpp", "java"})
KEYWORDS = frozenset(
    {"if", "else", "switch", "case", "default", "while", "for", "do", "return", "goto", "break", "continue", "sizeof",
     "alignof", "typeof", "decltype", "new", "delete", "throw", "try", "catch", "static_assert"}
)  # fmt: skip


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
        """Names this file defines for a reference elsewhere to lead to (an import defines nothing new)."""
        if self._raw is not None:
            return [entry[1] for entry in self._raw if entry[0] != IMPORT]  # type: ignore[misc]
        return [definition.name for definition in self._definitions if definition.kind != IMPORT]

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
    """Definitions and references of `source`. A pattern captures either a definition node with its `@name`, or
    a declaration (`@declaration.<kind>`) whose declarators each define a name (`int a, *b;`, `char (*f)(void)`)."""
    parser, query = parser_and_query(language)
    tree = parser.parse(_WRAPPER_MACRO.sub(_blank, source) if language in ("c", "cpp") else source)
    lines = source.split(b"\n")
    tags = FileTags()
    # A name matched by two patterns is reported once, as the more telling kind (`const f = () => 1` is a
    # function before it is a variable).
    seen: dict[tuple[int, int], int] = {}
    refs: list[tuple[int, int]] = []
    for _, captures in QueryCursor(query).matches(tree.root_node):
        if "reference" in captures:
            refs.extend((node.start_byte, node.end_byte) for node in captures["reference"])
            continue
        key, nodes = next((key, nodes) for key, nodes in captures.items() if "." in key)
        role, kind = key.split(".", 1)
        node = nodes[0]
        if role == "definition":
            names = captures["name"][:1]
        else:
            names = _declared_names(node) if kind != "variable" or _at_file_scope(node) else []
        for name_node in names:
            span = (name_node.start_byte, name_node.end_byte)
            name = _name(source, name_node)
            if language in KEYWORD_NAMED and name in KEYWORDS and kind != "macro":
                continue
            definition = _definition(_refine(kind, node), name, node, name_node, lines)
            if span not in seen:
                seen[span] = len(tags.definitions)
                tags.definitions.append(definition)
            elif tags.definitions[seen[span]].kind in PLAIN_KINDS and kind not in PLAIN_KINDS:
                tags.definitions[seen[span]] = definition
    tags.references.update(
        source[start:end].decode("utf-8", "replace") for start, end in refs if (start, end) not in seen
    )
    tags.definitions.sort(key=lambda d: (d.start_line, -d.end_line))
    # `app.use = function use(fn)` defines `use` twice on one line (the property and the function): once is enough.
    # (`typedef struct s {...} s;` keeps both, a struct and a type.)
    firsts = {(d.name, d.start_line, d.kind in CALLABLE): d for d in reversed(tags.definitions)}
    tags.definitions[:] = [d for d in tags.definitions if firsts[d.name, d.start_line, d.kind in CALLABLE] is d]
    _mark_methods(tags.definitions)
    return tags


def _name(source: bytes, node: Node) -> str:
    if node.type == "operator_cast":  # `operator bool() const`: named by its type, as ctags names it
        node = node.child_by_field_name("type") or node
        return "operator " + source[node.start_byte : node.end_byte].decode("utf-8", "replace")
    name = source[node.start_byte : node.end_byte].decode("utf-8", "replace")
    if node.type == "operator_name":  # `operator=` -> `operator =`, as ctags writes it
        return "operator " + name.removeprefix("operator").strip()
    # C++ out-of-line methods are named by their qualified name (ns::A::m); the map wants the last part.
    return name.rsplit("::", 1)[-1]


def _blank(match: re.Match[bytes]) -> bytes:
    """The match with its macro replaced by spaces."""
    name = next(group for group in ("m1", "m2", "m3", "m4") if match.group(group) is not None)
    start, end = match.start(name) - match.start(), match.end(name) - match.start()
    text = match.group()
    return text[:start] + b" " * (end - start) + text[end:]


def _definition(kind: str, name: str, node: Node, name_node: Node, lines: list[bytes]) -> Definition:
    """The signature runs from the definition's first line that is not an annotation or a comment (`@Override`
    says nothing of a method) to the line of its name, when that is close (a return type or a template line of
    its own); a name further down (`typedef struct {...} name;`) leaves the first line alone."""
    first = _signature_row(node)
    name_row = name_node.start_point[0]
    last = name_row if first <= name_row <= first + MAX_SIGNATURE_ROWS - 1 else first
    text = [lines[row].decode("utf-8", "replace").rstrip() for row in range(first, last + 1)]
    signature = " ".join([text[0], *(line.strip() for line in text[1:])])[:MAX_SIGNATURE_CHARS]
    end_row, end_column = node.end_point
    end_line = max(first + 1, end_row + (1 if end_column else 0))  # a node ending at column 0 ends a line earlier
    return Definition(kind, name, first + 1, end_line, signature)


def _signature_row(node: Node) -> int:
    for child in node.children:
        if child.type in ANNOTATIONS:
            continue
        if child.type == "modifiers":
            kept = [grand for grand in child.children if grand.type not in ANNOTATIONS]
            if not kept:
                continue
            return kept[0].start_point[0]
        return child.start_point[0]
    return node.start_point[0]


def _at_file_scope(node: Node) -> bool:
    """Outside any function or class body: a global (in a namespace, an extern "C" block or an #if, maybe)."""
    parent = node.parent
    while parent is not None:
        if parent.type not in FILE_SCOPES:
            return False
        parent = parent.parent
    return True


def _declared_names(node: Node) -> list[Node]:
    """The names a C/C++ declaration declares: each declarator, unwrapped down to its identifier. A function's
    declaration (`int f(void);`, a prototype) is left out: it is defined elsewhere, or is a method pattern's."""
    names = []
    for declarator in node.children_by_field_name("declarator"):
        while declarator is not None and declarator.type not in DECLARED_NAMES:
            inner = declarator.child_by_field_name("declarator")
            if declarator.type == "function_declarator" and inner is not None and inner.type in FUNCTION_NAMES:
                inner = declarator = None
            elif inner is None:
                inner = next(iter(declarator.named_children), None)  # a parenthesized declarator names no field
            declarator = inner
        if declarator is not None:
            names.append(declarator)
    return names


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
