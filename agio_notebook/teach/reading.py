"""Reading prose for its sense, as far as the course's offline models claim to: each sentence an
instruction, with its negations, its exclusivity ("only the number"), and the cases it is limited to.

An offline model cannot understand prose; it can refuse to be fooled by words in the wrong sense. What
it reads, and what it does not, is said in each exercise's instructions. The rules:

- A concept mentioned after an odd number of negations in its clause is negated: "never convert to
  Celsius", "not Celsius", "instead of Fahrenheit", "avoid Fahrenheit"; "don't forget Celsius" is not.
- Clauses end at , ; : and "but": "Celsius, not Fahrenheit" says Celsius and denies Fahrenheit.
- "only", "just", "alone", "nothing but", "nothing else", "no other ..." make a sentence exclusive.
- A condition ("for Oslo", "when the numbers are big", "if ...") limits the sentence to the cases it
  names; one the model cannot evaluate limits it to cases the model cannot recognise, so it never applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|°\s?[cf]\b|º\s?[cf]\b|\d+(?:\.\d+)?|[,;:]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|(?<=[.!?])$")
NEGATORS = {"not", "never", "no", "don't", "dont", "doesn't", "didn't", "won't", "wont", "cannot", "can't",
            "isn't", "aren't", "shouldn't", "mustn't", "nor", "without", "neither", "avoid", "stop", "forget",
            "refuse", "skip", "omit", "ignore", "drop", "neglect", "instead", "rather", "except", "unlike",
            "nobody", "nothing", "none"}
# "instead of", "rather than", "other than": the negator is the first word, the second is noise
_PAIRED = {("instead", "of"), ("rather", "than"), ("other", "than")}
_EXCLUSIVE = {"only", "just", "alone", "solely", "purely", "bare", "exclusively", "merely"}
_EXCLUSIVE_PAIRS = {("nothing", "but"), ("nothing", "else"), ("no", "other"), ("none", "but"), ("no", "more")}
_NOT_NEGATING = {("nothing", "but"), ("none", "but")}  # "nothing but the number": only the number
# words that open a condition limiting a rule ("for Oslo", "when it is cold"); a place or case named anywhere
# in the sentence limits it too (scope_of)
_CONDITIONS = {"for", "when", "whenever", "if", "where", "whereas", "unless", "except", "during"}
UNIVERSAL = {"every", "all", "any", "each", "always", "whatever", "whichever", "everything", "anything",
             "everywhere", "wherever", "whenever", "regardless", "even", "everyone", "anyone"}
STOPWORDS = {"the", "a", "an", "you", "your", "we", "i", "it", "its", "is", "are", "be", "been", "being", "was",
             "give", "gives", "given", "giving", "answer", "answers", "answering", "reply", "replies", "asked",
             "ask", "asks", "about", "of", "to", "with", "user", "users", "someone", "people", "they", "their",
             "me", "my", "them", "this", "that", "these", "those", "do", "does", "doing", "please", "one",
             "there", "what", "which", "who", "how", "then", "so", "as", "at", "by", "from", "and", "or", "also",
             "will", "would", "should", "must", "can", "could", "may", "might", "shall", "say", "says", "said",
             "write", "writes", "report", "reports", "next", "time", "times", "from", "now", "on", "in", "for",
             "when", "if", "whenever", "only", "just", "use", "uses", "using", "used", "get", "gets", "got",
             "tell", "tells", "make", "made", "want", "wants", "wanted", "like", "need", "needs", "always",
             "new", "same", "other", "another", "more", "very", "too", "even", "still", "it's", "being", "again",
             "anymore", "ever", "onwards", "forward", "going", "here", "there", "way", "ones", "thing", "things"}


def tokens(text: str) -> list[str]:
    return _TOKEN.findall((text or "").lower().replace("’", "'"))


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (a line break ends one too)."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


def clauses(sentence_tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for t in sentence_tokens:
        if t in {",", ";", ":", "but"} and not (t == "but" and out[-1][-1:] in (["nothing"], ["anything"],
                                                                                  ["none"])):
            out.append([])
        else:
            out[-1].append(t)
    return [c for c in out if c]


def _negators_before(clause: list[str], index: int) -> int:
    n = 0
    i = 0
    while i < index:
        word = clause[i]
        pair = (word, clause[i + 1]) if i + 1 < len(clause) else None
        if pair == ("anything", "but"):
            n += 1
            i += 2
            continue
        if pair in _PAIRED:
            n += 1
            i += 2
            continue
        if word in ("other", "rather", "instead"):
            i += 1
            continue
        if word in NEGATORS and pair not in _NOT_NEGATING:
            n += 1
        i += 1
    return n


def find(clause: Sequence[str], phrase: tuple[str, ...]) -> list[int]:
    """Where ``phrase`` (words) starts in ``clause`` (words), every place."""
    return [i for i in range(len(clause) - len(phrase) + 1) if tuple(clause[i:i + len(phrase)]) == phrase]


@dataclass
class Mention:
    """A concept said in a sentence: positively, or negated (``positive`` False)."""

    concept: str
    positive: bool
    sentence: int
    text: str  # the sentence it is in
    clause: tuple[str, ...] = ()  # the words of its clause

    @property
    def stated(self) -> bool:
        """Said positively in a clause that is a phrase, not a keyword alone in a list ("dollar, exchange")."""
        return self.positive and len(self.clause) >= 2


@dataclass
class Sentence:
    text: str
    index: int
    tokens: list[str]
    mentions: list[Mention] = field(default_factory=list)

    @property
    def exclusive(self) -> bool:
        """An exclusivity marker stands in it, not negated ("only", "just", "nothing else"...)."""
        for clause in clauses(self.tokens):
            for i, word in enumerate(clause):
                pair = (word, clause[i + 1]) if i + 1 < len(clause) else None
                negated = _negators_before(clause, i) % 2 == 1
                if (word in _EXCLUSIVE or pair in _EXCLUSIVE_PAIRS) and not negated:
                    return True
                if pair == ("anything", "but") and negated:  # "do not say anything but the number"
                    return True
        return False

    def said(self, concept: str) -> bool | None:
        """True when the concept is said positively here, False when only negated, None when not at all."""
        found = [m.positive for m in self.mentions if m.concept == concept]
        if not found:
            return None
        return any(found)

    def condition(self, ignore: Iterable[str] = ()) -> list[str]:
        """The content words of the conditions that limit this sentence ("for Oslo" -> ["oslo"]), less
        ``ignore`` (the concepts' own words); empty when nothing limits it."""
        skip = set(ignore)
        words: list[str] = []
        for clause in clauses(self.tokens):
            for i, word in enumerate(clause):
                if word in ("unless",):  # an exception that does not hold unless asked: no limit
                    break
                if word in _CONDITIONS or (word == "only" and i + 1 < len(clause) and clause[i + 1] in _CONDITIONS):
                    words += [w for w in clause[i + 1:] if w not in STOPWORDS and w not in skip
                              and not w.isdigit() and w not in _CONDITIONS]
                    break
        return words

    @property
    def universal(self) -> bool:
        return any(t in UNIVERSAL for t in self.tokens)


def parts(sentence: Sentence) -> list[Sentence]:
    """The sentence's clauses, each read as a sentence of its own (a rule and its limit are judged where
    they stand: "Don't use it for additions; use it for products")."""
    out = []
    for clause in clauses(sentence.tokens):
        part = Sentence(" ".join(clause), sentence.index, clause)
        part.mentions = [m for m in sentence.mentions if m.clause == tuple(clause)]
        out.append(part)
    return out


def read(text: str, concepts: dict[str, Iterable[str]]) -> list[Sentence]:
    """``text`` as sentences, each with the concepts it mentions (phrases of one or more words) and
    whether each is said or negated."""
    phrases = {c: [tuple(tokens(p)) for p in ps] for c, ps in concepts.items()}
    out = []
    for n, raw in enumerate(sentences(text)):
        sentence = Sentence(raw, n, tokens(raw))
        for clause in clauses(sentence.tokens):
            for concept, forms in phrases.items():
                for form in forms:
                    for i in find(clause, form):
                        sentence.mentions.append(Mention(concept, _negators_before(clause, i) % 2 == 0, n, raw,
                                                         tuple(clause)))
        out.append(sentence)
    return out


def scope_of(sentence: Sentence, *, topic: Iterable[str], cases: Iterable[str], ignore: Iterable[str] = ()
             ) -> Scope:
    """What a rule sentence applies to: every case, the cases it names ("for Oslo"), every case but the
    ones it excludes ("except Oslo"), or nothing the model can recognise ("when it is cold").

    ``topic`` words do not limit (a rule "for forecasts" in a forecast exercise is about every forecast);
    ``cases`` are the names the model can recognise (cities...)."""
    case_names = {c.lower(): c for c in cases}
    included: set[str] = set()
    excluded: set[str] = set()
    for clause in clauses(sentence.tokens):
        for i, word in enumerate(clause):
            if word in case_names:
                (included if _negators_before(clause, i) % 2 == 0 else excluded).add(case_names[word])
    words = [w for w in sentence.condition(ignore) if w not in set(topic) and w not in UNIVERSAL
             and w not in case_names and w not in NEGATORS]
    if included and not sentence.universal:
        return Scope("cases", included, excluded, words)
    if words and not sentence.universal:
        return Scope("unknown", set(), excluded, words)
    return Scope("all", set(), excluded, [])


@dataclass(frozen=True)
class Scope:
    """``kind``: "all" (but ``excluded``), "cases" (only ``included``), or "unknown" (a condition the
    model cannot evaluate, in ``words``)."""

    kind: str
    included: set[str]
    excluded: set[str]
    words: list[str]

    def applies_to(self, case: str) -> bool:
        if case in self.excluded:
            return False
        return self.kind == "all" or (self.kind == "cases" and case in self.included)

    def describe(self) -> str:
        if self.kind == "cases":
            return "for " + " and ".join(sorted(self.included)) + " only"
        if self.kind == "unknown":
            return "only when " + " ".join(self.words)
        return "except for " + " and ".join(sorted(self.excluded)) if self.excluded else "always"


# where a clause of an answer ends, read at the characters: a decimal point or a thousands comma does not
_CLAUSE_END = re.compile(r"[;:!?()\n]|[.,](?!\d)|\bbut\b|\bhowever\b|\bthough\b", re.IGNORECASE)
# an answer that states a value and doubts it ("..., but I doubt it", "maybe 12") does not state it
DOUBTS = ("doubt", "doubts", "doubtful", "maybe", "perhaps", "possibly", "probably", "unsure", "uncertain", "guess",
          "wrong", "incorrect", "false", "untrue", "unlikely", "not sure", "not certain", "don't believe",
          "do not believe", "might be", "could be", "or so")


def clause_at(text: str, start: int, end: int) -> str:
    """The clause of ``text`` that holds the characters ``start:end`` (clauses end at , ; : . and "but")."""
    text = text or ""
    before = [m.end() for m in _CLAUSE_END.finditer(text, 0, start)]
    after = _CLAUSE_END.search(text, end)
    return text[before[-1] if before else 0:after.start() if after else len(text)]


def negated_at(text: str, start: int, end: int) -> bool:
    """What stands at ``start:end`` is denied by its clause: an odd number of negations in it ("The sum is not
    53", "It is not true that owls ...", "12 pm isn't the time")."""
    clause = tokens(clause_at(text, start, end))
    return _negators_before(clause, len(clause)) % 2 == 1


def doubt(text: str) -> str | None:
    """The words of ``text`` that doubt what it says ("but I doubt it", "maybe", "not sure"), not negated
    ("no doubt" is none); None when it doubts nothing."""
    for sentence in read(text, {"doubt": DOUBTS}):
        for mention in sentence.mentions:
            if mention.positive:
                return next((d for d in DOUBTS if find(mention.clause, tuple(tokens(d)))), "doubt")
    return None
