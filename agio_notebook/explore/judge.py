"""A model-graded scorer whose judge call is itself a stored run.

``model_graded(judge, criteria)`` asks a judge agent (or model) to grade an answer; the judge's call
is a run of its own in the store, so a grade is one click from the judge's transcript, and an
evaluation that is run again reuses the grades its judge already gave (each grade's session is
derived from the evaluation, variant, sample and epoch). Offline, the judge is a scripted or
function model; any OpenAI-compatible endpoint works the same way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..agent import Agent
from ..core import AgioError, RunStatus, new_id
from ..execution import StepRunner
from ..models.base import Model
from ..storage import current_store
from ..storage.base import Repository

if TYPE_CHECKING:
    from .scoring import ScoredRun

JUDGE_PROMPT = ("You grade an assistant's answer. Criteria: {criteria}\n\nQuestion: {query}\n\n{target}"
                "Answer: {answer}\n\nReply with a single number from 0 to {scale:g}, nothing else.")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class JudgeError(AgioError, ValueError):
    """The judge did not give a grade (its run failed, or its reply holds no number on the scale)."""


class ModelGraded:
    """A scorer: a judge's 0..``scale`` grade of the answer, as 0..1 (``target`` names a sample column
    holding the expected answer, shown to the judge)."""

    def __init__(self, judge: Agent | Model, criteria: str, *, name: str = "judge", scale: float = 10.0,
                 target: str | None = None, prompt: str = JUDGE_PROMPT):
        if not isinstance(judge, (Agent, Model)):
            raise JudgeError(f"the judge must be an Agent or a Model, got {type(judge).__name__}")
        self.agent = judge if isinstance(judge, Agent) else Agent(model=judge, name="judge")
        self.criteria, self.name, self.scale, self.target, self.prompt = criteria, name, float(scale), target, prompt
        self.__name__ = name

    def request(self, run: ScoredRun, sample: dict[str, Any] | None) -> str:
        target = ""
        if self.target is not None:
            target = f"Expected answer: {(sample or {}).get(self.target, '')}\n\n"
        return self.prompt.format(criteria=self.criteria, query=run.query or "", answer=run.final_text,
                                  target=target, scale=self.scale)

    async def grade(self, run: ScoredRun, sample: dict[str, Any] | None, repository: Repository,
                    session_id: str | None = None) -> tuple[float, str]:
        """(grade 0..1, the judge's run id); a completed judge run in ``session_id`` is reused."""
        if session_id is not None:
            earlier = [r for r in repository.list_runs(session_id) if r.status is RunStatus.COMPLETED]
            if earlier:
                return self._parse(earlier[-1].final_text or ""), earlier[-1].id
            if repository.get_session(session_id) is not None:  # a judge run that failed: a new session
                session_id = f"{session_id}-{new_id()[:6]}"
        result = await StepRunner(self.agent, repository=repository).run(session_id, self.request(run, sample))
        if result.status is not RunStatus.COMPLETED:
            raise JudgeError(f"the judge's run {result.run_id[:8]} ended {result.status.value}: {result.error or ''}".strip())
        return self._parse(result.final_text or ""), result.run_id

    def _parse(self, text: str) -> float:
        found = _NUMBER.search(text)
        if found is None:
            raise JudgeError(f"the judge replied without a grade: {text[:60]!r}")
        value = float(found.group())
        if not 0 <= value <= self.scale:
            raise JudgeError(f"the judge's grade {value:g} is off its 0..{self.scale:g} scale")
        return value / self.scale

    async def __call__(self, run: ScoredRun) -> float:
        """As a plain scorer (sweeps, ``score_runs``): the judge runs in the default store."""
        return (await self.grade(run, None, current_store(None)))[0]


def model_graded(judge: Agent | Model, criteria: str, *, name: str = "judge", scale: float = 10.0,
                 target: str | None = None, prompt: str = JUDGE_PROMPT) -> ModelGraded:
    """A scorer graded by ``judge`` against ``criteria`` (0..``scale``, given as 0..1); each judge call is
    a stored run. ``target``: a dataset column with the expected answer, shown to the judge."""
    return ModelGraded(judge, criteria, name=name, scale=scale, target=target, prompt=prompt)
