"""Exercise, Scenario and expectations: what a learner is asked, and how an answer is judged offline."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core import ExecutionConfig, StepEvent, StepRole
from ..explore.scoring import ScoredRun, scorer_name
from ..storage.base import Repository

KINDS = ("tool", "model", "agent", "prompt", "scorer", "function")


@dataclass
class Trial(ScoredRun):
    """What an expectation sees: a scorer's view of the run, plus the run's events and what the solution
    returned (a scorer's score, a function's result). ``run`` is None when the solution never produced one."""

    events: list[StepEvent] = field(default_factory=list)
    value: Any = None
    repository: Repository | None = None
    context: dict[str, Any] = field(default_factory=dict)  # what a driver learnt (the session it set up...)

    @property
    def tool_results(self) -> list[tuple[str, str, str]]:
        """``(tool name, status, content)`` of every tool step, in order."""
        return [(s.name or "", s.status or "ok", s.content or "") for s in self.steps if s.role is StepRole.TOOL]

    @property
    def tool_arguments(self) -> list[dict[str, Any]]:
        """The arguments of every tool call, in order."""
        return [_arguments(c.arguments) for s in self.steps if s.role is StepRole.ASSISTANT for c in s.tool_calls]


def _arguments(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


Why = str | Callable[[Trial], str]


@dataclass(frozen=True)
class Expectation:
    """A scorer (from ``agio_notebook.scoring``) or a predicate over a :class:`Trial`; it holds when its
    value is at least ``at_least`` (``True`` counts as 1). ``why`` is what the learner reads when it fails:
    a line, or a function of the trial that names what went wrong."""

    test: Callable[[Trial], Any]
    why: Why
    at_least: float = 1.0
    name: str = ""

    async def failure(self, trial: Trial) -> str | None:
        """None when it holds; else the reason."""
        try:
            value = self.test(trial)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # noqa: BLE001 - a check that cannot judge is a failure with its reason
            return f"{self.name or scorer_name(self.test)} could not judge this run: {type(exc).__name__}: {exc}"
        if isinstance(value, (bool, int, float)) and float(value) >= self.at_least:
            return None
        return self.why(trial) if callable(self.why) else self.why


def expect(test: Callable[[Trial], Any], why: Why, *, at_least: float = 1.0, name: str | None = None) -> Expectation:
    """An expectation: ``expect(scoring.regex("92"), "the answer lacks 92 EUR")``."""
    if not callable(test):
        raise TypeError(f"expect() needs a scorer or a predicate, got {type(test).__name__}")
    return Expectation(test, why, at_least, name or scorer_name(test))


@dataclass
class Scenario:
    """One situation the solution is tried in: a query, the model (a scripted or function model, or a
    recorded run's ``ReplayModel``) and tools around the solution, and the expectations.

    ``setup(repository)`` prepares the store first (a session to fork, memory); ``config`` caps the run.
    """

    name: str
    query: str = ""
    model: Any = None
    tools: Sequence[Any] = ()
    system_prompt: str | None = None
    expect: Sequence[Expectation] = ()
    config: ExecutionConfig | None = None
    setup: Callable[[Repository], Any] | None = None
    describe: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # what a custom driver needs (expected values...)


Driver = Callable[[Any, Scenario, Repository], Any]  # async (solution, scenario, repository) -> Trial


class Hint(str):
    """A hint shown as Markdown in a notebook."""

    def _repr_markdown_(self) -> str:
        return f"**Hint.** {self}"


@dataclass
class Exercise:
    """What the learner is asked for (``kind``: a tool, a model function, an agent, a prompt, a scorer or
    a function), the scenarios it is checked in, and hints given one at a time by :meth:`hint`.

    ``drive`` runs one scenario with a solution when the default for the kind does not fit (a function
    that forks sessions, a memory written between two runs).
    """

    name: str
    title: str
    kind: str
    instructions: str
    scenarios: list[Scenario]
    hints: Sequence[str] = ()
    starter: str = ""
    asks_for: str = ""  # the thing asked for, as the learner should write it: "a tool convert_currency(...)"
    minutes: int = 10
    arity: int | None = None  # how many arguments a function solution takes
    tool_name: str | None = None  # the name a tool solution must have (the scenarios' models call it)
    drive: Driver | None = None
    _hints_given: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"exercise {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.scenarios:
            raise ValueError(f"exercise {self.name!r} has no scenarios")
        if self.kind == "function" and self.drive is None:
            raise ValueError(f"exercise {self.name!r}: a function exercise needs drive=")

    def hint(self) -> Hint:
        """The next hint (each call gives one more; then says there are no more)."""
        if self._hints_given >= len(self.hints):
            return Hint(f"No more hints for {self.name} ({len(self.hints)} given). "
                        "Read the failing scenario's reason and transcript.")
        self._hints_given += 1
        return Hint(f"({self._hints_given}/{len(self.hints)}) {self.hints[self._hints_given - 1]}")

    def markdown(self) -> str:
        return (f"### Exercise `{self.name}`: {self.title}\n\n{self.instructions.strip()}\n\n"
                f"*Asks for {self.asks_for or 'a ' + self.kind}; checked in {len(self.scenarios)} "
                f"scenario{'s' if len(self.scenarios) != 1 else ''}; about {self.minutes} min. "
                f"`check(exercise({self.name!r}), solution)` checks it; `.hint()` gives a hint.*")

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"Exercise({self.name!r}: {self.title}; asks for {self.asks_for or self.kind})"
