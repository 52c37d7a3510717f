"""Exercise on forks: fork a session once per candidate, compare the branches, and keep the best.

The candidates are made so that no shortcut picks the right one: their names say nothing, the right
one is neither the first nor the last in every scenario, nor the longest, the shortest, the one with the
most steps or the first that used a tool, and a wrong answer contains the right number's digits (``120``
beside ``12``). Only comparing each branch's answer, as a number, with what the question asks works.
"""

from __future__ import annotations

import random
from typing import Any

from ...agent import Agent
from ...core import RunStatus
from ...models import Reply, ScriptedModel
from ...storage.base import Repository, iter_events
from ..exercise import Exercise, Scenario, Trial, judged
from ..running import run_agent
from ..values import shown_number, unstated
from .judging import calculator

_NAMES = ["ada", "bo", "cyd", "dee", "eli", "fay", "gus", "hal", "ivo", "jun", "kit", "lou"]


def _question(p: int, n: int) -> str:
    return f"What is {p}% of {n}?"


def candidates(kinds: list[str], p: int, n: int, names: list[str]) -> dict[str, Agent]:
    """The agents to try, by name: ``careful`` computes; ``guesser`` says a long, confident guess whose
    number holds the right one's digits; ``sloppy`` uses the calculator twice and reports the wrong
    product; ``blunt`` answers a bare number one too small (the shortest answer, the smallest number);
    ``remainder`` computes what is left (``n`` less the share), shaped like the right answer and, like it,
    less than ``n``."""
    right = p * n / 100
    shown = shown_number(right)
    scripts = {
        "careful": [Reply.call("calculator", expression=f"{p / 100:g} * {n}"), f"{p}% of {n} is {shown}."],
        "guesser": [f"Roughly speaking, {p}% is a small share, so {p}% of {n} should come to about "
                    f"{shown_number(right * 10) if right.is_integer() else shown + '1'}, give or take a little; I did "
                    "this in my head."],
        "sloppy": [Reply.call("calculator", expression=f"{p} * {n}"), Reply.call("calculator", expression=f"{p} * {n}"),
                   f"{p}% of {n} is {shown_number(p * n)}."],
        "blunt": [f"{shown_number(right - 1)}."],
        "remainder": [Reply.call("calculator", expression=f"{n} - {p / 100:g} * {n}"),
                      f"{p}% of {n} is {shown_number(n - right)}."],
    }
    return {name: Agent(model=ScriptedModel(scripts[kind], loop=True), tools=[calculator] if kind in
                        ("careful", "sloppy", "remainder") else [], name=name) for kind, name in zip(kinds, names)}


async def drive(choose: Any, scenario: Scenario, repository: Repository) -> Trial:
    """A session whose first answer was wrong, then ``choose(session_id, candidates, repository)``."""
    p, n = scenario.data["p"], scenario.data["n"]
    first_agent = Agent(model=ScriptedModel([f"{p}% of {n} is {shown_number(p + n)}."]), name="first")
    first = await run_agent(first_agent, scenario, repository, watch=choose.watch)
    tried = candidates(scenario.data["kinds"], p, n, scenario.data["names"])
    names = list(tried)  # the check's own list: a choose() that empties the dict it was given is judged all the same
    chosen = await choose(first.run.session_id, tried, repository)
    run = repository.get_run(chosen) if isinstance(chosen, str) else None
    steps = ([] if run is None else
             [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run.id])
    events = [] if run is None else list(iter_events(repository, run.id))
    forks = [s.session_id for s in repository.list_sessions() if s.forked_from == first.run.session_id]
    return Trial(run, steps, events, chosen, repository,  # type: ignore[arg-type]
                 {"session_id": first.run.session_id, "forks": forks, "candidates": names}, choose.watch)


def _tried(trial: Trial) -> list[str]:
    """The agents whose branch exists: a fork of the session with a run."""
    repository = trial.repository
    names = []
    for session in trial.context["forks"]:
        for run in repository.list_runs(session) if repository else []:
            if run.agent_name and run.agent_name not in names:
                names.append(run.agent_name)
    return names


def _chose_right(p: int, n: int) -> Any:
    right = p * n / 100

    def why(trial: Trial) -> str | None:
        value = trial.value
        if trial.run is None:
            if hasattr(value, "run_id"):
                return (f"choose() returned a {type(value).__name__}, not a run id: return the run id of the branch "
                        "you keep (result.run_id)")
            return (f"choose() returned {value!r}, not the id of a run in the store: return the run id of the branch "
                    "you keep (result.run_id)")
        if trial.run.session_id not in trial.context["forks"]:
            return (f"run {str(value)[:8]} is not in a fork of the session: fork it with "
                    "await StepRunner(agent, repository=repository).fork(session_id, 1)")
        wanted = list(trial.context["candidates"])
        tried = _tried(trial)
        if len([w for w in wanted if w in tried]) < len(wanted):
            return (f"only {len([w for w in wanted if w in tried])} of {len(wanted)} candidates were tried "
                    f"({', '.join(tried) or 'none'}): fork once per candidate, then compare the branches")
        if len(trial.context["forks"]) > len(wanted):
            return (f"you forked the session {len(trial.context['forks'])} times for {len(wanted)} candidates: fork "
                    "once per candidate (one branch each), then compare the branches")
        if trial.run.status is not RunStatus.COMPLETED:
            return f"you kept a branch whose run did not complete ({trial.run.status.value})"
        if unstated(trial.final_text, right, besides=(p, n)) is not None:
            return (f"you kept {trial.run.agent_name}'s branch, which answered {trial.final_text!r}; another branch "
                    f"answered {shown_number(right)}, which is right: score each branch by comparing its answer, as a "
                    f"number, with the answer to the question (not by name, length, steps or tool use)")
        return None
    return why


def _exact(p: int, n: int) -> bool:
    """The share is the same number however it is worked out in floats (p * n / 100, p / 100 * n, ...)."""
    return len({p * n / 100, p / 100 * n, n * p / 100, p * 0.01 * n, n / 100 * p}) == 1


def _scenarios(rng: random.Random) -> list[Scenario]:
    out = []
    layouts = [("a long guess first", ["guesser", "careful"], False),
               ("a terse answer first", ["blunt", "remainder", "careful"], False),
               ("four candidates", ["sloppy", "remainder", "careful", "blunt"], True)]
    fractional = rng.randrange(len(layouts))  # one answer has a decimal part (15% of 90 is 13.5) at every check
    for i, (name, kinds, variant) in enumerate(layouts):
        p = rng.choice([5, 10, 15, 20, 25, 30, 35, 40, 45, 60, 75])
        # never n = 100: the percentage would be the answer, and every branch's text repeats the question's numbers
        n = rng.choice([x for x in range(20, 400, 2) if p * x // 100 >= 3 and x != 100 and (
            p * x % 100 != 0 and p * x % 10 == 0 and _exact(p, x) if i == fractional else p * x % 100 == 0)])
        names = rng.sample(_NAMES, len(kinds))
        out.append(Scenario(name, _question(p, n), variant=variant, data={"p": p, "n": n, "kinds": kinds,
                                                                            "names": names},
                            describe=f"{_question(p, n)} was answered wrongly; candidates {', '.join(names)} "
                                     f"(the right answer is {shown_number(p * n / 100)})",
                            expect=[judged(_chose_right(p, n), "keeps a right branch")]))
    return out


FORK_COMPARE_CHOOSE = Exercise(
    name="fork_compare_choose", title="Fork, compare and choose", kind="function", arity=3,
    asks_for="a function choose(session_id, candidates, repository) returning a run id", minutes=20, drive=drive,
    instructions="""
A session's agent answered a question like *What is 15% of 80?* wrongly. Write `choose(session_id,
candidates, repository)` (it may be `async`): fork the session at its question (step 1) once per
candidate agent (`await StepRunner(agent, repository=repository).fork(session_id, 1)`), compare the
branches, and return the `run_id` of a branch whose answer is right. `candidates` is a dict of name →
`Agent`.

To compare, score each branch: read the question from the session (its first step), work out the right
number (it may have a decimal part: 15% of 90 is 13.5), and compare each answer's numbers with it *as numbers* (`12` is not in `120`). The candidates'
names, order and questions change at every check and say nothing about which is right; one scenario has
more candidates than these instructions show.
""",
    hints=["`result = await StepRunner(agent, repository=repository).fork(session_id, 1)` answers the "
           "question again in a new session; `result.final_text` and `result.run_id` are what you compare.",
           "`repository.get_steps(session_id)[0].content` is the question; `re.findall(r'\\d+', ...)` its numbers.",
           "Keep a branch whose answer contains the right number as a whole number: "
           "`right in [float(x) for x in re.findall(r'-?\\d+(?:\\.\\d+)?', result.final_text)]`."],
    starter='''from agio_notebook import StepRunner
from agio_notebook.exercises import check, exercise

async def choose(session_id, candidates, repository):
    results = {}
    for name, agent in candidates.items():
        ...  # fork the session at step 1 with this agent
    ...  # score each branch, and return the run_id of a right one

check(exercise("fork_compare_choose"), choose)''',
    scenarios=_scenarios)
