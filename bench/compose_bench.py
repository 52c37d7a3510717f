"""An agent called as a tool against a plain ``@tool`` whose function runs the same inner agent directly.

Both outer runs are the same: one tool call, then an answer; the inner agent answers in one model
call. The agent tool adds what nesting costs (the parent links on the runs and the tool step, the
inner events forwarded into the outer stream with their path, the shared budget); the plain tool runs
the inner agent as a run of its own with none of that. Same store kind for both (in memory, and the
default TinyDB files). Prints a table: ms per outer run, p50 and p95, and the ratio (target ≤ 1.2×).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time

from agio_notebook import Agent, FunctionModel, StepRunner, tool
from agio_notebook.models.scripted import Reply, call
from agio_notebook.storage import InMemoryRepository, new_repository

N = 150


def outer_brain(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.calls(call("ask", query="what is 6 x 7?"))
    return f"the researcher says: {messages[-1]['content']}"


def inner_brain(messages, tools):
    return "42"


def agents(repository):
    inner = Agent(model=FunctionModel(inner_brain), name="researcher")

    @tool
    async def ask(query: str) -> str:
        """Ask the researcher."""
        return (await StepRunner(inner, repository=repository).run(None, query)).final_text or ""

    nested = Agent(model=FunctionModel(outer_brain), tools=[inner.as_tool(name="ask")], name="planner")
    plain = Agent(model=FunctionModel(outer_brain), tools=[ask], name="planner")
    return nested, plain


async def timed(agent: Agent, repository, n: int) -> list[float]:
    runner = StepRunner(agent, repository=repository)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await runner.run(None, "ask the researcher")
        samples.append((time.perf_counter() - t0) * 1000.0)
        assert result.final_text == "the researcher says: 42", result.final_text
    return sorted(samples)


def main() -> None:
    print(f"{'store':<10}{'tool':<22}{'p50 ms':>10}{'p95 ms':>10}{'x plain':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, repository in (("memory", InMemoryRepository()), ("tinydb", new_repository(f"{tmp}/store"))):
            nested, plain = agents(repository)
            rows = {}
            for _ in range(2):  # interleaved rounds, the first one a warm-up
                for name, agent in (("plain @tool", plain), ("agent as tool", nested)):
                    rows[name] = asyncio.run(timed(agent, repository, N if _ else 10))
            base = statistics.median(rows["plain @tool"])
            for name, samples in rows.items():
                p50 = statistics.median(samples)
                print(f"{label:<10}{name:<22}{p50:>10.2f}{samples[int(0.95 * len(samples)) - 1]:>10.2f}"
                      f"{p50 / base:>10.2f}")


if __name__ == "__main__":
    main()
