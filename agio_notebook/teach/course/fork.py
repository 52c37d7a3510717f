"""Exercise on forks: fork a session once per candidate, compare the branches, and keep the best."""

from __future__ import annotations

from typing import Any

from ...agent import Agent
from ...models import Reply, ScriptedModel
from ...storage.base import Repository, iter_events
from ..exercise import Exercise, Scenario, Trial, expect
from ..running import call_solution, run_agent
from .judging import calculator

QUESTION = "What is 15% of 80?"


def candidates(order: tuple[str, ...]) -> dict[str, Agent]:
    """The agents to try: a hasty one that guesses, and a careful one that computes."""
    made = {"hasty": Agent(model=ScriptedModel(["It's about 10."], loop=True), name="hasty"),
            "careful": Agent(model=ScriptedModel([Reply.call("calculator", expression="0.15 * 80"),
                                                  "15% of 80 is 12."], loop=True),
                             tools=[calculator], name="careful")}
    return {name: made[name] for name in order}


async def drive(choose: Any, scenario: Scenario, repository: Repository) -> Trial:
    """A session whose first answer was wrong, then ``choose(session_id, candidates, repository)``."""
    first = await run_agent(Agent(model=ScriptedModel(["15% of 80 is 15."]), name="first"), scenario, repository)
    tried = candidates(scenario.data["order"])
    chosen = await call_solution(choose, first.run.session_id, tried, repository, what="choose()")
    run = repository.get_run(chosen) if isinstance(chosen, str) else None
    steps = ([] if run is None else
             [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run.id])
    events = [] if run is None else list(iter_events(repository, run.id))
    forks = [s.session_id for s in repository.list_sessions() if s.forked_from == first.run.session_id]
    return Trial(run, steps, events, chosen, repository,  # type: ignore[arg-type]
                 {"session_id": first.run.session_id, "forks": forks, "candidates": len(tried)})


def _is_run(trial: Trial) -> bool:
    return trial.run is not None


def _is_fork(trial: Trial) -> bool:
    return trial.run is not None and trial.run.session_id in trial.context["forks"]


def _tried(trial: Trial) -> int:
    return sum(1 for s in trial.context["forks"] if trial.repository and trial.repository.list_runs(s))


def _why_not_run(trial: Trial) -> str:
    return (f"choose() returned {trial.value!r}, not the id of a run in the store: return the run id of the branch "
            "you keep (result.run_id)")


def _why_not_fork(trial: Trial) -> str:
    return (f"run {trial.value!r} is not in a fork of the session: fork it with "
            "await StepRunner(agent, repository=repository).fork(session_id, 1)")


def _why_not_all(trial: Trial) -> str:
    return (f"only {_tried(trial)} of {trial.context['candidates']} candidates were tried: fork once per candidate, "
            "then compare the branches")


def _why_worse(trial: Trial) -> str:
    return (f"you kept the branch that answered {trial.final_text!r}; another branch answered 12: score the "
            "branches (e.g. scoring.regex or called_before_answer) and keep the best")


def _order(name: str, order: tuple[str, ...]) -> Scenario:
    return Scenario(name, QUESTION, data={"order": order},
                    describe=f"the first answer said 15; candidates in the order {', '.join(order)}",
                    expect=[expect(_is_run, _why_not_run, name="a run id"),
                            expect(_is_fork, _why_not_fork, name="a fork"),
                            expect(lambda t: _tried(t) >= t.context["candidates"], _why_not_all, name="all tried"),
                            expect(lambda t: "12" in t.final_text, _why_worse, name="the best branch")])


FORK_COMPARE_CHOOSE = Exercise(
    name="fork_compare_choose", title="Fork, compare and choose", kind="function", arity=3,
    asks_for="a function choose(session_id, candidates, repository) returning a run id", minutes=20, drive=drive,
    instructions="""
A session's agent answered *What is 15% of 80?* with 15. Write `choose(session_id, candidates,
repository)` (it may be `async`): fork the session at its question (step 1) once per candidate agent
(`await StepRunner(agent, repository=repository).fork(session_id, 1)`), compare the branches, and
return the `run_id` of the best one. `candidates` is a dict of name → `Agent`.
""",
    hints=["`result = await StepRunner(agent, repository=repository).fork(session_id, 1)` answers the "
           "question again in a new session; `result.final_text` and `result.run_id` are what you compare.",
           "`agio_notebook.diff(a, b, repository=repository)` shows two branches side by side.",
           "Score each branch (a scorer, or `'12' in result.final_text`) and return the best run id."],
    starter='''from agio_notebook import StepRunner
from agio_notebook.exercises import check, exercise

async def choose(session_id, candidates, repository):
    results = {}
    for name, agent in candidates.items():
        ...  # fork the session at step 1 with this agent
    ...  # compare, and return the run_id of the best branch

check(exercise("fork_compare_choose"), choose)''',
    scenarios=[_order("hasty first", ("hasty", "careful")), _order("careful first", ("careful", "hasty"))])
