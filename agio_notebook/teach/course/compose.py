"""Exercise on composing agents: a model that delegates the question to a researcher agent given as a tool."""

from __future__ import annotations

import random
from typing import Any

from ...agent import Agent
from ...core import ExecutionConfig, RunStatus, StepRole
from ...models import FunctionModel, Reply
from ...tools import Tool, tool
from ..exercise import Exercise, Scenario, Trial, judged
from ..values import unstated, words
from .messages import last_user, tool_results
from .probe import follows_the_tool

# topic -> (the word forms a question may use, a fact with a number in it, the number's range)
FACTS = {"owls": (("owl", "owls"), "owls turn their heads up to {n} degrees", (250, 290)),
         "bats": (("bat", "bats"), "a bat eats up to {n} insects in an hour", (500, 1200)),
         "foxes": (("fox", "foxes"), "foxes hear a watch ticking {n} metres away", (30, 60)),
         "bees": (("bee", "bees"), "a bee visits about {n} flowers on one trip", (50, 100)),
         "whales": (("whale", "whales"), "a blue whale's heart beats {n} times a minute when it dives", (2, 10)),
         "ants": (("ant", "ants"), "an ant can lift {n} times its own weight", (10, 50)),
         "penguins": (("penguin", "penguins"), "emperor penguins dive down to {n} metres", (400, 560)),
         "octopuses": (("octopus", "octopuses"), "an octopus arm has about {n} suckers", (200, 280))}


def topic_of(text: str) -> str | None:
    said = set(words(text))
    return next((t for t, (forms, _, _) in FACTS.items() if said & set(forms)), None)


def search_tool(notes: dict[str, str]) -> Tool:
    def search_notes(topic: str) -> str:
        """Look a topic up in the field notes.

        Args:
            topic: a topic of the notes, e.g. owls.
        """
        found = topic_of(topic)
        if found is None or found not in notes:
            raise ValueError(f"no notes about {topic!r}; the notes cover {', '.join(notes)}")
        return notes[found]
    return tool(search_notes)


def researcher_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Looks up the topic its query names, then answers with the fact; a query without a topic gets a
    'nothing found' answer, as a real researcher's would."""
    query = last_user(messages)
    found = tool_results(messages)
    if found:
        return found[-1]
    topic = topic_of(query)
    if topic is None:
        return f"I found nothing for {query!r}: ask about a topic of the notes."
    return Reply.call("search_notes", topic=topic)


def researcher(notes: dict[str, str]) -> Agent:
    """The agent the learner's planner calls as a tool (the tool is named ``researcher``)."""
    return Agent(model=FunctionModel(researcher_model), tools=[search_tool(notes)], name="researcher",
                 description="looks facts up in the field notes; query: the question or its topic")


def nested_runs(trial: Trial) -> list[Any]:
    """The researcher's stored runs, one per call, from the links the outer tool steps keep."""
    if trial.repository is None:
        return []
    links = [s.extra.get("nested_run") for s in trial.steps if s.role is StepRole.TOOL and s.name == "researcher"]
    return [trial.repository.get_run(link["run_id"]) for link in links if link and link.get("run_id")]


def _hit_limit(trial: Trial) -> bool:
    return trial.run is not None and trial.run.status is RunStatus.MAX_STEPS


def _delegated(topic: str, number: int) -> Any:
    def why(trial: Trial) -> str | None:
        calls = trial.calls
        path = [name for name, _ in calls]
        nested = nested_runs(trial)
        if _hit_limit(trial):
            return (f"your model kept calling tools until max_steps ({len(path)} calls of {sorted(set(path))}): once "
                    "the researcher's answer is in (the last message has role 'tool'), answer with text")
        if not path:
            return ("your model answered without asking the researcher: on the first turn return "
                    "Reply.call('researcher', query=...) with the question")
        if path != ["researcher"]:
            return f"your model called {path}; call the researcher once, then answer"
        query = str(calls[0][1].get("query", ""))
        if topic_of(query) != topic:
            return (f"you asked the researcher {query!r}, which does not name {topic}: pass the question (or its "
                    "topic) as query")
        if not nested or nested[0] is None or nested[0].status is not RunStatus.COMPLETED:
            status = nested[0].status.value if nested and nested[0] is not None else "never stored"
            return f"the researcher's nested run did not complete ({status})"
        fact = nested[0].final_text or ""
        if (problem := unstated(trial.final_text, number)) is not None:
            said = "does not say what the researcher found" if problem.startswith("does not say") else problem
            return (f"your model answered {trial.final_text!r}, which {said} ({fact!r}): answer with the tool's "
                    "result (the content of the last message), and nothing against it")
        return None
    return why


def _follows(topic: str, other: int) -> Any:
    return follows_the_tool(FACTS[topic][1].format(n=other), other, "the researcher")


def _scenarios(rng: random.Random) -> list[Scenario]:
    topics = rng.sample(list(FACTS), 4)
    notes = {}
    drawn = {}
    for t in FACTS:
        low, high = FACTS[t][2]
        drawn[t] = rng.randrange(low, high)
        notes[t] = FACTS[t][1].format(n=drawn[t])
    config = ExecutionConfig(max_steps=4, tool_timeout=5.0, first_token_timeout=5.0, enable_retry=False)

    def scenario(name: str, query: str, topic: str, variant: bool = False) -> Scenario:
        low, high = FACTS[topic][2]
        other = next(n for n in range(low, high + 200) if n != drawn[topic] and abs(n - drawn[topic]) > 1
                     and str(drawn[topic]) not in str(n))
        return Scenario(name, query, tools=[researcher(notes)], config=config, variant=variant,
                        describe=f"{query} (expects the researcher asked about {topic}, then its answer)",
                        expect=[judged(_delegated(topic, drawn[topic]), "delegates, then answers")],
                        probe=_follows(topic, other))

    singular = FACTS[topics[2]][0][0]
    return [scenario(topics[0], f"What do you know about {topics[0]}?", topics[0]),
            scenario(topics[1], f"Tell me something about {topics[1]}.", topics[1]),
            scenario("asked another way", f"I'm curious: is there anything odd about the {singular}?", topics[2],
                     variant=True)]


DELEGATE_TO_AGENT = Exercise(
    name="delegate_to_agent", title="Delegate a question to an agent used as a tool", kind="model",
    asks_for="a model function fn(messages, tools)", minutes=15,
    instructions="""
An agent can be another agent's tool: `Agent(tools=[researcher])` gives the outer model a tool named
`researcher` that takes a `query`; calling it runs the researcher's own loop in a nested run, and its
final answer comes back as the tool's result. Write the planner's model function: on the first turn,
ask the researcher (`Reply.call("researcher", query=...)`) with the learner's question; once its answer
is in (the last message has role `tool`), answer with it. The topics and facts change at every check;
the check also asks your function once more with another answer from the researcher, which your answer
must follow.
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
    scenarios=_scenarios)
