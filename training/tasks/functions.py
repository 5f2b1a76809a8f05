"""The functions of a made-up repository: small computations with a docstring that says in words what they return.

Each function returns one expression built from a template whose holes are its parameters, operators and constants
(`slots`), other project functions, configuration constants and standard modules. The docstring is written from the
slots, so when a failing-test task breaks one slot in the code the docstring still tells the intended behaviour:
the bug can be found by reading, not only by guessing from the test. Only some kinds can be broken that way
(`BREAKABLE`): those whose slots are an operator or a constant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from warpcode.training.tasks.words import Vocabulary

BREAKABLE = ("affine", "pair", "compare", "call")

_FIRST = {  # affine's first step: operator -> the words for "{x} OP {k}"
    "*": "{x} times {k}",
    "//": "{x} divided by {k}, rounded down",
    "%": "the remainder of {x} divided by {k}",
    "+": "{x} plus {k}",
    "-": "{x} minus {k}",
}
_THEN = {"+": "plus {k}", "-": "minus {k}", "*": "times {k}", "//": "divided by {k}, rounded down"}
_PAIR = {"+": "the sum of {a} and {b}", "-": "{a} minus {b}", "*": "the product of {a} and {b}"}
_COMPARE = {">": "greater than", ">=": "at least", "<": "less than", "<=": "at most", "==": "equal to",
            "!=": "different from"}  # fmt: skip
_NEAR_COMPARISON = {">": ">=", ">=": ">", "<": "<=", "<=": "<", "==": "!=", "!=": "=="}

# module -> (expression template, docstring); {x} is the parameter, {k} and {m} constants with k < m.
STDLIB_CALLS: dict[str, list[tuple[str, str]]] = {
    "math": [
        ("math.floor({x} / {k})", "Return {x} divided by {k}, rounded down."),
        ("math.ceil({x} / {k})", "Return {x} divided by {k}, rounded up."),
        ("math.gcd({x}, {k})", "Return the greatest common divisor of {x} and {k}."),
    ],
    "operator": [
        ("operator.mul({x}, {k})", "Return {x} multiplied by {k}."),
        ("operator.sub({x}, {k})", "Return {x} less {k}."),
    ],
    "statistics": [("statistics.median([{x}, {k}, {m}])", "Return the median of {x}, {k} and {m}.")],
    "json": [("json.dumps([{x}, {k}])", "Return {x} and {k} as a JSON list.")],
    "string": [("string.ascii_lowercase[{x} % 26]", "Return the letter of the alphabet at {x} modulo 26.")],
    "calendar": [("calendar.isleap(2000 + {x})", "Return True when the year 2000 + {x} is a leap year.")],
    "collections": [
        ("len(collections.Counter(str({x} * {k})))", "Return how many different digits {x} times {k} has.")
    ],
    "itertools": [("len(list(itertools.combinations(range({x}), 2)))", "Return how many pairs {x} items make.")],
    "datetime": [("int(datetime.timedelta(hours={x}).total_seconds())", "Return {x} hours in seconds.")],
    "fractions": [("fractions.Fraction({x}, {k}).denominator", "Return the denominator of {x}/{k} in lowest terms.")],
    "re": [('re.sub("[0-9]", "#", str({x} * {k}))', "Return {x} times {k} with every digit written as #.")],
    "heapq": [("heapq.nsmallest(1, [{x}, {k}, {m}])[0]", "Return the smallest of {x}, {k} and {m}.")],
    "bisect": [("bisect.bisect([{k}, {m}], {x})", "Return how many of {k} and {m} are at most {x}.")],
}
# The standard modules of held-out tasks: few modules hash into a quarter, so this split is chosen, not hashed.
HELDOUT_STDLIB = ("bisect", "fractions", "heapq", "re")


def stdlib_modules(split: str) -> tuple[str, ...]:
    return tuple(m for m in sorted(STDLIB_CALLS) if (m in HELDOUT_STDLIB) == (split == "heldout"))


@dataclass
class Function:
    name: str
    params: tuple[str, ...]
    kind: str
    template: str  # the returned expression (str.format): {slot} holes for operators and numbers, {{C:NAME}} for
    # the constant NAME, written as the repository reads its configuration
    slots: dict[str, str]
    doc: str
    calls: tuple[str, ...] = ()  # project functions it calls
    constants: tuple[str, ...] = ()  # configuration constants it reads
    stdlib: tuple[str, ...] = ()  # standard modules it uses
    bug: dict[str, str] = field(default_factory=dict)  # slots the repository's code gets wrong

    def expression(self, constant: Callable[[str], str], buggy: bool = True) -> str:
        """The returned expression, constants written by `constant(NAME)`, with the bug unless `buggy` is False."""
        slots = {**self.slots, **(self.bug if buggy else {})}
        text = self.template.format(**slots)
        for name in self.constants:
            text = text.replace("{C:" + name + "}", constant(name))
        return text

    def return_line(self, constant: Callable[[str], str], buggy: bool = True) -> str:
        return f"    return {self.expression(constant, buggy)}"

    def source(self, constant: Callable[[str], str], buggy: bool = True) -> str:
        lines = [f"def {self.name}({', '.join(self.params)}):", f'    """{self.doc}"""']
        return "\n".join([*lines, self.return_line(constant, buggy)]) + "\n"


@dataclass
class Constant:
    name: str
    value: int | float | str | bool
    comment: str = ""

    def line(self, value: object = None) -> str:
        shown = self.value if value is None else value
        text = f'{self.name} = "{shown}"' if isinstance(shown, str) else f"{self.name} = {shown!r}"
        return f"{text}  # {self.comment}" if self.comment else text


class FunctionMaker:
    """New functions for one repository: names and numbers from its vocabulary."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab, self.rng = vocab, vocab.rng

    def _k(self) -> str:
        return str(self.vocab.small_int())

    def affine(self) -> Function:
        x, first, then = self.vocab.noun(), self.rng.choice(list(_FIRST)), self.rng.choice(["+", "-"])
        slots = {"op1": first, "k1": self._k(), "op2": then, "k2": self._k()}
        words = _FIRST[first].format(x=x, k=slots["k1"])
        doc = f"Return {words}, {_THEN[then].format(k=slots['k2'])}."
        return Function(self.vocab.function_name(), (x,), "affine", x + " {op1} {k1} {op2} {k2}", slots, doc)

    def pair(self) -> Function:
        a, b = self.vocab.noun(), self.vocab.noun()
        inner, outer = self.rng.choice(list(_PAIR)), self.rng.choice(list(_THEN))
        slots = {"op1": inner, "op2": outer, "k": self._k()}
        doc = f"Return {_PAIR[inner].format(a=a, b=b)}, {_THEN[outer].format(k=slots['k'])}."
        return Function(self.vocab.function_name(), (a, b), "pair", f"({a} {{op1}} {b}) {{op2}} {{k}}", slots, doc)

    def compare(self) -> Function:
        x, op = self.vocab.noun(), self.rng.choice(list(_COMPARE))
        slots = {"op": op, "k": self._k()}
        doc = f"Return True when {x} is {_COMPARE[op]} {slots['k']}."
        return Function(self.vocab.function_name(), (x,), "compare", x + " {op} {k}", slots, doc)

    def call(self, callee: Function) -> Function:
        x, op = self.vocab.noun(), self.rng.choice(["+", "-", "*"])
        slots = {"op": op, "k": self._k()}
        doc = f"Return {callee.name} of {x}, {_THEN[op].format(k=slots['k'])}."
        template = f"{callee.name}({x}) {{op}} {{k}}"
        return Function(self.vocab.function_name(), (x,), "call", template, slots, doc, calls=(callee.name,))

    def setting(self, constant: Constant) -> Function:
        x, name, hole = self.vocab.noun(), constant.name, "{{C:" + constant.name + "}}"  # a literal {C:NAME}
        if isinstance(constant.value, bool):
            template, doc = f"{x} if {hole} else -{x}", f"Return {x}, negated unless the {name} setting is on."
        elif isinstance(constant.value, str):
            template, doc = f'{hole} + "-" + str({x})', f"Return the {name} setting, a dash and {x}."
        elif isinstance(constant.value, float):
            template, doc = f"round({x} * {hole}, 2)", f"Return {x} times the {name} setting, to two decimals."
        else:
            op = self.rng.choice(["+", "-", "*"])
            template, doc = f"{x} {op} {hole}", f"Return {x} {_THEN[op].format(k=f'the {name} setting')}."
        return Function(self.vocab.function_name(), (x,), "setting", template, {}, doc, constants=(name,))

    def stdlib(self, module: str) -> Function:
        x = self.vocab.noun()
        template, doc = self.rng.choice(STDLIB_CALLS[module])
        k, m = sorted(self.rng.sample([v for v in self.vocab.ints if v <= 40], 2))
        numbers = {key: str(v) for key, v in (("k", k), ("m", m)) if "{" + key + "}" in template}
        doc = doc.replace("{x}", x).format(**numbers)
        return Function(self.vocab.function_name(), (x,), "stdlib", template.replace("{x}", x), numbers, doc,
                        stdlib=(module,))  # fmt: skip

    def label(self) -> Function:
        x, word = self.vocab.noun(), self.vocab.word_value()
        doc = f'Return "{word}-" followed by {x}.'
        return Function(self.vocab.function_name(), (x,), "label", f'"{word}-" + str({x})', {}, doc)


def break_function(function: Function, vocab: Vocabulary) -> None:
    """Give `function` a wrong operator or constant in one slot (its docstring keeps the right one)."""
    rng = vocab.rng
    slot = rng.choice(sorted(function.slots))
    right = function.slots[slot]
    if slot.startswith("k"):
        wrong = str(rng.choice([v for v in vocab.ints if v <= 40 and str(v) != right]))
    elif function.kind == "compare":
        wrong = _NEAR_COMPARISON[right] if rng.random() < 0.7 else rng.choice([o for o in _COMPARE if o != right])
    else:
        choices = {"affine": {"op1": _FIRST, "op2": ("+", "-")}, "pair": {"op1": _PAIR, "op2": _THEN},
                   "call": {"op": ("+", "-", "*")}}[function.kind][slot]  # fmt: skip
        wrong = rng.choice([o for o in choices if o != right])
    function.bug = {slot: wrong}
