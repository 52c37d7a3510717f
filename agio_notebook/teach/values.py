"""Values read out of text the way a careful marker reads them: numbers as numbers, whole tokens, units.

``6`` is not in ``16``, ``12`` is not in ``120``, and ``1,510.00 JPY``, ``¥1510`` and ``1510 yen`` are one
amount. Every judgment of the course compares what an answer says with what the run really did through
these functions, never with a substring test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .reading import doubt, negated_at  # the rules of negation and doubt

# a number standing on its own: not glued to a digit or decimal point before it (a currency code may be:
# EUR34.50), not followed by more digits; thousands separators (1,510.00) and a typographic minus are read
_NUMBER = re.compile(r"(?<![\d.])([-−–]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?![\d]|\.\d|,\d{3})")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")

CURRENCY_NAMES = {"EUR": ("euro", "euros", "€"), "GBP": ("pound", "pounds", "sterling", "£"),
                  "JPY": ("yen", "¥"), "USD": ("dollar", "dollars", "$", "usd")}
_CURRENCY_OF = {w: code for code, words in CURRENCY_NAMES.items() for w in words} | {
    code.lower(): code for code in CURRENCY_NAMES}
_CELSIUS = re.compile(r"^\s*(?:°\s*c\b|º\s*c\b|degrees?\s+(?:c\b|celsius|centigrade)|celsius|centigrade|c\b)", re.I)
_FAHRENHEIT = re.compile(r"^\s*(?:°\s*f\b|º\s*f\b|degrees?\s+(?:f\b|fahrenheit)|fahrenheit|f\b)", re.I)
_TIME = re.compile(r"(?<![\w:])(\d{1,2})(?:[:.](\d{2}))?\s*(a\.?\s?m\.?|p\.?\s?m\.?)(?![a-z])|(?<![\w:])(\d{1,2}):(\d{2})(?![\d])",
                   re.I)


@dataclass(frozen=True)
class Number:
    """A number found in a text, with where it ends (what follows it is its unit, if any)."""

    value: float
    start: int
    end: int


def number_spans(text: str) -> list[Number]:
    found = []
    for m in _NUMBER.finditer(text or ""):
        value = float(m.group(2).replace(",", ""))
        found.append(Number(-value if m.group(1) else value, m.start(), m.end()))
    return found


def numbers(text: str) -> list[float]:
    """Every number in ``text``, as a number: ``"It's 1,510.00 JPY, not 16"`` -> ``[1510.0, 16.0]``."""
    return [n.value for n in number_spans(text)]


def parse_number(text: str) -> float | None:
    """The one number ``text`` is (``" 391."`` -> 391.0), or None when it is anything more or less."""
    stripped = (text or "").strip().rstrip(".").strip()
    found = number_spans(stripped)
    if len(found) != 1 or found[0].start != 0 or found[0].end != len(stripped):
        return None
    return found[0].value


def same(a: float, b: float, tolerance: float = 1e-9) -> bool:
    return abs(a - b) <= tolerance + 1e-9 * max(abs(a), abs(b))


def says_number(text: str, value: float, tolerance: float = 1e-9) -> bool:
    """``text`` states ``value`` as a whole number token (``6`` is not said by ``16°C``)."""
    return any(same(n, value, tolerance) for n in numbers(text))


def words(text: str) -> list[str]:
    """The lower-case word tokens of ``text``."""
    return _WORD.findall((text or "").lower())


def has_word(text: str, word: str) -> bool:
    """``word`` (one or more words) occurs as whole tokens: ``owl`` is not in ``bowling``."""
    wanted = words(word)
    got = words(text)
    return any(got[i:i + len(wanted)] == wanted for i in range(len(got) - len(wanted) + 1))


def temperatures(text: str) -> list[tuple[float, str]]:
    """``(value, "C" | "F")`` for every temperature written with its unit: ``14°C``, ``14 °C``, ``-3 ºC``,
    ``14 degrees Celsius``, ``57°F``. A number without a temperature unit is not a temperature."""
    text = text or ""
    out = []
    for n in number_spans(text):
        after = text[n.end:n.end + 24]
        if _CELSIUS.match(after):
            out.append((n.value, "C"))
        elif _FAHRENHEIT.match(after):
            out.append((n.value, "F"))
    return out


def amounts(text: str) -> list[tuple[float, str]]:
    """``(value, ISO code)`` for every amount of money written with its currency, before or after the
    number: ``1,510.00 JPY``, ``¥1510``, ``EUR 34.50``, ``34.50 euros``, ``$10``."""
    text = text or ""
    out = []
    for n in number_spans(text):
        after = re.match(r"\s*([A-Za-z]+|[€£¥$])", text[n.end:n.end + 12])
        before = re.search(r"([A-Za-z]+|[€£¥$])\s*$", text[max(0, n.start - 12):n.start])
        for found in (after, before):
            code = _CURRENCY_OF.get(found.group(1).lower()) if found else None
            if code is None and found and found.group(1).upper() in CURRENCY_NAMES:
                code = found.group(1).upper()
            if code is not None:
                out.append((n.value, code))
                break
    return out


def times(text: str) -> list[int]:
    """Clock times as minutes after midnight: ``3 pm``, ``3pm``, ``3 p.m.``, ``15:00``, ``3:30 PM``."""
    return [int(t.value) for t in time_spans(text)]


def time_spans(text: str) -> list[Number]:
    """The clock times of ``text`` (minutes after midnight) with where each stands."""
    out = []
    for m in _TIME.finditer(text or ""):
        if m.group(1) is not None:
            hour, minute = int(m.group(1)) % 12, int(m.group(2) or 0)
            if m.group(3).lower().startswith("p"):
                hour += 12
        else:
            hour, minute = int(m.group(4)), int(m.group(5))
        if hour < 24 and minute < 60:
            out.append(Number(hour * 60 + minute, m.start(), m.end()))
    return out


def clock(minutes: int) -> str:
    """``900`` -> ``"3 pm"``, ``930`` -> ``"3:30 pm"``."""
    hour, minute = divmod(minutes, 60)
    shown = hour % 12 or 12
    return f"{shown}{f':{minute:02d}' if minute else ''} {'pm' if hour >= 12 else 'am'}"


def shown_number(value: float) -> str:
    """A number the way a person writes it: ``12.0`` -> ``"12"``, ``34.5`` -> ``"34.5"``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def unstated(text: str, value: float, *, besides: tuple[float, ...] = (), spans: Callable[[str], list[Number]] = number_spans,
             show: Callable[[float], str] = shown_number, tolerance: float = 1e-9) -> str | None:
    """Why ``text`` does not state ``value`` as its answer, or None when it does. An answer states a value when
    it says it (a whole number token, or a time with ``spans=time_spans``), its clause does not deny it ("The
    sum is not 53"), nothing in it doubts it ("..., but I doubt it", "maybe"), and no other value stands beside
    it ("53 (or maybe 100)", "34 + 19 = 53; the tool said 60"); ``besides`` are values it may also say (the
    question's own numbers). The reason reads after "your answer ...": "does not say 53"."""
    found = spans(text)
    hits = [n for n in found if same(n.value, value, tolerance)]
    if not hits:
        return f"does not say {show(value)}"
    if all(negated_at(text, n.start, n.end) for n in hits):
        return f"says it is not {show(value)}"
    others = [n.value for n in found if not any(same(n.value, x, tolerance) for x in (value, *besides))]
    if others:
        return f"also says {show(others[0])}, beside {show(value)}"
    if (doubted := doubt(text)) is not None:
        return f"doubts {show(value)} ({doubted!r})"
    return None
