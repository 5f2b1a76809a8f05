"""Languages of the code map: file suffixes and the tree-sitter queries for definitions and references.

Definition patterns capture the whole node as `@definition.<kind>` and its name as `@name`; reference
patterns capture an identifier as `@reference`. Queries are written against the grammars bundled with
tree-sitter-language-pack.
"""

from __future__ import annotations

import os
from functools import cache

import tree_sitter_language_pack as pack
from tree_sitter import Language, Parser, Query

from warpcode.tools.errors import GrammarUnavailable

SUFFIXES = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
}  # fmt: skip

_PYTHON = """
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
(module (assignment left: (identifier) @name) @definition.variable)
(call function: (identifier) @reference)
(call function: (attribute attribute: (identifier) @reference))
(class_definition superclasses: (argument_list (identifier) @reference))
(import_from_statement name: (dotted_name (identifier) @reference))
(decorator (identifier) @reference)
(type (identifier) @reference)
"""

_JS_COMMON = """
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(method_definition name: (property_identifier) @name) @definition.method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)]))
  @definition.function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)]))
  @definition.function
(call_expression function: (identifier) @reference)
(call_expression function: (member_expression property: (property_identifier) @reference))
(new_expression constructor: (identifier) @reference)
"""

_JAVASCRIPT = (
    _JS_COMMON
    + """
(class_declaration name: (identifier) @name) @definition.class
"""
)

_TYPESCRIPT = (
    _JS_COMMON
    + """
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(method_signature name: (property_identifier) @name) @definition.method
(type_identifier) @reference
"""
)

_GO = """
(function_declaration name: (identifier) @name) @definition.function
(method_declaration name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name) @definition.type
(const_spec name: (identifier) @name) @definition.constant
(call_expression function: (identifier) @reference)
(call_expression function: (selector_expression field: (field_identifier) @reference))
(type_identifier) @reference
"""

_RUST = """
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(struct_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(trait_item name: (type_identifier) @name) @definition.trait
(impl_item type: (type_identifier) @name) @definition.impl
(type_item name: (type_identifier) @name) @definition.type
(mod_item name: (identifier) @name) @definition.module
(macro_definition name: (identifier) @name) @definition.macro
(const_item name: (identifier) @name) @definition.constant
(call_expression function: (identifier) @reference)
(call_expression function: (field_expression field: (field_identifier) @reference))
(call_expression function: (scoped_identifier name: (identifier) @reference))
(macro_invocation macro: (identifier) @reference)
(type_identifier) @reference
"""

_JAVA = """
(class_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.constructor
(method_invocation name: (identifier) @reference)
(type_identifier) @reference
"""

_C_COMMON = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
  @definition.function
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.union
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum
(type_definition declarator: (type_identifier) @name) @definition.type
(preproc_function_def name: (identifier) @name) @definition.macro
(preproc_def name: (identifier) @name) @definition.macro
(call_expression function: (identifier) @reference)
(call_expression function: (field_expression field: (field_identifier) @reference))
(type_identifier) @reference
"""

_CPP = (
    _C_COMMON
    + """
(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method
(function_definition declarator: (function_declarator declarator: (qualified_identifier) @name)) @definition.method
(field_declaration declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method
(class_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.class
(namespace_definition name: (namespace_identifier) @name) @definition.namespace
(alias_declaration name: (type_identifier) @name) @definition.type
(call_expression function: (qualified_identifier name: (identifier) @reference))
"""
)

QUERIES = {
    "python": _PYTHON,
    "javascript": _JAVASCRIPT,
    "typescript": _TYPESCRIPT,
    "tsx": _TYPESCRIPT,
    "go": _GO,
    "rust": _RUST,
    "java": _JAVA,
    "c": _C_COMMON,
    "cpp": _CPP,
}


def language_of(path: str) -> str | None:
    return SUFFIXES.get(os.path.splitext(path)[1].lower())


@cache
def parser_and_query(language: str) -> tuple[Parser, Query]:
    """One parser and compiled query per language and process (compiling a query costs milliseconds)."""
    try:
        grammar: Language = pack.get_language(language)  # type: ignore[arg-type]
        return pack.get_parser(language), Query(grammar, QUERIES[language])  # type: ignore[arg-type]
    except Exception as exc:  # the pack raises its own types, e.g. when a release wants to download grammars
        raise GrammarUnavailable(language, f"{type(exc).__name__}: {exc}") from exc
