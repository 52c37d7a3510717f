"""Memory: skills and experiences retrieved into the prompt, feedback, and feedback turned into experience.

Everything here works on the default store (``AGIO_STORE`` or ``./.agio``) unless a ``repository`` is
given; see ``docs/memory.md``.

>>> from agio_notebook import memory
>>> memory.add_skill("units", "Always state the unit of a physical quantity.", scope="physics-tutor")
>>> df = memory.skills(); df.loc[0, "text"] = "State units."; memory.update(df)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..storage.base import Repository
from ..storage.ids import resolve_run_id
from . import extractor as _extractor
from .embeddings import Embeddings
from .local_model import EmbeddingsError, LocalEmbeddings
from .ratings import add_feedback as _add_feedback
from .records import GLOBAL, Experience, Feedback, Proposal, Skill
from .retrieval import MemoryConfig, Retrieval, format_block, retrieve
from .store import MemoryStore, memory_for

if TYPE_CHECKING:
    import pandas as pd


class _Frames:
    """The frames module, imported on first use so importing the engine does not import pandas."""

    def __getattr__(self, name: str) -> Any:
        from . import frames

        return getattr(frames, name)


_frames = _Frames()


def _store(repository: Repository | None) -> MemoryStore:
    return memory_for(repository)


def _repo(repository: Repository | None) -> Repository:
    if repository is not None:
        return repository
    from ..storage import open_repository

    return open_repository()


def add_skill(name: str, text: str, *, scope: str = GLOBAL, tags: Iterable[str] = (),
              repository: Repository | None = None) -> Skill:
    """A named procedure the agent(s) in ``scope`` should follow."""
    return _store(repository).add(Skill(name=name, text=text, scope=scope, tags=list(tags)))  # type: ignore[return-value]


def add_experience(situation: str, action: str = "", outcome: str = "", lesson: str = "", *,
                   scope: str = GLOBAL, source_run: str | None = None, source_step: str | None = None,
                   rating: int | None = None, tags: Iterable[str] = (),
                   repository: Repository | None = None) -> Experience:
    """Something that happened once, and what to do next time (``tags`` as for skills)."""
    exp = Experience(situation=situation, action=action, outcome=outcome, lesson=lesson, scope=scope,
                     source_run=source_run, source_step=source_step, rating=rating, tags=list(tags))
    return _store(repository).add(exp)  # type: ignore[return-value]


def skills(scope: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    return _frames.records_frame(_store(repository), "skills", scope)


def experiences(scope: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    return _frames.records_frame(_store(repository), "experiences", scope)


def update(df: pd.DataFrame, *, repository: Repository | None = None) -> int:
    """Write an edited ``skills()`` or ``experiences()`` frame back; returns how many records changed."""
    return _frames.update(_store(repository), df)


def edit(record_id: str, *, repository: Repository | None = None, **changes: Any) -> Skill | Experience:
    return _store(repository).edit(record_id, **changes)


def delete(record_id: str, *, repository: Repository | None = None) -> None:
    _store(repository).delete(record_id)


def search(query: str, *, scope: str | None = None, skills: int = 3, experiences: int = 3,
           embeddings: Any = None, min_score: float = 0.0, repository: Repository | None = None) -> pd.DataFrame:
    """What a run in ``scope`` would retrieve for ``query`` (without recording anything), as a frame: one
    row per record, in prompt order, with its score and the retrievers that found it; ``embeddings`` as
    in :class:`MemoryConfig` (None: hybrid with the local model when installed)."""
    return _frames.search_frame(retrieve(_store(repository), query, scope=scope, skills=skills,
                                         experiences=experiences, embeddings=embeddings, min_score=min_score))


def reembed(*, repository: Repository | None = None) -> int:
    """Compute every record's vector again with the installed local model (and drop vectors an
    endpoint made, which are made again when next needed); returns how many records were re-embedded."""
    return _store(repository).reembed()


# -- feedback ---------------------------------------------------------------------------------
def add_feedback(run_id: str, rating: Any, comment: str = "", *, step: int | str | None = None,
                 correction: str | None = None, repository: Repository | None = None) -> Feedback:
    """+1 or -1 (and a comment) on a run, or on one of its steps (sequence or step id); a ``correction``
    (the right answer, rated -1) is what the proposed experience will teach."""
    return _add_feedback(_store(repository), _repo(repository), run_id, rating, comment, step, correction)


def feedback(run_id: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    if run_id is not None:
        run_id = resolve_run_id(_repo(repository), run_id)
    return _frames.feedback_frame(_store(repository), run_id)


def propose(feedback_id: str, *, extractor: Any = None, scope: str | None = None, auto_accept: bool = False,
            repository: Repository | None = None) -> Proposal:
    """A proposed experience from a feedback item (template offline, or ``extractor`` model)."""
    return _extractor.propose(_store(repository), _repo(repository), feedback_id, extractor=extractor,
                              scope=scope, auto_accept=auto_accept)


def proposals(status: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    return _frames.proposals_frame(_store(repository), status)


def accept(proposal_id: str, *, repository: Repository | None = None, **edits: Any) -> Experience:
    """Accept a proposed experience, optionally editing its fields (``lesson=...``)."""
    return _extractor.accept(_store(repository), proposal_id, **edits)


def reject(proposal_id: str, *, repository: Repository | None = None) -> Proposal:
    return _extractor.reject(_store(repository), proposal_id)


__all__ = ["Embeddings", "EmbeddingsError", "Experience", "LocalEmbeddings", "Feedback", "MemoryConfig", "MemoryStore", "Proposal", "Retrieval",
           "Skill", "accept", "add_experience", "add_feedback", "add_skill", "delete", "edit", "experiences",
           "feedback", "format_block", "memory_for", "propose", "proposals", "reembed", "reject", "search", "skills",
           "update"]
