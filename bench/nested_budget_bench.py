"""How far past the outermost budget a tree of nested runs spends: one nested branch, 8 in parallel, with
and without model latency. Each nested agent reads a long document page after page (its prompt grows with
every page, counted as a real model's usage is), until the tree's budget stops it.

Prints tokens the whole tree spent, against the outermost ``max_tokens``, and the ratio (target ≤ 1.05×),
and, beside it, what the same tree spends with no budget at all.
"""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, StepRunner, tool
from agio_notebook.models.scripted import call
from agio_notebook.storage import InMemoryRepository

BUDGETS = (1000, 4000, 10000)


def tree(width: int, delay: float) -> Agent:
    @tool
    def fetch(page: int) -> str:
        """A page of a long document."""
        return f"page {page}: " + "lorem ipsum dolor sit amet " * 60

    async def reader(messages, tools):
        if delay:
            await asyncio.sleep(delay)
        pages = sum(m["role"] == "tool" for m in messages)
        return Reply.call("fetch", page=pages + 1) if pages < 12 else "I read it all."

    inner = Agent(model=FunctionModel(reader, name="reader"), tools=[fetch], name="reader")

    def planner(messages, tools):
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=[call("reader", query=f"part {i}") for i in range(width)])
        return "done"

    return Agent(model=FunctionModel(planner, name="planner"), tools=[inner], name="planner")


def spent(repo: InMemoryRepository, run_id: str) -> int:
    return sum((d.get("metrics") or {}).get("total_tokens") or 0 for d in repo.iter_run_dicts()
               if d["id"] == run_id or d.get("root_run_id") == run_id)


def main() -> None:
    print(f"{'branches':>8} {'latency':>8} {'max_tokens':>10} {'spent':>7} {'ratio':>6} {'unlimited':>9}")
    worst = 0.0
    for width, delay in ((1, 0.0), (8, 0.0), (8, 0.02)):
        for budget in BUDGETS:
            repo = InMemoryRepository()
            agent = tree(width, delay)
            limited = StepRunner(agent, config=ExecutionConfig(max_tokens=budget), repository=repo).run_sync(None, "go")
            free = StepRunner(agent, repository=repo).run_sync(None, "go")
            used = spent(repo, limited.run_id)
            worst = max(worst, used / budget)
            print(f"{width:>8} {delay * 1000:>6.0f}ms {budget:>10} {used:>7} {used / budget:>5.2f}x "
                  f"{spent(repo, free.run_id):>9}")
    print(f"worst: {worst:.2f}x the outermost budget (target <= 1.05x)")


if __name__ == "__main__":
    main()
