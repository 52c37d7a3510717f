"""The same agent called four ways from an outer agent's run, side by side in one run: directly (a plain
``@tool`` whose body runs it), as a nested agent tool, over MCP (``agio mcp serve``, stdio) and over A2A
(``agio a2a serve``, HTTP on loopback). The agent is the offline ``writer`` of tests/servers/agio_agents.py
(one model call, no tools); every side stores its runs in a TinyDB store of its own. Prints ms per outer
run (median, p99) and what each way adds per call over calling the agent directly.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.serve.a2a_client import a2a_agent
from agio_notebook.storage import TinyDBRepository
from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "servers"
sys.path.insert(0, str(SERVERS))
from agio_agents import writer  # noqa: E402

N = 200
TOKEN = "bench-token-" + "b" * 24


def timed(runner: StepRunner) -> tuple[float, float]:
    runner.run_sync(None, "warm up")
    samples = []
    for i in range(N):
        t0 = time.perf_counter()
        result = runner.run_sync(None, f"go {i}")
        samples.append((time.perf_counter() - t0) * 1000.0)
        assert result.final_text == "done", result.error
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * len(samples)) - 1]


def outer(tools: list, name: str, store: Path) -> StepRunner:
    agent = Agent(model=ScriptedModel([Reply.call(name, query="note"), "done"], loop=True), tools=tools, name="outer")
    return StepRunner(agent, repository=TinyDBRepository(store))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="agio-a2a-bench-"))
    for name in ("served-mcp", "served-a2a"):
        (work / name).mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SERVERS), os.environ.get("PYTHONPATH")])),
           "AGIO_A2A_TOKEN": TOKEN}
    inner = StepRunner(writer, repository=TinyDBRepository(work / "inner"))

    @tool
    async def write(query: str) -> str:
        """Run the writer directly."""
        return (await inner.run(None, query)).final_text or ""

    port = free_port()
    a2a = subprocess.Popen([sys.executable, "-m", "agio_notebook", "--store", str(work / "served-a2a"), "a2a", "serve",
                            "--agents", "agio_agents:writer", "--port", str(port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/writer"
        while True:
            try:
                httpx.get(url + "/.well-known/agent-card.json", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        ways = [
            ("directly (@tool running it)", [write], "write"),
            ("nested agent tool", [writer.as_tool()], "writer"),
            ("over MCP (stdio)", mcp_tools([sys.executable, "-m", "agio_notebook", "--store", str(work / "served-mcp"),
                                            "mcp", "serve", "--agents", "agio_agents:writer"], env=env,
                                           allow=["writer"]), "writer"),
            ("over A2A (HTTP, loopback)", [a2a_agent(url, headers={"Authorization": f"Bearer {TOKEN}"})], "writer"),
        ]
        rows = [(label, *timed(outer(tools, name, work / f"outer-{i}"))) for i, (label, tools, name) in enumerate(ways)]
    finally:
        close_mcp_servers()
        a2a.terminate()
        a2a.wait(10)
    base = rows[0][1]
    print(f"{N} outer runs each (one call of the writer agent per run), after a warm-up; {os.cpu_count()} cores")
    print(f"{'the writer called':<30}{'median ms':>11}{'p99 ms':>10}{'added ms/call':>15}")
    for label, median, p99 in rows:
        print(f"{label:<30}{median:>11.2f}{p99:>10.2f}{median - base:>15.2f}")


if __name__ == "__main__":
    main()
