"""Agents served by `agio mcp serve --agents agio_agents:team` in the serving tests: offline, deterministic."""

from __future__ import annotations

from agio_notebook import Agent, FunctionModel, Reply, tool

NOTES = {"tides": "Tides come from the Moon's pull.", "bees": "Bees dance to share where flowers are."}


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the notes."""
    return NOTES.get(topic.strip().lower(), f"nothing on {topic}")


def _research(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"Found: {messages[-1]['content']}"
    return Reply.call("lookup", topic=messages[-1]["content"])


researcher = Agent(model=FunctionModel(_research, name="research-script"), tools=[lookup], name="researcher",
                   system_prompt="You look topics up in the notes.")
writer = Agent(model=FunctionModel(lambda m, t: "Draft: " + (m[-1]["content"] or ""), name="write-script"),
               name="writer", system_prompt="You write one sentence.")
team = [researcher, writer]


def _plan(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"Plan: {messages[-1]['content']}"
    return Reply.call("researcher", query=messages[-1]["content"])


planner = Agent(model=FunctionModel(_plan, name="plan-script"), tools=[researcher], name="planner",
                description="Plans with the researcher's help.")

billing = Agent(model=FunctionModel(lambda m, t: f"billing here: {m[-1]['content']}", name="billing-script"),
                name="billing", description="refunds and invoices")


def _triage(messages, tools):
    last = messages[-1]
    if last["role"] == "user" and "refund" in (last["content"] or ""):
        return Reply.call("transfer_to_billing", reason="a refund")
    return "triage here"


triage = Agent(model=FunctionModel(_triage, name="triage-script"), name="triage", handoffs=[billing])
stranger = Agent(model=FunctionModel(lambda m, t: "stranger here", name="stranger-script"), name="stranger")
composed = [planner, triage]
