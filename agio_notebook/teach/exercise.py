"""Exercise, Scenario and expectations: what a learner is asked, and how an answer is judged offline."""

from __future__ import annotations

import inspect
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core import ExecutionConfig, StepEvent, StepRole
from ..explore.scoring import ScoredRun, scorer_name
from ..storage.base import Repository
from .guard import DEFAULT_CAP, Watch

KINDS = ("tool", "model", "agent", "prompt", "scorer", "function")


@dataclass
class Trial(ScoredRun):
    """What an expectation sees: a scorer's view of the run, plus the run's events and what the solution
    returned (a scorer's score, a function's result). ``run`` is None when the solution never produced one."""

    events: list[StepEvent] = field(default_factory=list)
    value: Any = None
    repository: Repository | None = None
    context: dict[str, Any] = field(default_factory=dict)  # what a driver learnt (the session it set up...)
    watch: Watch = field(default_factory=Watch)  # what the learner's code did beside its answer

    @property
    def tool_results(self) -> list[tuple[str, str, str]]:
        """``(tool name, status, content)`` of every tool step, in order."""
        return [(s.name or "", s.status or "ok", s.content or "") for s in self.steps if s.role is StepRole.TOOL]

    @property
    def tool_arguments(self) -> list[dict[str, Any]]:
        """The arguments of every tool call, in order."""
        return [arguments(c.arguments) for s in self.steps if s.role is StepRole.ASSISTANT for c in s.tool_calls]

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """``(tool name, arguments)`` of every tool call, in order."""
        return [(c.name, arguments(c.arguments)) for s in self.steps if s.role is StepRole.ASSISTANT
                for c in s.tool_calls]


def arguments(raw: str) -> dict[str, Any]:
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


def judged(why: Callable[[Trial], str | None], name: str) -> Expectation:
    """An expectation written as one function: ``why(trial)`` is None when the trial is right, else the
    reason (the course's exercises judge this way, so the check and its reason cannot disagree)."""
    def holds(trial: Trial) -> bool:
        return why(trial) is None

    def reason(trial: Trial) -> str:
        return why(trial) or f"{name} failed"

    return Expectation(holds, reason, 1.0, name)


Probe = Callable[[Trial, Any], Any]  # async (trial, the learner's raw solution) -> reason | None


@dataclass
class Scenario:
    """One situation the solution is tried in: a query, the model (a scripted or function model, or a
    recorded run's ``ReplayModel``) and tools around the solution, and the expectations.

    ``setup(repository)`` prepares the store first (a session to fork, memory); ``config`` caps the run.
    ``variant`` marks a scenario the instructions do not show (drawn anew from each seed); ``probe``
    asks the learner's code one more question after the run (the same call with another tool result).
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
    variant: bool = False
    probe: Probe | None = None
    judges_failure: bool = False  # the run is meant to fail (a time limit): its expectations judge how


Driver = Callable[[Any, Scenario, Repository], Any]  # async (solution, scenario, repository) -> Trial
Scenarios = Callable[[random.Random], list[Scenario]]


class Hint(str):
    """A hint shown as Markdown in a notebook."""

    def _repr_markdown_(self) -> str:
        return f"**Hint.** {self}"


class Solution(str):
    """A reference solution's code, shown as a code block in a notebook."""

    def _repr_markdown_(self) -> str:
        return f"```python\n{self}\n```"


@dataclass
class Exercise:
    """What the learner is asked for (``kind``: a tool, a model function, an agent, a prompt, a scorer or
    a function), the scenarios it is checked in, and hints given one at a time by :meth:`hint`.

    ``scenarios`` is a list, or a function of a ``random.Random`` that draws them (the course's: values a
    learner cannot hard-code, a new draw per ``check()``, the same for the same seed). ``drive`` runs one
    scenario with a solution when the default for the kind does not fit. ``preflight(solution)`` names a
    problem that would fail every scenario for one reason (a wrong signature), said once instead.
    ``time_limit`` caps each call of the learner's code, in seconds; once a call overran, the scenarios after it
    are not run (the same code would hang again). ``concurrent`` runs the scenarios at once (for scenarios
    that wait on purpose; a learner's code that keeps state between calls wants them one after another). ``reference`` is the reference
    solution's code (a cell), revealed by :meth:`solution` or after the last hint.
    """

    name: str
    title: str
    kind: str
    instructions: str
    scenarios: list[Scenario] | Scenarios
    hints: Sequence[str] = ()
    starter: str = ""
    asks_for: str = ""  # the thing asked for, as the learner should write it: "a tool convert_currency(...)"
    minutes: int = 10
    arity: int | None = None  # how many arguments a function solution takes
    tool_name: str | None = None  # the name the scenarios' models call a tool solution by
    tool_arguments: Sequence[str] = ()  # the arguments they pass it
    drive: Driver | None = None
    preflight: Callable[[Any], str | None] | None = None
    time_limit: float = DEFAULT_CAP
    reference: str = ""
    concurrent: bool = False  # scenarios at once (each waits on time limits); else one after another
    # what the check puts in the environment while it runs (None removes a variable), from the seed's draw
    environment: Callable[[random.Random], dict[str, str | None]] | None = None
    _hints_given: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"exercise {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not callable(self.scenarios) and not self.scenarios:
            raise ValueError(f"exercise {self.name!r} has no scenarios")
        if self.kind == "function" and self.drive is None:
            raise ValueError(f"exercise {self.name!r}: a function exercise needs drive=")

    def draw(self, seed: int) -> list[Scenario]:
        """The scenarios for ``seed`` (a fixed list is the same for every seed)."""
        if callable(self.scenarios):
            return self.scenarios(self.rng(seed))
        return list(self.scenarios)

    def rng(self, seed: int) -> random.Random:
        """The draws of ``seed``: the same sequence for the scenarios and the environment."""
        return random.Random(f"{self.name}:{seed}")

    @property
    def asks_for_what(self) -> str:
        """How reasons name the learner's code: "choose()", "scorer", "model function"."""
        found = re.search(r"\b(?:function|tool) (\w+)\(", self.asks_for)
        if self.kind == "function" and found:
            return f"{found.group(1)}()"
        return {"scorer": "scorer", "model": "model function", "tool": "tool"}.get(self.kind, self.kind)

    @property
    def count(self) -> int:
        """How many scenarios a check runs."""
        return len(self.draw(0))

    def hint(self) -> Hint:
        """The next hint (each call gives one more); after the last, the reference solution."""
        if self._hints_given >= len(self.hints):
            if self.reference:
                return Hint(f"No more hints for {self.name}; here is the reference solution "
                            f"(`exercise({self.name!r}).solution()` shows it again):\n\n```python\n"
                            f"{self.reference}\n```")
            return Hint(f"No more hints for {self.name} ({len(self.hints)} given). "
                        "Read the failing scenario's reason and transcript.")
        self._hints_given += 1
        return Hint(f"({self._hints_given}/{len(self.hints)}) {self.hints[self._hints_given - 1]}")

    def solution(self) -> Solution:
        """The reference solution, as a cell you can run (asked for on purpose: the course never shows it
        unasked)."""
        if not self.reference:
            return Solution(f"# exercise {self.name} has no reference solution")
        return Solution(self.reference)

    def markdown(self) -> str:
        n = self.count
        return (f"### Exercise `{self.name}`: {self.title}\n\n{self.instructions.strip()}\n\n"
                f"*Asks for {self.asks_for or 'a ' + self.kind}; checked in {n} scenario{'s' if n != 1 else ''}, "
                f"with new values at every check; about {self.minutes} min. "
                f"`check(exercise({self.name!r}), solution)` checks it; `.hint()` gives a hint.*")

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"Exercise({self.name!r}: {self.title}; asks for {self.asks_for or self.kind})"
