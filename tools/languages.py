"""Languages of the code map: file suffixes and the tree-sitter queries for definitions and references.

Definition patterns capture the whole node as `@definition.<kind>` and its name as `@name`; reference
patterns capture an identifier as `@reference`. Queries are written against the grammars bundled with
tree-sitter-language-pack.
"""

from __future__ import annotations

import os
import re
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

# Besides declarations, the CommonJS style defines by assignment: `app.get = function`, `exports.x = ...`,
# `Foo.prototype.bar = function`, `const f = () => ...`; named function expressions define their name too.
# `var x = require('x')` is an import: outlined, but not where a reference to x leads (repomap.py).
_JS_COMMON = """
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(function_expression name: (identifier) @name) @definition.function
(method_definition name: (property_identifier) @name) @definition.method
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)])
  @definition.function
(assignment_expression left: (identifier) @name right: [(arrow_function) (function_expression) (generator_function)])
  @definition.function
(assignment_expression left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression) (generator_function)]) @definition.method
(assignment_expression left: (member_expression object: (identifier) @_exports property: (property_identifier) @name)
  (#eq? @_exports "exports")) @definition.variable
(assignment_expression
  left: (member_expression
    object: (member_expression object: (identifier) @_module property: (property_identifier) @_exports)
    property: (property_identifier) @name)
  (#eq? @_module "module") (#eq? @_exports "exports")) @definition.variable
(pair key: (property_identifier) @name value: [(arrow_function) (function_expression) (generator_function)])
  @definition.method
(variable_declarator value: (object (pair key: (property_identifier) @name) @definition.property))
(variable_declarator value: (object (pair key: (string (string_fragment) @name)) @definition.property))
(assignment_expression left: (subscript_expression object: (identifier) @name)
  right: [(arrow_function) (function_expression) (generator_function)]) @definition.method
(variable_declarator name: (identifier) @name value: (object)) @definition.object
(program (_ (variable_declarator name: (identifier) @name value: [(call_expression function: (identifier) @_require)
  (member_expression object: (call_expression function: (identifier) @_require))
  (call_expression function: (call_expression function: (identifier) @_require))]) @definition.import)
  (#eq? @_require "require"))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
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
(annotation_type_declaration name: (identifier) @name) @definition.annotation
(enum_declaration name: (identifier) @name) @definition.enum
(enum_constant name: (identifier) @name) @definition.constant
(method_declaration name: (identifier) @name) @definition.method
(annotation_type_element_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.constructor
(compact_constructor_declaration name: (identifier) @name) @definition.constructor
(field_declaration (variable_declarator name: (identifier) @name) @definition.field)
(constant_declaration (variable_declarator name: (identifier) @name) @definition.field)
(method_invocation name: (identifier) @reference)
(type_identifier) @reference
"""

# Fields, globals and typedefs are declarations whose declarators each name something (`int a, *b[2];`): tags.py
# unwraps them (`@declaration.<kind>`).
_C_COMMON = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name)))
  @definition.function
(function_definition declarator: (pointer_declarator declarator: (pointer_declarator
  declarator: (function_declarator declarator: (identifier) @name)))) @definition.function
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.union
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum
(enumerator name: (identifier) @name) @definition.constant
(field_declaration) @declaration.field
(type_definition) @declaration.type
(declaration) @declaration.variable
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
(function_definition declarator: (function_declarator declarator: (operator_name) @name)) @definition.method
(function_definition declarator: (operator_cast) @name) @definition.method
(function_definition declarator: (function_declarator declarator: (destructor_name) @name)) @definition.method
(field_declaration declarator: (function_declarator declarator: (operator_name) @name)) @definition.method
(class_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.class
(class_specifier name: (template_type name: (type_identifier) @name) body: (field_declaration_list)) @definition.class
(struct_specifier name: (template_type name: (type_identifier) @name) body: (field_declaration_list)) @definition.struct
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


# A `.h` file is C or C++; C++ says so in lines that C cannot have: a namespace, a template, a class, a struct with
# a base, an access label, `using`.
_CPP_SIGNS = re.compile(
    rb"^[ \t]*(?:template[ \t]*<|namespace\b[\w:. \t]*\{|class[ \t]+\w+(?:[ \t]+final)?[ \t]*(?:\{|:[^:]|$)"
    rb"|struct[ \t]+\w+(?:[ \t]+final)?[ \t]*:[^:]|(?:public|private|protected)[ \t]*:"
    rb"|using[ \t]+(?:namespace[ \t]+)?[\w:]+[ \t]*[;=])",
    re.MULTILINE,
)


def language_of(path: str, source: bytes | None = None) -> str | None:
    """The language of `path` by its suffix; a `.h` whose `source` reads as C++ is C++."""
    language = SUFFIXES.get(os.path.splitext(path)[1].lower())
    if language == "c" and path.lower().endswith(".h") and source is not None and _CPP_SIGNS.search(source):
        return "cpp"
    return language


@cache
def parser_and_query(language: str) -> tuple[Parser, Query]:
    """One parser and compiled query per language and process (compiling a query costs milliseconds)."""
    try:
        grammar: Language = pack.get_language(language)  # type: ignore[arg-type]
        return pack.get_parser(language), Query(grammar, QUERIES[language])  # type: ignore[arg-type]
    except Exception as exc:  # the pack raises its own types, e.g. when a release wants to download grammars
        raise GrammarUnavailable(language, f"{type(exc).__name__}: {exc}") from exc
