"""The notebook's agents served over MCP, driven by the MCP SDK's own client: `agio mcp serve` over stdio
(a real child process on a real store), `serve_mcp` over streamable HTTP with and without the bearer token,
and an agio agent that uses another agio agent through `mcp_tools(...)`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import agio_notebook
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner
from agio_notebook.core import AgioError
from agio_notebook.serve import named_agents
from agio_notebook.storage import TinyDBRepository
from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

SERVERS = Path(__file__).parent / "servers"
sys.path.insert(0, str(SERVERS))
from agio_agents import researcher, team, writer  # noqa: E402


@pytest.fixture(autouse=True)
def _close_servers():
    yield
    close_mcp_servers()


def _env(store: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SERVERS), os.environ.get("PYTHONPATH")]))}
    env.pop("AGIO_STORE", None)
    return env


def _serve_argv(store: Path) -> list[str]:
    return [sys.executable, "-m", "agio_notebook", "--store", str(store), "mcp", "serve", "--agents", "agio_agents:team"]


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    return store


def test_stdio_server_runs_agents_with_progress_and_serves_runs_transcripts_retry_and_fork(tmp_path):
    store = _store(tmp_path)
    argv = _serve_argv(store)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=_env(store))
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, message))

    async def go():
        async with Client(params, read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            answer = await client.call_tool("researcher", {"query": "tides"}, progress_callback=on_progress)
            run_id = answer.structured_content["run_id"]
            again = await client.call_tool("writer", {"query": "about bees"})
            runs = await client.call_tool("list_runs", {})
            sessions = await client.call_tool("list_sessions", {"limit": 5})
            transcript = await client.call_tool("read_transcript", {"run_id": run_id})
            resource = await client.read_resource(f"agio://runs/{run_id}")
            retried = await client.call_tool("retry", {"run_id": run_id})
            forked = await client.call_tool("fork", {"session_id": answer.structured_content["session_id"],
                                                     "at": 1, "query": "bees"})
            unknown = await client.call_tool("read_transcript", {"run_id": "nope"})
            return names, answer, again, runs, sessions, transcript, resource, retried, forked, unknown

    names, answer, again, runs, sessions, transcript, resource, retried, forked, unknown = asyncio.run(go())
    assert {"researcher", "writer", "list_runs", "list_sessions", "read_transcript", "retry", "fork"} <= names
    assert answer.content[0].text == "Found: Tides come from the Moon's pull." and not answer.is_error
    assert [m for _, m in progress] == ["step 1 (user) stored", "step 2 (assistant) stored",
                                        "step 3 (tool) stored", "step 4 (assistant) stored"]
    assert again.structured_content["answer"] == "Draft: about bees"
    run_id = answer.structured_content["run_id"]
    assert run_id in runs.content[0].text and answer.structured_content["session_id"] in sessions.content[0].text
    text = transcript.content[0].text
    assert "calls `lookup({\"topic\": \"tides\"})`" in text and "Moon's pull" in text and "**completed**" in text
    assert resource.contents[0].text == text
    assert retried.structured_content["status"] == "completed" and retried.structured_content["run_id"] != run_id
    assert forked.content[0].text == "Found: Bees dance to share where flowers are."
    assert unknown.is_error and "no run 'nope'" in unknown.content[0].text
    # the runs are the store's own: another process reads them, the retried attempt superseded
    repo = TinyDBRepository(store)
    assert repo.get_run(run_id).superseded_by == retried.structured_content["run_id"]
    assert repo.get_run(forked.structured_content["run_id"]).agent_name == "researcher"


def test_an_agio_agent_uses_another_agio_agent_over_stdio(tmp_path):
    store = _store(tmp_path)
    tools = mcp_tools(_serve_argv(store), env=_env(store), prefix="team_")
    assert {"team_researcher", "team_writer"} <= {t.name for t in tools}
    planner = Agent(model=ScriptedModel([Reply.call("team_researcher", query="bees"), "Planned."]), tools=tools)
    result = StepRunner(planner, repository=TinyDBRepository(tmp_path / "outer")).run_sync(None, "plan")
    tool_step = next(s for s in result.steps if s.role.value == "tool")
    assert tool_step.status == "ok" and tool_step.content == "Found: Bees dance to share where flowers are."


def test_http_needs_the_bearer_token_and_serves_with_it(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    server = agio_notebook.serve_mcp(agents={"scout": researcher, "writer": writer}, store=repo)
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.token not in repr(server)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong-token-of-some-length"},
                        {"Authorization": server.token}, {"Authorization": f"Bearer {server.token}x"}):
            refused = httpx.post(server.url, json=body, headers=headers, timeout=10)
            assert refused.status_code == 401 and refused.text == "missing or wrong bearer token\n"

        async def without_token():
            async with Client(server.url, read_timeout_seconds=10) as client:
                await client.list_tools()

        with pytest.raises(BaseException):
            asyncio.run(without_token())

        async def with_token():
            transport = streamable_http_client(server.url, http_client=create_mcp_http_client(headers=server.headers))
            async with Client(transport, read_timeout_seconds=30) as client:
                return await client.call_tool("scout", {"query": "tides"})

        answer = asyncio.run(with_token())
        assert answer.structured_content["answer"] == "Found: Tides come from the Moon's pull."
        assert repo.get_run(answer.structured_content["run_id"]).agent_name == "researcher"
        # an agio agent using the served agents over HTTP
        tools = mcp_tools(server.url, headers=server.headers)
        outer = Agent(model=ScriptedModel([Reply.call("writer", query="a poem"), "Done."]), tools=tools)
        result = StepRunner(outer, repository=TinyDBRepository(tmp_path / "outer")).run_sync(None, "go")
        assert next(s for s in result.steps if s.role.value == "tool").content == "Draft: a poem"
    finally:
        server.stop()
    assert not server.running


def test_a_wrong_token_from_mcp_tools_is_one_line_without_the_token(tmp_path):
    server = agio_notebook.serve_mcp(agents=writer, store=TinyDBRepository(tmp_path / "store"))
    try:
        secret = "not-the-token-" + "z" * 20
        with pytest.raises(AgioError) as caught:
            mcp_tools(server.url, headers={"Authorization": f"Bearer {secret}"})
        assert "could not be started" in str(caught.value) and secret not in str(caught.value)
        assert server.token not in str(caught.value)
    finally:
        server.stop()


@pytest.mark.parametrize("args, says", [
    (["--store", "{tmp}/missing", "mcp", "serve", "--agents", "agio_agents:team"], "no store at"),
    (["--store", "sqlite:///{tmp}/missing.db", "mcp", "serve", "--agents", "agio_agents:team"], "no SQLite store"),
    (["--store", "{tmp}/store", "mcp", "serve", "--agents", "no_such_module:team"], "cannot import 'no_such_module'"),
    (["--store", "{tmp}/store", "mcp", "serve", "--agents", "agio_agents:nobody"], "has no attribute 'nobody'"),
    (["--store", "{tmp}/store", "mcp", "serve", "--agents", "agio_agents:lookup"], "expected an Agent"),
    (["--store", "{tmp}/store", "mcp", "serve", "--agents", "agio_agents"], "takes module:attribute"),
    (["--store", "{tmp}/store", "mcp", "serve"], "name the agents"),
])
def test_bad_serve_arguments_are_one_line(tmp_path, args, says):
    _store(tmp_path)
    argv = [sys.executable, "-m", "agio_notebook", *[a.format(tmp=tmp_path) for a in args]]
    done = subprocess.run(argv, env=_env(tmp_path / "store"), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def test_agent_names_must_be_unique_tool_names():
    with pytest.raises(AgioError, match="two agents are named 'researcher'"):
        named_agents([researcher, researcher])
    with pytest.raises(AgioError, match="may not be called 'retry'"):
        named_agents({"retry": writer})
    with pytest.raises(AgioError, match="cannot be a tool name"):
        named_agents({"two words": writer})
    with pytest.raises(AgioError, match="not an Agent"):
        named_agents({"x": "writer"})
    assert list(named_agents(team)) == ["researcher", "writer"]


def test_progress_includes_nested_runs_steps_tagged_with_their_path_and_transcripts_show_nesting(tmp_path):
    from agio_agents import composed

    repo = TinyDBRepository(tmp_path / "store")
    progress: list[str] = []

    async def on_progress(done, total, message):
        progress.append(message)

    server = agio_notebook.serve_mcp(agents=composed, store=repo)
    try:
        async def go():
            transport = streamable_http_client(server.url, http_client=create_mcp_http_client(headers=server.headers))
            async with Client(transport, read_timeout_seconds=60) as client:
                answer = await client.call_tool("planner", {"query": "tides"}, progress_callback=on_progress)
                transcript = await client.call_tool("read_transcript",
                                                    {"run_id": answer.structured_content["run_id"][:8]})
                return answer, transcript

        answer, transcript = asyncio.run(go())
    finally:
        server.stop()
    assert answer.content[0].text == "Plan: Found: Tides come from the Moon's pull."
    nested = next(r for r in repo.list_runs() if r.agent_name == "researcher")
    tag = f"[nested run {nested.id[:8]}] "
    assert progress == ["step 1 (user) stored", "step 2 (assistant) stored",
                        f"{tag}step 1 (user) stored", f"{tag}step 2 (assistant) stored", f"{tag}step 3 (tool) stored",
                        f"{tag}step 4 (assistant) stored", "step 3 (tool) stored", "step 4 (assistant) stored"]
    text = transcript.content[0].text
    lines = text.splitlines()
    # the nested run is drawn under the tool result it answered, quoted one level deeper
    at = lines.index(next(line for line in lines if line.startswith("**Tool result** `researcher`")))
    nested_head = next(i for i, line in enumerate(lines) if line.startswith(f"> ## Run {nested.id[:8]} · researcher"))
    assert nested_head > at and "> > Moon's pull" not in text
    assert any(line.startswith("> - calls `lookup(") for line in lines)
    assert lines.index("**Assistant** (#4)") > nested_head


HANDED_OFF = """
import sys
sys.path.insert(0, {servers!r})
from agio_agents import {agent}
from agio_notebook import StepRunner
from agio_notebook.core import AgioError
from agio_notebook.storage import TinyDBRepository
try:
    result = StepRunner({agent}, repository=TinyDBRepository({store!r})).run_sync({session!r}, {query!r})
    print(result.session_id, result.run.agent_name, result.final_text, sep="|")
except AgioError as exc:
    print("refused|" + str(exc))
"""


def test_a_session_handed_off_continues_in_another_process_with_the_agent_holding_it(tmp_path):
    store = _store(tmp_path)

    def in_a_process(agent: str, session, query: str) -> list[str]:
        code = HANDED_OFF.format(servers=str(SERVERS), agent=agent, store=str(store), session=session, query=query)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.strip().splitlines()
        assert len(lines) == 1, done.stdout
        return lines[0].split("|")

    session, agent, text = in_a_process("triage", None, "I want a refund")
    assert agent == "billing"  # handed off within the first run
    again = in_a_process("triage", session, "how long will it take?")  # another process, the same session
    assert again == [session, "billing", "billing here: how long will it take?"]
    refused = in_a_process("stranger", session, "hello?")
    assert refused == ["refused", f"this session was handed off to agent 'billing', which agent 'stranger' cannot "
                                  "reach (it knows: stranger); run the session with that agent"]
    # and through the MCP server: each client session starts a server process of its own
    argv = [sys.executable, "-m", "agio_notebook", "--store", str(store), "mcp", "serve", "--agents",
            "agio_agents:composed"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=_env(store))

    async def call(arguments):
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("triage", arguments)

    first = asyncio.run(call({"query": "a refund, please"}))
    served = first.structured_content["session_id"]
    second = asyncio.run(call({"query": "still there?", "session_id": served[:8]}))
    assert second.content[0].text == "billing here: still there?"
    assert TinyDBRepository(store).get_run(second.structured_content["run_id"]).agent_name == "billing"


def test_the_agio_command_imports_agents_from_the_working_directory(tmp_path):
    """As ``python -m`` does: ``agio mcp serve --agents my_agents:x`` finds my_agents.py where it is run."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "my_agents_here.py").write_text("from agio_notebook import Agent, ScriptedModel\n"
                                                "bot = Agent(model=ScriptedModel(['hi']), name='bot')\n")
    agio_command = str(Path(sys.executable).with_name("agio"))
    from agio_notebook.storage import open_repository

    open_repository(str(tmp_path / "store")).close()  # a store to serve
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([agio_command, "--store", str(tmp_path / "store"), "mcp", "serve", "--agents",
                           "my_agents_here:nobody"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "module 'my_agents_here' has no attribute 'nobody'" in done.stderr, done.stderr  # imported, from here
