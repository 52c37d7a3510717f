"""Memory records: skills, experiences, feedback and proposed experiences, as plain data.

A skill is a named procedure; an experience is what happened once and what was learned from it.
Both carry a scope (an agent's name, or ``"global"``), a usage count (how many runs retrieved them)
and created/updated times. ``updated_at`` moves only when the content changes, so the search index
can tell what to re-index.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..core import new_id, now

GLOBAL = "global"


@dataclass(slots=True)
class Skill:
    name: str
    text: str
    scope: str = GLOBAL
    tags: list[str] = field(default_factory=list)
    usage_count: int = 0
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)

    kind = "skill"
    EDITABLE = ("name", "text", "scope", "tags")

    def search_text(self) -> str:
        return " ".join([self.name, self.text, *self.tags])


@dataclass(slots=True)
class Experience:
    situation: str
    action: str = ""
    outcome: str = ""
    lesson: str = ""
    scope: str = GLOBAL
    source_run: str | None = None
    source_step: str | None = None
    rating: int | None = None
    tags: list[str] = field(default_factory=list)
    usage_count: int = 0
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)

    kind = "experience"
    EDITABLE = ("situation", "action", "outcome", "lesson", "scope", "source_run", "source_step", "rating", "tags")

    def search_text(self) -> str:
        return " ".join([self.situation, self.action, self.outcome, self.lesson, *self.tags])


@dataclass(slots=True)
class Feedback:
    """A rating (+1 or -1) and a comment on a run, or on one step of it; a correction (rated -1) also
    carries the right answer, which the extracted experience then teaches."""

    run_id: str
    rating: int
    comment: str = ""
    correction: str | None = None
    session_id: str | None = None
    step_id: str | None = None
    sequence: int | None = None
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=now)


@dataclass(slots=True)
class Proposal:
    """An experience an extractor proposed from a feedback item; it waits for the user's review."""

    feedback_id: str
    run_id: str
    experience: dict[str, Any]
    status: str = "proposed"  # proposed | accepted | rejected
    extractor: str = "template"
    experience_id: str | None = None  # set once accepted
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=now)
    reviewed_at: float | None = None


Record = Skill | Experience
TABLES: dict[str, type] = {"skills": Skill, "experiences": Experience, "feedback": Feedback,
                           "proposals": Proposal}


def to_doc(obj: Any) -> dict[str, Any]:
    return asdict(obj)


def from_doc(cls: type, doc: dict[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in doc.items() if k in names})


def record_table(kind: str) -> str:
    return "skills" if kind == "skill" else "experiences"
