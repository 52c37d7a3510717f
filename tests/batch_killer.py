"""Subprocess for batch crash tests: run a 4-item batch and SIGKILL itself at a named moment.

Moments (picked by hooks, never by timing):
- ``first-record``: as the first execution record is about to be written;
- ``completion``: as the first item whose run completed is about to be recorded completed;
- ``mid-run``: inside the model call of item 2 (its run started, it never finishes).

The records' periodic flush is off (``flush_interval`` of an hour), so what is durable at the kill
is exactly what the batch makes durable on its own.
"""

import os
import signal
import sys

from agio_notebook import Agent, ExecutionConfig, FunctionModel
from agio_notebook.scheduling import ExecStatus, ExecutionStore, Executor, batch
from agio_notebook.scheduling import executor as executor_module
from agio_notebook.storage import TinyDBRepository


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    root, moment = sys.argv[1], sys.argv[2]

    def reply(messages, tools):
        asked = [m["content"] for m in messages if m["role"] == "user"]
        print("model saw", asked, flush=True)
        if moment == "mid-run" and asked[-1] == "item 2":
            die()
        return f"echo: {asked[-1]}"

    if moment == "first-record":
        write = ExecutionStore._write

        def write_then_die(self, batch_name, records):
            if any(table == "executions" for table, _ in records):
                die()
            return write(self, batch_name, records)

        ExecutionStore._write = write_then_die
    elif moment == "completion":
        finish = executor_module.Executor._finish

        def finish_then_die(self, job, state, status, *rest):
            if status is ExecStatus.COMPLETED:
                die()
            return finish(self, job, state, status, *rest)

        executor_module.Executor._finish = finish_then_die

    agent = Agent(model=FunctionModel(reply, name="echo"), name="echo", config=ExecutionConfig(enable_retry=False))
    ex = Executor(TinyDBRepository(root), flush_interval=3600)
    batch(agent, [f"item {i}" for i in range(4)], name="k", concurrency=1, executor=ex).wait(120)
    print("the batch finished without being killed", flush=True)


if __name__ == "__main__":
    main()
