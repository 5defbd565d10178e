"""Reading a model's answer as a reader would: the number attached to the asked quantity.

"The last number in the reply" is not what a reader takes: "It would take 100
machines 5 minutes to make 100 widgets" answers "how many minutes" with 5, and
"So the ball costs $0.05, and the bat $1.05" prices the ball at 5 cents. A
reader looks, in this order, for

1. the asked format, a line ``ANSWER: <number>`` (the last one that holds a
   number; an echo of the instruction, ``ANSWER: <number>``, holds none);
2. an answer the model declares in words: "the answer is 70", "[Final
   Answer]: 5 minutes", "... = 12 cents, which is the answer" (the result of
   the arithmetic in it: "48 days * 2 = 96 days" answers 96);
3. the last number attached to the asked unit (minutes, cents or dollars, a
   day) that is not said of something else (the bat, the whole pond); where
   every such number is said of something else, no answer;
4. else the last number of the reply.

Each reading keeps the words it was read from and the step that found them,
so the evidence page can say why. The readings are tested against a corpus of
real model answers read by hand (tests/fixtures/probe_answers.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: how a reading was found, in the order a reader looks (the evidence page words each one)
HOW = ("answer_line", "answer_statement", "unit", "only_other_quantities", "last_number", "none")

_NUM = r"(\d+(?:\.\d+)?)"
# Markdown emphasis, LaTeX delimiters and escaped dollars are presentation, not words.
_NOISE = re.compile(r"\*\*|__|\\[()\[\]]|`")
_ANSWER_LINE = re.compile(r"^[ \t>#*_-]*answer[ \t]*[:=][ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
# "the answer is", "final answer:", "[Final Answer]:", "the answer to this question is:"
_STATEMENT = re.compile(
    r"\banswer\]?(?:\s+to\s+(?:this|the)\s+(?:question|problem|puzzle))?[ \t]*(?:is\b[ \t]*:?|:|=)\s*(.+?)"
    r"(?=(?<!\d)[.!?]|[.!?](?!\d)|\n[ \t]*\n|$)", re.IGNORECASE | re.DOTALL)
# "..., which is the answer" / "... is the final answer": the answer stands before the words
_POSTFIX = re.compile(r"([^.\n!?]*?)\s*,?\s*(?:which\s+)?is\s+(?:the|our|my)\s+(?:final\s+)?answer\b", re.IGNORECASE)
# a full stop between two digits is a decimal point, anywhere else it ends a sentence
_SENTENCE = re.compile(r"(?:(?<!\d)[.!?]|[.!?](?!\d))\s*|\n+|;\s*|,\s+(?=and\b|but\b|so\b|while\b)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")

# The patterns of each unit: (regex with one number group, factor into the asked unit). Earlier patterns
# win where two read the same number ("$0.05 cents" is five cents written twice, not 0.05 cents).
_UNITS: dict[str, tuple[tuple[re.Pattern, float], ...]] = {
    "cents": ((re.compile(r"\$\s*" + _NUM), 100.0),
              (re.compile(_NUM + r"\s*(?:dollars?|usd)\b", re.IGNORECASE), 100.0),
              (re.compile(_NUM + r"\s*(?:cents?\b|¢)", re.IGNORECASE), 1.0)),
    "minutes": ((re.compile(_NUM + r"\s*-?\s*(?:minutes?|mins?)\b", re.IGNORECASE), 1.0),),
    "day": ((re.compile(r"\bdays?\s+(?:number\s+)?" + _NUM + r"(?:st|nd|rd|th)?\b", re.IGNORECASE), 1.0),
            (re.compile(_NUM + r"(?:st|nd|rd|th)?\s+days?\b", re.IGNORECASE), 1.0)),
}


@dataclass(frozen=True)
class Asked:
    """What a question asks for: its unit, the words naming the asked thing and those naming others.

    ``subject``/``others`` are word stems: a number said of the bat (``others``) is not the ball's price.
    ``totals``: words that make a clause a sum ("the total cost of the bat and the ball is $4.00"), whose
    numbers are not the asked part even where the part is named in it.
    """

    unit: str
    subject: tuple[str, ...] = ()
    others: tuple[str, ...] = ()
    totals: tuple[str, ...] = ()


@dataclass
class Reading:
    """The value read from a reply, how it was found (one of :data:`HOW`) and the words it came from."""

    value: float | None
    how: str
    quote: str = ""
    format_followed: bool = False
    numbers: list[float] = field(default_factory=list)

    def as_detail(self) -> dict:
        """What a probe keeps of the reading in its unit's detail (the evidence page says why from it)."""
        return {"answer": self.value, "read_from": self.how, "quote": self.quote[:300],
                "format_followed": self.format_followed}


def _clean(text: str) -> str:
    return _NOISE.sub("", (text or "").replace("\\$", "$"))


def _mentions(text: str, unit: str) -> list[tuple[int, int, float]]:
    """(start, end, value in the asked unit) of every number attached to ``unit``, in text order."""
    taken: dict[int, tuple[int, int, float]] = {}
    for pattern, factor in _UNITS.get(unit, ()):
        for m in pattern.finditer(text):
            taken.setdefault(m.start(1), (m.start(), m.end(), float(m.group(1)) * factor))
    return [taken[k] for k in sorted(taken)]


def _statement_value(words: str, unit: str) -> float | None:
    """The value of a declared answer: the result of its arithmetic, its number with the unit, or its first number."""
    if "=" in words:
        words = words.rsplit("=", 1)[1]
    found = _mentions(words, unit)
    if found:
        return found[0][2]
    m = _NUMBER.search(words)
    return float(m.group()) if m else None


def _said_of_other(clause: str, start: int, end: int, asked: Asked) -> bool:
    """Whether the entity nearest a number in its clause (before it first, else after) is not the asked one."""
    def hits(part: str, stems) -> list[int]:
        return [m.start() for s in stems for m in re.finditer(rf"\b{re.escape(s)}", part, re.IGNORECASE)]

    before = clause[:start]
    if hits(before, asked.totals):
        return True
    subj, other = hits(before, asked.subject), hits(before, asked.others)
    if subj or other:
        return max(other, default=-1) > max(subj, default=-1)
    after = clause[end:]
    subj, other = hits(after, asked.subject), hits(after, asked.others)
    return bool(other) and min(other) < min(subj, default=len(after) + 1)


def _by_unit(text: str, asked: Asked) -> tuple[float | None, str] | None:
    """The last number attached to the asked unit that is not said of something else, with its clause;
    (None, clause) where every such number is said of something else; None where there is none."""
    best, other = None, None
    for part in _SENTENCE.split(text):
        if not part:
            continue
        for start, end, value in _mentions(part, asked.unit):
            if _said_of_other(part, start, end, asked):
                other = (None, part.strip())
            else:
                best = (value, part.strip())
    return best or other


def _sentence_of(text: str, start: int, end: int) -> str:
    """The words from the start of the sentence holding ``start`` to ``end``: what a reader quotes."""
    begin = 0
    for m in _SENTENCE.finditer(text, 0, start):
        begin = m.end()
    return " ".join(text[begin:end].split())


def read(text: str, asked: Asked) -> Reading:
    """The answer a reader would take from ``text`` for a question asking ``asked``."""
    clean = _clean(text)
    numbers = [float(n) for n in _NUMBER.findall(clean)]
    lines = [(m.group(0).strip(), _statement_value(m.group(1), asked.unit)) for m in _ANSWER_LINE.finditer(clean)]
    lines = [(q, v) for q, v in lines if v is not None]
    if lines:
        quote, value = lines[-1]
        return Reading(value, "answer_line", quote, True, numbers)
    declared = []
    for m in _STATEMENT.finditer(clean):
        value = _statement_value(m.group(1), asked.unit)
        if value is not None:
            declared.append((m.start(), _sentence_of(clean, m.start(), m.end()), value))
    for m in _POSTFIX.finditer(clean):
        value, begin = _statement_value(m.group(1), asked.unit), m.start()
        if value is None and re.fullmatch(r"\s*(?:this|that|it)", m.group(1), re.IGNORECASE):
            # "... which gives us 0.5. This is the answer.": the answer is the sentence before
            before = list(_NUMBER.finditer(clean, 0, m.start()))
            value, begin = (float(before[-1].group()), before[-1].start()) if before else (None, begin)
        if value is not None:
            declared.append((m.start(), _sentence_of(clean, begin, m.end()), value))
    if declared:
        _, quote, value = max(declared)
        return Reading(value, "answer_statement", quote, False, numbers)
    found = _by_unit(clean, asked)
    if found:
        # numbers with the unit only of other things (the whole pond's day 30): the asked one was not answered
        return Reading(found[0], "unit" if found[0] is not None else "only_other_quantities", found[1], False, numbers)
    if numbers:
        m = list(_NUMBER.finditer(clean))[-1]
        line_start = clean.rfind("\n", 0, m.start()) + 1
        line_end = clean.find("\n", m.end())
        return Reading(numbers[-1], "last_number", clean[line_start:line_end if line_end >= 0 else None].strip(),
                       False, numbers)
    return Reading(None, "none", "", False, numbers)
