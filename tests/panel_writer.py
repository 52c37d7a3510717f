"""Subprocess for the Runs panel's tests: the engine writing runs to a store (a path or URL), offline.

    python panel_writer.py STORE seed                 runs of two agents: adder (a run and its retry), greeter (failed)
    python panel_writer.py STORE one AGENT QUERY      one run; prints "<run id> <time its last commit returned>"
    python panel_writer.py STORE hold AGENT QUERY F   one run whose tool waits until file F exists

``JPY_SESSION_NAME`` names the notebook the runs say they come from, as a kernel's would.
"""

import asyncio
import os
import sys
import time

from agio_notebook import Agent, FunctionModel, Reply, StepRunner, tool
from agio_notebook.storage import new_repository

HOLD = None


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    while HOLD is not None and not os.path.exists(HOLD):
        await asyncio.sleep(0.02)
    return a + b


def adding(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.call("add", a=2, b=3)
    return f"the sum is {messages[-1]['content']}"


def refusing(messages, tools):
    raise RuntimeError("the greeter's model is down")


def agent(name: str) -> Agent:
    return Agent(name=name, model=FunctionModel(refusing if name == "greeter" else adding), tools=[add])


async def main() -> None:
    global HOLD
    store, mode = sys.argv[1], sys.argv[2]
    repo = new_repository(store)
    if mode == "seed":
        adder = StepRunner(agent("adder"), repository=repo)
        first = await adder.run(None, "add two and three")
        await adder.retry(first.run_id)
        await StepRunner(agent("greeter"), repository=repo).run(None, "say hello to Ada")
    else:
        name, query = sys.argv[3], sys.argv[4]
        if mode == "hold":
            HOLD = sys.argv[5]
        result = await StepRunner(agent(name), repository=repo).run(None, query)
        print(result.run_id, time.time(), flush=True)
    repo.close()


if __name__ == "__main__":
    asyncio.run(main())
