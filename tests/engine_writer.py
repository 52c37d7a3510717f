"""Subprocess for crash and claim tests: the engine running queries in one session.

Prints ``<kind> <step id>`` as soon as each ``step_completed`` is delivered (kinds: user, call, tool,
final), and ``run <id>`` when a run starts. ``die:<kind>`` kills the process with SIGKILL right after
the first step of that kind is delivered; ``loop`` runs queries until killed; ``slow`` makes each tool
take a while (so a second process meets a run in progress); ``hold:<path>`` makes each tool wait
until ``<path>`` exists (a run in progress for as long as the test needs, however busy the machine).
"""

import asyncio
import os
import signal
import sys

from agio_notebook import Agent, ExecutionConfig, FunctionModel, Reply, StepRunner, tool
from agio_notebook.core import SessionBusyError, StepEventType
from agio_notebook.storage import new_repository

SLOW = 0.0
HOLD: str | None = None


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    if SLOW:
        await asyncio.sleep(SLOW)
    while HOLD is not None and not os.path.exists(HOLD):
        await asyncio.sleep(0.02)
    return a + b


def reply(messages, tools):
    last = messages[-1]
    if last["role"] == "user":
        return Reply.call("add", a=len(messages), b=1)
    return f"done after {len(messages)} messages"


def kind_of(step: dict) -> str:
    if step["role"] == "assistant":
        return "call" if step.get("tool_calls") else "final"
    return step["role"]


async def main() -> None:
    global SLOW, HOLD
    root, session, mode, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])  # root: a path or URL
    wait = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    if mode == "slow":
        SLOW = 0.3
    if mode.startswith("hold:"):
        HOLD = mode.split(":", 1)[1]
    die = mode.split(":", 1)[1] if mode.startswith("die:") else None
    config = ExecutionConfig(session_wait=wait)
    runner = StepRunner(Agent(model=FunctionModel(reply), tools=[add], config=config),
                        repository=new_repository(root))
    for i in range(count):
        try:
            async for event in runner.run_stream(session, f"query {i}"):
                if event.type is StepEventType.RUN_STARTED:
                    print(f"run {event.run_id}", flush=True)
                elif event.type is StepEventType.STEP_COMPLETED:
                    step = event.payload["step"]
                    kind = kind_of(step)
                    print(f"{kind} {step['id']} {step['sequence']}", flush=True)
                    if kind == die:
                        os.kill(os.getpid(), signal.SIGKILL)
        except SessionBusyError as exc:
            print(f"busy {exc}", flush=True)
            sys.exit(3)


if __name__ == "__main__":
    asyncio.run(main())
