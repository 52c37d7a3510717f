"""A retry replaces the attempt it retries only once it has a step of its own.

A retry that fails before writing any step (the model errors, a script has run out of replies)
must leave the conversation as it was: nothing superseded, so the earlier attempt stays current.
The old steps are marked superseded in the same durable commit as the retry's first step, then the
old runs' summaries point at the retry.
"""

from __future__ import annotations

from typing import Any

from ..core import Step
from ..tools.context import history_changed
from .recorder import RunRecorder
from .retry import RetryPlan


class RetryRecorder(RunRecorder):
    __slots__ = ("_plan", "_replaced", "_runs_linked")

    def __init__(self, *args: Any, plan: RetryPlan, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._plan = plan
        self._replaced = False
        self._runs_linked = False

    def record_step(self, step: Step) -> None:
        if not self._replaced:
            self._replaced = True
            for old in self._plan.superseded:
                old.superseded = True
                self.update_step(old)
        super().record_step(step)

    def committed(self) -> None:
        if self._replaced and not self._runs_linked:
            self._runs_linked = True
            for old in self._plan.superseded_runs:
                old.superseded_by = self.run.id
                self.repository.commit(run=old)
            history_changed(self.run.session_id, self.repository)  # e.g. a workspace goes back to this point
