"""MCP tool call overhead against a direct Python tool, side by side in one run.

Both agents run the same scripted loop (one tool call, then an answer) on the in-memory store; the MCP
tool is served by the small SDK server in tests/servers over stdio, started once and reused.
Prints a table: ms per tool call, p50 and p95, and the ratio.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

from agio_notebook import tool
from agio_notebook.core import ToolCall
from agio_notebook.execution import ToolExecutor
from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

ROOT = Path(__file__).resolve().parents[1]
N = 200


@tool
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


async def timed_calls(executor: ToolExecutor) -> list[float]:
    samples = []
    for i in range(N):
        t0 = time.perf_counter()
        result = await executor.execute(ToolCall(f"c{i}", "echo", '{"text": "hi", "times": 2}'))
        samples.append((time.perf_counter() - t0) * 1000.0)
        assert result.status == "ok" and result.content == "hi hi", result
    return samples


def main() -> None:
    remote = mcp_tools([sys.executable, str(ROOT / "tests" / "servers" / "mcp_edge_server.py")], allow=["echo"])
    rows = []
    for label, tools in (("python @tool", [echo]), ("MCP over stdio", remote)):
        executor = ToolExecutor(tools)
        asyncio.run(timed_calls(executor))  # warm up
        samples = sorted(asyncio.run(timed_calls(executor)))
        rows.append((label, statistics.median(samples), samples[int(0.95 * len(samples)) - 1]))
    close_mcp_servers()
    base = rows[0][1]
    print(f"{'tool':<18}{'p50 ms':>10}{'p95 ms':>10}{'x python':>10}")
    for label, p50, p95 in rows:
        print(f"{label:<18}{p50:>10.3f}{p95:>10.3f}{p50 / base:>10.1f}")


if __name__ == "__main__":
    main()
