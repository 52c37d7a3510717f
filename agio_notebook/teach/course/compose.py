"""Exercise on composing agents: a model that delegates the question to a researcher agent given as a tool."""

from __future__ import annotations

from typing import Any

from ...agent import Agent
from ...core import ExecutionConfig, RunStatus, StepRole
from ...models import FunctionModel, Reply
from ...tools import tool
from ..exercise import Exercise, Scenario, Trial, expect
from .messages import last_user, tool_results

NOTES = {"owls": "owls hunt at night and turn their heads 270 degrees",
         "bats": "bats find their way by echolocation",
         "foxes": "foxes hear a watch ticking 40 metres away"}


@tool
def search_notes(topic: str) -> str:
    """Look a topic up in the field notes.

    Args:
        topic: one of the topics of the notes: owls, bats or foxes.
    """
    return NOTES[topic]


def researcher_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Looks up the topic its query names, then answers with the fact; a query without a topic gets a
    'nothing found' answer, as a real researcher's would."""
    query = last_user(messages)
    found = tool_results(messages)
    if found:
        return found[-1]
    topic = next((t for t in NOTES if t in query.lower()), None)
    if topic is None:
        return f"I found nothing for {query!r}: ask about a topic of the notes (owls, bats, foxes)."
    return Reply.call("search_notes", topic=topic)


def researcher() -> Agent:
    """The agent the learner's planner calls as a tool (the tool is named ``researcher``)."""
    return Agent(model=FunctionModel(researcher_model), tools=[search_notes], name="researcher",
                 description="looks facts up in the field notes; query: the question or its topic")


def nested_runs(trial: Trial) -> list[Any]:
    """The researcher's stored runs, one per call, from the links the outer tool steps keep."""
    if trial.repository is None:
        return []
    links = [s.extra.get("nested_run") for s in trial.steps if s.role is StepRole.TOOL and s.name == "researcher"]
    return [trial.repository.get_run(link["run_id"]) for link in links if link and link.get("run_id")]


def _queries(trial: Trial) -> list[str]:
    names = trial.tool_path
    return [str(args.get("query", "")) for name, args in zip(names, trial.tool_arguments) if name == "researcher"]


def _hit_limit(trial: Trial) -> bool:
    return trial.run is not None and trial.run.status is RunStatus.MAX_STEPS


def _why_not_delegated(topic: str, fact: str) -> Any:
    def why(trial: Trial) -> str:
        path, queries, nested = trial.tool_path, _queries(trial), nested_runs(trial)
        if _hit_limit(trial):
            return (f"your model kept calling tools until max_steps ({len(path)} calls of {sorted(set(path))}): "
                    "once the researcher's answer is in (the last message has role 'tool'), answer with text")
        if not path:
            return ("your model answered without asking the researcher: on the first turn return "
                    "Reply.call('researcher', query=...) with the question")
        if path != ["researcher"]:
            return f"your model called {path}; call the researcher once, then answer"
        if topic not in queries[0].lower():
            return (f"you asked the researcher {queries[0]!r}, which does not name {topic}: pass the question "
                    "(or its topic) as query")
        if not nested or nested[0] is None or nested[0].status is not RunStatus.COMPLETED:
            status = nested[0].status.value if nested and nested[0] is not None else "never stored"
            return f"the researcher's nested run did not complete ({status})"
        return (f"your model answered {trial.final_text!r}, which does not contain what the researcher found "
                f"({fact!r}): answer with the tool's result (the content of the last message)")
    return why


def _delegated(topic: str, fact: str) -> Any:
    def holds(trial: Trial) -> bool:
        nested = nested_runs(trial)
        return (trial.tool_path == ["researcher"] and topic in _queries(trial)[0].lower() and len(nested) == 1
                and nested[0] is not None and nested[0].status is RunStatus.COMPLETED
                and fact in (nested[0].final_text or "") and fact in trial.final_text)
    return holds


def _asks(query: str, topic: str) -> Scenario:
    fact = NOTES[topic]
    return Scenario(topic, query, tools=[researcher()], config=ExecutionConfig(max_steps=4, enable_retry=False),
                    describe=f"{query} (expects the researcher asked about {topic}, then its answer)",
                    expect=[expect(_delegated(topic, fact), _why_not_delegated(topic, fact),
                                   name="delegates, then answers")])


DELEGATE_TO_AGENT = Exercise(
    name="delegate_to_agent", title="Delegate a question to an agent used as a tool", kind="model",
    asks_for="a model function fn(messages, tools)", minutes=15,
    instructions="""
An agent can be another agent's tool: `Agent(tools=[researcher])` gives the outer model a tool named
`researcher` that takes a `query`; calling it runs the researcher's own loop in a nested run, and its
final answer comes back as the tool's result. Write the planner's model function: on the first turn,
ask the researcher (`Reply.call("researcher", query=...)`) with the learner's question; once its answer
is in (the last message has role `tool`), answer with it.
""",
    hints=["`messages[-1]['role']` is 'user' on your first turn and 'tool' once the researcher has answered.",
           "The researcher sees only the query you pass, not your conversation: pass the question itself.",
           "First turn: `return Reply.call('researcher', query=messages[-1]['content'])`; after it: "
           "`return messages[-1]['content']`"],
    starter='''from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def planner(messages, tools):
    ...  # ask the researcher, then answer with what it found

check(exercise("delegate_to_agent"), planner)''',
    scenarios=[_asks("What do owls do at night?", "owls"), _asks("Tell me something about foxes.", "foxes")])
