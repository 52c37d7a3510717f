"""Scorers: plain functions over a run — its final text, its steps, its tool-call path.

A scorer takes a :class:`ScoredRun` and returns a number or a bool (or awaits one). Its name is its
``__name__`` (or ``.name``). A scorer that raises does not stop anything: its score becomes an error
cell (``None`` with the error beside it) and the other scorers and runs go on.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..core import AgentRun, NotFoundError, Step, StepRole
from ..models.base import Model, TextDelta
from ..storage import current_store
from ..storage.base import Repository
from ..storage.ids import resolve_run_id
from .runner import run_coroutine

Scorer = Callable[["ScoredRun"], Any]


@dataclass
class ScoredRun:
    """What a scorer sees of a run."""

    run: AgentRun
    steps: list[Step] = field(default_factory=list)

    @property
    def final_text(self) -> str:
        return self.run.final_text or ""

    @property
    def tool_path(self) -> list[str]:
        """Names of the tools called, in order."""
        return [c.name for s in self.steps if s.role is StepRole.ASSISTANT for c in s.tool_calls]

    @property
    def query(self) -> str | None:
        return self.run.query

    @classmethod
    def load(cls, run_id: str, repository: Repository | None = None) -> ScoredRun:
        repository = current_store(repository)
        run_id = resolve_run_id(repository, run_id)  # a unique prefix of 6+ characters works too
        run = repository.get_run(run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store")
        steps = [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run_id]
        return cls(run, steps)


@dataclass(frozen=True)
class ScoreError:
    """An error cell: the scorer raised."""

    message: str

    def __str__(self) -> str:
        return f"error: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return {"error": self.message}


def scorer_name(scorer: Scorer) -> str:
    return getattr(scorer, "name", None) or getattr(scorer, "__name__", None) or type(scorer).__name__


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = name
    fn.name = name  # type: ignore[attr-defined]
    return fn


def exact(expected: str, *, name: str = "exact", strip: bool = True, ignore_case: bool = False) -> Scorer:
    """1.0 when the final text equals ``expected``."""
    def norm(text: str) -> str:
        text = text.strip() if strip else text
        return text.lower() if ignore_case else text

    return _named(lambda r: float(norm(r.final_text) == norm(expected)), name)


def regex(pattern: str, *, name: str = "regex", flags: int = 0) -> Scorer:
    """1.0 when ``pattern`` is found in the final text."""
    compiled = re.compile(pattern, flags)
    return _named(lambda r: float(compiled.search(r.final_text) is not None), name)


def called_before_answer(tool_name: str, *, name: str | None = None) -> Scorer:
    """1.0 when ``tool_name`` was called (and returned) before the final answer."""
    def score(r: ScoredRun) -> float:
        answered = [s for s in r.steps if s.role is StepRole.ASSISTANT and not s.tool_calls]
        if not answered:
            return 0.0
        last = answered[-1].sequence
        return float(any(s.role is StepRole.TOOL and s.name == tool_name and s.sequence < last for s in r.steps))

    return _named(score, name or f"called_{tool_name}")


def tool_path_is(path: Sequence[str], *, name: str = "tool_path") -> Scorer:
    """1.0 when the tools were called exactly in this order."""
    return _named(lambda r: float(r.tool_path == list(path)), name)


JUDGE_PROMPT = ("You grade an assistant's answer. Criteria: {criteria}\n\nQuestion: {query}\n\nAnswer: {answer}\n\n"
                "Reply with a single number from 0 to 10, nothing else.")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def llm_judge(model: Model, criteria: str, *, name: str = "judge", scale: float = 10.0,
              prompt: str = JUDGE_PROMPT) -> Scorer:
    """An LLM-as-judge scorer with any model (a scripted one offline): its 0..``scale`` grade, as 0..1.

    The answer under review is untrusted text inside the prompt; the judge's reply must contain a number,
    else the score is an error cell.
    """
    async def judge(r: ScoredRun) -> float:
        messages = [{"role": "user", "content": prompt.format(criteria=criteria, query=r.query or "",
                                                              answer=r.final_text)}]
        text = "".join([c.text async for c in model.stream(messages, [], stream=False) if isinstance(c, TextDelta)])
        found = _NUMBER.search(text)
        if found is None:
            raise ValueError(f"the judge replied without a grade: {text[:60]!r}")
        return max(0.0, min(1.0, float(found.group()) / scale))

    return _named(judge, name)


async def score_run(run: ScoredRun, scorers: Iterable[Scorer]) -> dict[str, Any]:
    """``{name: value or ScoreError}``: every scorer runs, whatever the others do."""
    scores: dict[str, Any] = {}
    for scorer in scorers:
        name = scorer_name(scorer)
        try:
            value = scorer(run)
            if inspect.isawaitable(value):
                value = await value
            if isinstance(value, bool):
                value = float(value)
            if value is not None and not isinstance(value, (int, float, str)):
                raise TypeError(f"a score must be a number, bool or str, got {type(value).__name__}")
        except Exception as exc:  # noqa: BLE001 - a failing scorer is an error cell, not a stopped sweep
            value = ScoreError(f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
        scores[name] = value
    return scores


def stored_scores(scores: dict[str, Any]) -> dict[str, Any]:
    """Scores as the run record keeps them (error cells as ``{"error": ...}``)."""
    return {k: v.to_dict() if isinstance(v, ScoreError) else v for k, v in scores.items()}


def score_runs(run_ids: Iterable[str], scorers: Sequence[Scorer], repository: Repository | None = None, *,
               save: bool = True) -> dict[str, dict[str, Any]]:
    """Score stored runs (and, with ``save``, keep the scores on their run records for ``runs()``)."""
    repository = current_store(repository)
    async def go() -> dict[str, dict[str, Any]]:
        out = {}
        for ref in run_ids:
            scored = ScoredRun.load(ref, repository)
            run_id = scored.run.id
            out[run_id] = await score_run(scored, scorers)
            if save:
                scored.run.scores = {**scored.run.scores, **stored_scores(out[run_id])}
                repository.commit(run=scored.run)
        return out

    return run_coroutine(go())

