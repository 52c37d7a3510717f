"""An agio agent served over MCP (`agio mcp serve`, stdio) against the same agent run directly, in one run.

The agent is the offline `writer` of tests/servers/agio_agents.py (one model call, no tools); both sides
store every run in a TinyDB store of their own in the same temporary folder. Beside them, the MCP
client's own cost: a trivial `echo` tool of the SDK's small test server over stdio against a Python
`@tool`. Prints ms per call (p50, p95) and the time MCP adds per call.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agio_notebook import StepRunner, tool
from agio_notebook.core import ToolCall
from agio_notebook.execution import ToolExecutor
from agio_notebook.storage import TinyDBRepository
from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "servers"
sys.path.insert(0, str(SERVERS))
from agio_agents import writer  # noqa: E402

N = 100


@tool
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


def timed(call) -> tuple[float, float]:
    asyncio.run(call(0))  # warm up
    samples = []
    for i in range(N):
        t0 = time.perf_counter()
        asyncio.run(call(i))
        samples.append((time.perf_counter() - t0) * 1000.0)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * len(samples)) - 1]


def tool_caller(tools, name: str, arguments: str, expect: str):
    executor = ToolExecutor(tools)

    async def call(i: int) -> None:
        result = await executor.execute(ToolCall(f"c{i}", name, arguments))
        assert result.status == "ok" and result.content.startswith(expect), result

    return call


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="agio-serve-bench-"))
    (work / "served").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SERVERS), os.environ.get("PYTHONPATH")]))}
    served = mcp_tools([sys.executable, "-m", "agio_notebook", "--store", str(work / "served"), "mcp", "serve",
                        "--agents", "agio_agents:writer"], env=env, allow=["writer"])
    direct_runner = StepRunner(writer, repository=TinyDBRepository(work / "direct"))

    async def direct(i: int) -> None:
        result = await direct_runner.run(None, f"note {i}")
        assert result.final_text == f"Draft: note {i}"

    rows = [
        ("agent, run directly", *timed(direct)),
        ("agent over MCP (stdio)", *timed(tool_caller(served, "writer", '{"query": "note"}', "Draft: note"))),
        ("echo, python @tool", *timed(tool_caller([echo], "echo", '{"text": "hi"}', "hi"))),
    ]
    edge = mcp_tools([sys.executable, str(SERVERS / "mcp_edge_server.py")], allow=["echo"])
    rows.append(("echo over MCP (stdio)", *timed(tool_caller(edge, "echo", '{"text": "hi"}', "hi"))))
    close_mcp_servers()
    print(f"{'call':<26}{'p50 ms':>10}{'p95 ms':>10}")
    for label, p50, p95 in rows:
        print(f"{label:<26}{p50:>10.2f}{p95:>10.2f}")
    print(f"\nadded by serving the agent over MCP: {rows[1][1] - rows[0][1]:.2f} ms per call (p50); "
          f"the MCP client alone adds {rows[3][1] - rows[2][1]:.2f} ms to a trivial tool")


if __name__ == "__main__":
    main()
