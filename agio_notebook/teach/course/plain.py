"""Whether a sentence is a plain, unconditional instruction: the one rule the course's literal-minded
models share (the docstring reader, the calculator prompt reader, the forecaster reading its lessons).

A literal model follows an instruction only when it is plain. It does not follow one that holds under a
condition it cannot check (*only when the amount is big*, *if the user asks*, *unless the numbers are
small*, *on Mondays*, *except multiplications*), one said of the past or of a hypothetical (*used to*,
*once*, *no longer*, *would*), one about someone else (*another assistant*, *another user*), one that
is asked (*Convert dollars?*) or said to be broken; and a thing said to be *wrong* or *a mistake* is a
thing not to do. What a sentence demands on top (*spelled out*, *rounded*, *then convert*) is each
exercise's reading: the model does that too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..reading import STOPWORDS, UNIVERSAL, Sentence, clauses, find

_DAYS = {f"{d}day{s}" for d in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun") for s in ("", "s")} | {
    "weekend", "weekends", "weekday", "weekdays", "holidays", "mornings", "evenings", "nights"}
_EXCEPT = {"except", "excluding", "besides", "apart"}
_LIMITS = {"when", "where", "while", "for"}
_IF = {"if", "provided", "assuming", "suppose", "supposing"}
_PAST = [("used", "to"), ("once",), ("previously",), ("formerly",), ("in", "the", "past"), ("no", "longer"),
         ("any", "more"), ("anymore",), ("earlier",)]
_WOULD = {"would", "might", "could"}
_WOULD_LIKE = {"like", "prefer", "rather", "love", "appreciate", "want"}
_OTHERS = {"assistant", "assistants", "agent", "agents", "model", "models", "user", "users", "person", "people",
           "customer", "customers", "bot", "bots", "colleague", "colleagues", "team", "client", "clients", "tool",
           "tools", "human", "humans", "operator"}
_WRONG = {"wrong", "mistake", "mistaken", "incorrect", "error", "bad", "harmful", "forbidden"}
_BROKEN = [("broken",), ("deprecated",), ("disabled",), ("unavailable",), ("obsolete",), ("retired",),
           ("defunct",), ("out", "of", "order"), ("out", "of", "service"), ("does", "not", "work"),
           ("doesn't", "work"), ("no", "longer", "works")]
_FILLER = STOPWORDS | {"than", "from", "for", "the", "a", "an", "is", "are", "s", "it", "otherwise"}


@dataclass(frozen=True)
class Reservation:
    """Why a sentence (or clause) is not a plain instruction: ``kind`` is "condition", "exception", "past",
    "hypothetical", "someone else", "wrong" (what it names is not to be done), "broken" or "question";
    ``words`` the words that make it so."""

    kind: str
    words: tuple[str, ...]

    def describe(self) -> str:
        said = " ".join(self.words)
        return {"condition": f"a condition the model cannot check ({said!r})",
                "exception": f"an exception ({said!r})",
                "past": f"about the past ({said!r}), not what to do now",
                "hypothetical": f"a hypothetical ({said!r}), not an instruction",
                "someone else": f"about someone else ({said!r}), not this model",
                "wrong": f"says it is {said}, so it is not to be done",
                "broken": f"says it is {said}",
                "question": "a question, not an instruction"}[self.kind]


def _content(words: Iterable[str], skip: set[str]) -> list[str]:
    return [w for w in words if w not in _FILLER and w not in skip and not w[0].isdigit() and w not in UNIVERSAL]


def stance(clause: list[str], text: str = "") -> Reservation | None:
    """What makes one clause not an instruction to this model now: said of the past, a hypothetical, about
    someone else, judged wrong, broken, or a question (``text``, the sentence, ends with "?")."""
    for phrase in _BROKEN:
        if find(clause, phrase):
            return Reservation("broken", phrase)
    for i, word in enumerate(clause):
        if word in _WRONG:
            return Reservation("wrong", (word,))
        if word in ("another", "other", "different", "else") or (word == "some" and clause[i + 1:i + 2] == ["other"]):
            near = clause[i + 1:i + 3]
            if word == "else" and i and clause[i - 1] in ("someone", "somebody", "anyone"):
                return Reservation("someone else", (clause[i - 1], word))
            subject = next((w for w in near if w in _OTHERS), None)
            if subject:
                return Reservation("someone else", (word, subject))
        if word in _WOULD and not (set(clause[i + 1:i + 3]) & _WOULD_LIKE):
            return Reservation("hypothetical", (word,))
    for phrase in _PAST:
        if find(clause, phrase):
            return Reservation("past", phrase)
    if text.rstrip().endswith("?"):
        return Reservation("question", ())
    return None


def condition(sentence: Sentence, *, topic: Iterable[str], cases: Iterable[str] = ()) -> Reservation | None:
    """The condition or exception that limits a whole sentence, or None when it holds every time.

    ``topic`` words are what every question is about (a rule "for every forecast" or "if the question is a
    multiplication" always holds); ``cases`` are names the model can recognise (cities), left to the
    exercise's own scope."""
    topic_ = set(topic)
    known = {c.lower() for c in cases}
    for clause in clauses(sentence.tokens):
        for i, word in enumerate(clause):
            if word in _DAYS:
                return Reservation("condition", (clause[i - 1], word) if i and clause[i - 1] == "on" else (word,))
            rest = clause[i + 1:]
            if word == "unless":
                if "otherwise" in rest:  # "unless told otherwise": nobody tells it otherwise
                    break
                return Reservation("condition", tuple(clause[i:]))
            if word in _EXCEPT or (word == "other" and rest[:1] == ["than"]):
                if _content(rest, set()):
                    return Reservation("exception", tuple(clause[i:]))
            if word in _IF and clause[i - 1:i] not in (["even"], ["as"]):
                said = _content(rest, known)
                if not said or [w for w in said if w not in topic_]:
                    return Reservation("condition", tuple(clause[i:]))
            if clause[i - 1:i] == ["even"]:  # "even when the numbers are small": every time
                continue
            if word in _LIMITS or (word == "only" and rest[:1] and rest[0] in _LIMITS | _IF):
                said = [w for w in _content(rest, known | topic_) if w not in ("only",)]
                if said and not (set(rest) & UNIVERSAL):
                    return Reservation("condition", tuple(clause[i:]))
    return None
