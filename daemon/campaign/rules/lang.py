"""The pass-rule language: a tokenizer, a recursive-descent parser, a type check, an evaluator.

A campaign states before the run what "pass" means (principle 7), e.g.::

    offloaded_layers == total_layers and probe.tools == "PASS" and decode.short >= 50

The text is data typed by a user, so it is never handed to ``eval``: it is
tokenized and parsed here into a small tree, checked against the names a run
can supply, and evaluated over plain values. Every error is one line that
names the column.

Grammar (lowest precedence first)::

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := sum (("=="|"!="|"<"|"<="|">"|">=") sum)?
    sum     := product (("+"|"-") product)*
    product := unary (("*"|"/") unary)*
    unary   := "-" unary | atom
    atom    := NUMBER | STRING | "true" | "false" | NAME | "(" expr ")"

Values that a run does not have (a fact never logged, a probe not run) are
MISSING, and logic is three-valued: a rule over a missing value is
"undecided", never quietly false or true.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

MAX_TEXT = 2000  # a rule is a sentence, not a program
MAX_DEPTH = 40  # nesting bound: malformed input gets an error, never a RecursionError

KEYWORDS = {"and", "or", "not", "true", "false"}
COMPARE = {"==", "!=", "<", "<=", ">", ">="}


class RuleError(Exception):
    """A rule that cannot be used; str() is one line naming the column."""

    def __init__(self, message: str, pos: int | None = None):
        self.message = message
        self.pos = pos
        super().__init__(f"{message} at column {pos + 1}" if pos is not None else message)


class _Missing:
    """The value of a name the run does not have."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:  # guard: a missing value must never pass as false
        raise TypeError("MISSING has no truth value")


MISSING = _Missing()


@dataclass(frozen=True)
class Token:
    kind: str  # num | str | name | op | kw | end
    text: str
    pos: int
    value: object = None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # ASCII only: "²".isdigit() is True


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raise RuleError at the first character that fits none."""
    if not isinstance(text, str):
        raise RuleError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise RuleError(f"rule is {len(text)} characters long (at most {MAX_TEXT})")
    out: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if "0" <= ch <= "9":
            m = _NUMBER.match(text, i)
            end = m.end()
            if end < len(text) and (text[end].isalpha() or text[end] in "_."):
                raise RuleError(f"malformed number {text[i:end + 1]!r}", i)
            value = float(m.group())
            if value == float("inf"):  # 400 digits parse to inf: a limit that compares as no limit
                raise RuleError(f"number {m.group()[:20]}... is too large", i)
            out.append(Token("num", m.group(), i, value))
            i = end
            continue
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            m = _NAME.match(text, i)
            end = m.end()
            if end < len(text) and text[end] == ".":
                raise RuleError(f"malformed name {text[i:end + 1]!r}", i)
            word = m.group()
            out.append(Token("kw" if word in KEYWORDS else "name", word, i, word))
            i = end
            continue
        if ch in "\"'":
            j, chars = i + 1, []
            while j < len(text) and text[j] != ch:
                if text[j] == "\\" and j + 1 < len(text) and text[j + 1] in (ch, "\\"):
                    j += 1
                elif text[j] in "\r\n":
                    break
                chars.append(text[j])
                j += 1
            if j >= len(text) or text[j] != ch:
                raise RuleError("unterminated string", i)
            out.append(Token("str", text[i:j + 1], i, "".join(chars)))
            i = j + 1
            continue
        two = text[i:i + 2]
        if two in ("==", "!=", "<=", ">="):
            out.append(Token("op", two, i))
            i += 2
            continue
        if ch in "<>+-*/()":
            out.append(Token("op", ch, i))
            i += 1
            continue
        if ch == "=":
            raise RuleError("'=' is not a comparison (use '==')", i)
        raise RuleError(f"unexpected character {ch!r}", i)
    out.append(Token("end", "", len(text)))
    return out


# -- the tree ------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    kind: str  # num | str | bool | name | neg | not | arith | compare | and | or
    pos: int  # first column, for messages
    end: int  # one past the last column, for quoting an arm's own text
    value: object = None  # literal value, name, or operator
    items: tuple = ()


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def at(self, kind: str, *texts: str) -> bool:
        return self.tok.kind == kind and (not texts or self.tok.text in texts)

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RuleError(f"rule nested more than {MAX_DEPTH} levels deep", self.tok.pos)

    def parse(self) -> Node:
        if self.at("end"):
            raise RuleError("empty rule", 0)
        node = self.expr()
        if not self.at("end"):
            t = self.tok
            raise RuleError(f"unexpected {t.text!r} after a complete expression", t.pos)
        return node

    def _chain(self, kind: str, word: str, sub: Callable[[], Node]) -> Node:
        first = sub()
        items = [first]
        while self.at("kw", word):
            self.take()
            items.append(sub())
        if len(items) == 1:
            return first
        return Node(kind, first.pos, items[-1].end, word, tuple(items))

    def expr(self) -> Node:
        self.deeper()
        try:
            return self._chain("or", "or", self.conj)
        finally:
            self.depth -= 1

    def conj(self) -> Node:
        return self._chain("and", "and", self.neg)

    def neg(self) -> Node:
        if self.at("kw", "not"):
            t = self.take()
            self.deeper()
            try:
                inner = self.neg()
            finally:
                self.depth -= 1
            return Node("not", t.pos, inner.end, "not", (inner,))
        return self.compare()

    def compare(self) -> Node:
        left = self.sum()
        if self.at("op", *COMPARE):
            op = self.take()
            right = self.sum()
            if self.at("op", *COMPARE):
                raise RuleError("chained comparisons are not allowed (join them with 'and')", self.tok.pos)
            return Node("compare", left.pos, right.end, op.text, (left, right))
        return left

    def _binary(self, ops: tuple[str, ...], sub: Callable[[], Node]) -> Node:
        left = sub()
        while self.at("op", *ops):
            op = self.take()
            right = sub()
            left = Node("arith", left.pos, right.end, op.text, (left, right))
        return left

    def sum(self) -> Node:
        return self._binary(("+", "-"), self.product)

    def product(self) -> Node:
        return self._binary(("*", "/"), self.unary)

    def unary(self) -> Node:
        if self.at("op", "-"):
            t = self.take()
            self.deeper()
            try:
                inner = self.unary()
            finally:
                self.depth -= 1
            return Node("neg", t.pos, inner.end, "-", (inner,))
        return self.atom()

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.take()
            return Node("num", t.pos, t.pos + len(t.text), t.value)
        if t.kind == "str":
            self.take()
            return Node("str", t.pos, t.pos + len(t.text), t.value)
        if t.kind == "kw" and t.text in ("true", "false"):
            self.take()
            return Node("bool", t.pos, t.pos + len(t.text), t.text == "true")
        if t.kind == "name":
            self.take()
            return Node("name", t.pos, t.pos + len(t.text), t.text)
        if self.at("op", "("):
            self.take()
            inner = self.expr()
            if not self.at("op", ")"):
                raise RuleError("missing ')'", self.tok.pos)
            close = self.take()
            return Node(inner.kind, t.pos, close.pos + 1, inner.value, inner.items)
        if t.kind == "end":
            raise RuleError("rule ends where a value was expected", t.pos)
        raise RuleError(f"expected a value, got {t.text!r}", t.pos)


def parse(text: str) -> Node:
    """Parse a rule into its tree; raise RuleError (one line, with the column)."""
    return _Parser(text).parse()


def names(node: Node) -> list[str]:
    """Every name a rule reads, in order of first appearance."""
    if node.kind == "name":
        return [node.value]
    out: list[str] = []
    for item in node.items:
        out += [n for n in names(item) if n not in out]
    return out


def arms(node: Node) -> list[Node]:
    """The rule's arms: the parts joined by the top-level ``and`` (one arm if none)."""
    return list(node.items) if node.kind == "and" else [node]


# -- types ---------------------------------------------------------------------
# num, str, bool, and verdict: a string that may only be one of the vocabulary
def check(node: Node, type_of: Callable[[str], str | None], verdicts: frozenset[str] = frozenset()) -> str:
    """The type of ``node``; RuleError for unknown names and mixed-up types.

    ``type_of(name)`` returns num/str/bool/verdict or None for a name the
    run cannot supply (the caller's error then lists what it can).
    """
    k = node.kind
    if k in ("num", "str", "bool"):
        return k
    if k == "name":
        t = type_of(node.value)
        if t is None:
            raise RuleError(f"unknown name {node.value!r}", node.pos)
        return t
    if k == "neg":
        if check(node.items[0], type_of, verdicts) != "num":
            raise RuleError("'-' needs a number", node.pos)
        return "num"
    if k == "not":
        if check(node.items[0], type_of, verdicts) != "bool":
            raise RuleError("'not' needs a true/false value", node.pos)
        return "bool"
    if k in ("and", "or"):
        for item in node.items:
            if check(item, type_of, verdicts) != "bool":
                raise RuleError(f"'{k}' joins true/false values; this part is not one", item.pos)
        return "bool"
    left, right = node.items
    lt, rt = check(left, type_of, verdicts), check(right, type_of, verdicts)
    if k == "arith":
        if lt != "num" or rt != "num":
            raise RuleError(f"'{node.value}' needs numbers on both sides", node.pos)
        return "num"
    # compare
    if "verdict" in (lt, rt):
        other, other_t = (right, rt) if lt == "verdict" else (left, lt)
        if node.value not in ("==", "!="):
            raise RuleError(f"a verdict can only be compared with == or !=, not {node.value!r}", node.pos)
        if other_t == "str" and other.kind == "str" and verdicts and other.value not in verdicts:
            raise RuleError(f"{other.value!r} is not a verdict (one of: {', '.join(sorted(verdicts))})", other.pos)
        if other_t not in ("str", "verdict"):
            raise RuleError("a verdict can only be compared with a verdict string", node.pos)
        return "bool"
    if lt != rt:
        raise RuleError(f"cannot compare {lt} with {rt}", node.pos)
    if lt in ("str", "bool") and node.value not in ("==", "!="):
        raise RuleError(f"{lt} values can only be compared with == or !=", node.pos)
    return "bool"


# -- evaluation ----------------------------------------------------------------
def evaluate(node: Node, values: Mapping[str, object]):
    """The value of ``node`` over ``values``; MISSING where a name has no value.

    Raises RuleError for what only shows at run time (division by zero, a
    value of the wrong type in the store).
    """
    k = node.kind
    if k in ("num", "str", "bool"):
        return node.value
    if k == "name":
        v = values.get(node.value, MISSING)
        return MISSING if v is None else v
    if k == "neg":
        v = evaluate(node.items[0], values)
        return v if v is MISSING else -_num(v, node)
    if k == "not":
        v = evaluate(node.items[0], values)
        return v if v is MISSING else not _bool(v, node)
    if k in ("and", "or"):
        vals = [evaluate(i, values) for i in node.items]
        decided = [_bool(v, node) for v in vals if v is not MISSING]
        if k == "and":
            if not all(decided):
                return False
        elif any(decided):
            return True
        if len(decided) < len(vals):
            return MISSING
        return k == "and"
    a, b = (evaluate(i, values) for i in node.items)
    if a is MISSING or b is MISSING:
        return MISSING
    if k == "arith":
        a, b = _num(a, node), _num(b, node)
        if node.value == "/" and b == 0:
            raise RuleError("division by zero", node.pos)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[node.value]
    if node.value in ("==", "!="):
        same = a == b
        return same if node.value == "==" else not same
    a, b = _num(a, node), _num(b, node)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[node.value]


def _num(v, node: Node) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RuleError(f"expected a number, the run has {v!r}", node.pos)
    return float(v)


def _bool(v, node: Node) -> bool:
    if not isinstance(v, bool):
        raise RuleError(f"expected true/false, the run has {v!r}", node.pos)
    return v
