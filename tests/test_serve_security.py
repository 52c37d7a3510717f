"""What a holder of a served agent's bearer token can and cannot reach, tried with the MCP SDK's own client
over streamable HTTP: only the served agents' own sessions and runs (ids and prefixes alike), Host and
Origin checked on every bind, the agent's description published and never its prompt, the host's logging
left alone, secret values of any shape scrubbed from everything a client reads, and the depth and budget
of a calling agio run honoured across the server (an agent calling itself through its own server)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import agio_notebook
from agio_notebook import Agent, ExecutionConfig, FunctionModel, StepRunner
from agio_notebook.execution import MAX_DEPTH
from agio_notebook.storage import TinyDBRepository
from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools
from serve_support import served

SECRET = "the launch code is seven seven four one"  # in conversations the served agent must not reach


@pytest.fixture(autouse=True)
def _close_servers():
    yield
    close_mcp_servers()


def recording_agent(name: str, seen: list, prompt: str = "You write.", description: str | None = None) -> Agent:
    def reply(messages, tools):
        seen.append(json.dumps(messages))
        last = messages[-1]
        return ("tool said: " if last["role"] == "tool" else "ok: ") + (last["content"] or "")

    return Agent(model=FunctionModel(reply, name=f"{name}-script"), name=name, system_prompt=prompt,
                 description=description)




def with_client(server, fn):
    async def go():
        transport = streamable_http_client(server.url, http_client=create_mcp_http_client(headers=server.headers))
        async with Client(transport, read_timeout_seconds=60) as client:
            return await fn(client)

    return asyncio.run(go())


def _text(result) -> str:
    return result.content[0].text


def _refusal(result, tool: str) -> str:
    """The one line of an error result, without the SDK's "Error executing tool NAME: " in front of it."""
    assert result.is_error
    text = _text(result)
    assert "\n" not in text and text.startswith(f"Error executing tool {tool}: "), text
    return text.removeprefix(f"Error executing tool {tool}: ")


def test_a_token_holder_reaches_only_the_served_agents_sessions_and_runs(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    seen: list[str] = []
    writer = recording_agent("writer", seen)
    diary = Agent(model=FunctionModel(lambda m, t: "noted", name="diary-script"), name="diary")
    twin = Agent(model=FunctionModel(lambda m, t: "noted", name="twin-script"), name="writer",
                 system_prompt="You keep a diary.")  # shares the served agent's name, and nothing else
    foreign = StepRunner(diary, repository=repo).run_sync(None, f"remember: {SECRET}")
    twins = StepRunner(twin, repository=repo).run_sync(None, f"also remember: {SECRET}")
    notebook_own = StepRunner(writer, repository=repo).run_sync(None, "made in the notebook")  # by that agent
    stored_before = {sid: len(repo.get_steps(sid)) for sid in (foreign.session_id, twins.session_id)}

    async def go(client):
        out = {"new": await client.call_tool("writer", {"query": "hello"})}
        sid = out["new"].structured_content["session_id"]
        out["continued"] = await client.call_tool("writer", {"query": "again", "session_id": sid[:8]})
        out["notebook_own"] = await client.call_tool("writer", {"query": "more",
                                                                "session_id": notebook_own.session_id})
        for label, ref in (("foreign", foreign.session_id), ("foreign_prefix", foreign.session_id[:8]),
                           ("twin", twins.session_id), ("unknown", "f" * 32)):
            out[label] = await client.call_tool("writer", {"query": "what did I say?", "session_id": ref})
        out["retry_twin"] = await client.call_tool("retry", {"run_id": twins.run_id})
        out["retry_foreign"] = await client.call_tool("retry", {"run_id": foreign.run_id[:8]})
        out["fork_foreign"] = await client.call_tool("fork", {"session_id": foreign.session_id, "at": 1,
                                                             "query": "go on"})
        out["fork_own"] = await client.call_tool("fork", {"session_id": sid, "at": 1, "query": "branch"})
        fork_sid = out["fork_own"].structured_content["session_id"]
        out["fork_continued"] = await client.call_tool("writer", {"query": "on the branch", "session_id": fork_sid})
        out["retry_own"] = await client.call_tool("retry", {"run_id": out["fork_continued"].structured_content["run_id"]})
        out["list"] = await client.call_tool("list_runs", {"limit": 100})
        out["sessions"] = await client.call_tool("list_sessions", {"limit": 100})
        out["read_foreign"] = await client.call_tool("read_transcript", {"run_id": foreign.run_id})
        out["read_twin"] = await client.call_tool("read_transcript", {"run_id": twins.run_id[:8]})
        out["read_own"] = await client.call_tool("read_transcript",
                                                 {"run_id": out["continued"].structured_content["run_id"][:8]})
        try:
            await client.read_resource(f"agio://runs/{foreign.run_id}")
            out["resource_foreign"] = "read"
        except Exception as exc:  # noqa: BLE001 - the SDK raises its own error type for a failed read
            out["resource_foreign"] = str(exc)
        out["resource_list"] = (await client.read_resource("agio://runs")).contents[0].text
        return out

    with served({"writer": writer}, repo) as server:
        out = with_client(server, go)
    sid = out["new"].structured_content["session_id"]
    # its own conversations go on: made through the server (by a prefix too), made by that agent, forked
    assert _text(out["continued"]) == "ok: again" and out["continued"].structured_content["session_id"] == sid
    assert [s.role.value for s in repo.get_steps(sid)] == ["user", "assistant", "user", "assistant"]
    assert _text(out["notebook_own"]) == "ok: more"
    assert not out["fork_own"].is_error and _text(out["fork_continued"]) == "ok: on the branch"
    assert not out["retry_own"].is_error
    # every other session is refused in one line, the same as an id that does not exist
    for label, ref in (("foreign", foreign.session_id), ("foreign_prefix", foreign.session_id[:8]),
                       ("twin", twins.session_id), ("unknown", "f" * 32)):
        assert _refusal(out[label], "writer") == f"no session {ref!r} among the sessions of agent 'writer'", label
    assert _refusal(out["retry_twin"], "retry") == f"no run {twins.run_id!r} among the served agents' runs"
    assert _refusal(out["retry_foreign"], "retry") == f"no run {foreign.run_id[:8]!r} among the served agents' runs"
    assert _refusal(out["fork_foreign"], "fork") == (f"no session {foreign.session_id!r} among the served agents' "
                                                     "sessions")
    assert _refusal(out["read_foreign"], "read_transcript") == f"no run {foreign.run_id!r} among the served agents' runs"
    assert _refusal(out["read_twin"], "read_transcript") == (f"no run {twins.run_id[:8]!r} among the served "
                                                             "agents' runs")
    assert out["resource_foreign"] == f"no run {foreign.run_id!r} among the served agents' runs"
    # nothing of the other conversations reached the served model or the client, nor changed in the store
    assert seen and not any(SECRET in m for m in seen)
    shown = [_text(out[k]) for k in ("list", "sessions", "read_own")] + [out["resource_list"]]
    assert not any(SECRET in t for t in shown)
    for other in (foreign, twins):
        assert other.run_id not in shown[0] and other.session_id not in shown[1] and other.run_id not in shown[3]
    assert out["new"].structured_content["run_id"] in shown[0] and notebook_own.run_id in shown[0]
    assert {sid: len(repo.get_steps(sid)) for sid in stored_before} == stored_before
    assert "ok: again" in shown[2] and "**completed**" in shown[2]


def test_exposing_the_store_shows_every_run_and_still_continues_only_owned_sessions(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    diary = Agent(model=FunctionModel(lambda m, t: "noted", name="diary-script"), name="diary")
    foreign = StepRunner(diary, repository=repo).run_sync(None, f"remember: {SECRET}")
    writer = recording_agent("writer", [])

    async def go(client):
        return (await client.call_tool("list_runs", {}), await client.call_tool("read_transcript",
                                                                                {"run_id": foreign.run_id[:8]}),
                await client.call_tool("writer", {"query": "x", "session_id": foreign.session_id}))

    with served(writer, repo, expose_store=True) as server:
        listed, read, continued = with_client(server, go)
    assert foreign.run_id in _text(listed) and SECRET in _text(read)
    assert _refusal(continued, "writer") == f"no session {foreign.session_id!r} among the sessions of agent 'writer'"


def _lan_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect(("198.51.100.1", 9))  # picks the outgoing address; sends nothing
        except OSError:
            return None
        address = udp.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.mark.parametrize("bind", ["0.0.0.0", "", "::", "lan"])
def test_host_and_origin_are_checked_on_every_bind(tmp_path, bind):
    if bind == "lan":
        bind = _lan_address()
        if bind is None:
            pytest.skip("this machine has no address but loopback")
    writer = recording_agent("writer", [])
    with served(writer, TinyDBRepository(tmp_path / "store"), host=bind) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        target = f"http://{'127.0.0.1' if bind in ('0.0.0.0', '') else '[::1]' if bind == '::' else bind}:{port}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        auth = {**server.headers, "Accept": "application/json, text/event-stream"}

        def post(**headers):
            return httpx.post(target, json=body, headers={**auth, **headers}, timeout=10)

        evil_host = post(Host=f"evil.example:{port}")
        assert evil_host.status_code == 421 and evil_host.text == "this server does not answer to that Host\n"
        assert post(Host=f"127.0.0.1:{port + 1}").status_code == 421  # the right name, another port
        evil_origin = post(Origin="http://evil.example")
        assert evil_origin.status_code == 403 and evil_origin.text == "requests from that Origin are not allowed\n"
        no_token = httpx.post(target, json=body, headers={"Accept": auth["Accept"]}, timeout=10)
        assert no_token.status_code == 401
        own_origin = post(Origin=target.rsplit("/", 1)[0])
        assert own_origin.status_code not in (401, 403, 421)
        # a real client through the same address works
        url = target

        async def go():
            transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=server.headers))
            async with Client(transport, read_timeout_seconds=30) as client:
                return await client.call_tool("writer", {"query": "hi"})

        assert asyncio.run(go()).content[0].text == "ok: hi"


def test_allow_lists_admit_a_proxys_host_and_a_web_apps_origin(tmp_path):
    writer = recording_agent("writer", [])
    with served(writer, TinyDBRepository(tmp_path / "store"), host="0.0.0.0",
                allowed_hosts=["agents.example.org", "gateway.example:8443"],
                allowed_origins=["https://app.example"]) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {**server.headers, "Accept": "application/json, text/event-stream"}

        def status(**extra):
            return httpx.post(server.url, json=body, headers={**headers, **extra}, timeout=10).status_code

        assert status(Host="agents.example.org") not in (403, 421)          # any port
        assert status(Host="agents.example.org:443") not in (403, 421)
        assert status(Host="gateway.example:8443") not in (403, 421)
        assert status(Host="gateway.example:8444") == 421                   # only that port
        assert status(Host="example.org") == 421
        assert status(Origin="https://app.example") not in (403, 421)
        assert status(Origin="https://app.example.evil") == 403
    with pytest.raises(ValueError, match="allowed_hosts: 'http://x/y' is not a host name"):
        agio_notebook.serve_mcp(agents=writer, store=TinyDBRepository(tmp_path / "store"), allowed_hosts=["http://x/y"])


def test_the_published_description_is_the_agents_description_never_its_prompt(tmp_path):
    prompt = "You are the internal pricing oracle; never reveal margin rules."
    described = recording_agent("pricer", [], prompt=prompt, description="Quotes a price for a product.")
    silent = recording_agent("helper", [], prompt=prompt)

    async def go(client):
        return {t.name: t.description for t in (await client.list_tools()).tools}

    with served([described, silent], TinyDBRepository(tmp_path / "store")) as server:
        descriptions = with_client(server, go)
    assert "Quotes a price for a product." in descriptions["pricer"]
    assert not any(word in descriptions[name] for name in ("pricer", "helper") for word in ("oracle", "margin"))


SERVE_AND_LOG = """
import logging, sys, httpx
sys.path.insert(0, {servers!r})
import agio_notebook
from agio_agents import writer
before = (logging.getLogger().level, list(logging.getLogger().handlers))
server = agio_notebook.{serve}(agents=writer, store={store!r})
after = (logging.getLogger().level, list(logging.getLogger().handlers))
try:
    httpx.get(server.url + "?api_key=SEEN-IN-A-LOG-LINE", timeout=10)
finally:
    server.stop()
print("same" if before == after else f"changed: {{before}} -> {{after}}")
"""


@pytest.mark.parametrize("serve", ["serve_mcp", "serve_a2a"])
def test_serving_leaves_the_host_processs_logging_as_it_was(tmp_path, serve):
    (tmp_path / "store").mkdir()
    code = SERVE_AND_LOG.format(servers=str(Path(__file__).parent / "servers"), store=str(tmp_path / "store"),
                                serve=serve)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"
    assert "SEEN-IN-A-LOG-LINE" not in done.stderr and "HTTP Request" not in done.stderr


def test_secret_values_of_any_shape_are_scrubbed_from_everything_a_client_reads(tmp_path):
    from agio_notebook import OpenAIModel, Reply, ScriptedModel, tool

    key = "purple elephant dances slowly"  # a configured key that looks like nothing
    OpenAIModel(api_key=key)  # configuring it is enough: the process knows it as a secret
    token = "served-token-of-plain-words-42"

    @tool
    def connect() -> str:
        """Connect to the backend."""
        raise RuntimeError(f"refused: key {key} with token {token}")

    agent = Agent(model=ScriptedModel([Reply.call("connect"), f"It said {key} and {token}."], loop=True),
                  tools=[connect], name="leaky")
    repo = TinyDBRepository(tmp_path / "store")

    async def go(client):
        answer = await client.call_tool("leaky", {"query": f"use {key}"})
        run_id = answer.structured_content["run_id"]
        return [answer, await client.call_tool("list_runs", {}), await client.call_tool("read_transcript",
                                                                                          {"run_id": run_id})]

    with served(agent, repo, token=token) as server:
        results = with_client(server, go)
    texts = [json.dumps(r.model_dump(mode="json")) for r in results]
    assert all(key not in t and token not in t for t in texts)
    assert "***" in texts[0] and "***" in texts[2]


def test_runs_are_listed_a_page_at_a_time_newest_first(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    writer = recording_agent("writer", [])
    other = Agent(model=FunctionModel(lambda m, t: "x", name="other-script"), name="other")
    for i in range(3):
        StepRunner(other, repository=repo).run_sync(None, f"other {i}")

    async def go(client):
        made = [(await client.call_tool("writer", {"query": f"q{i}"})).structured_content["run_id"]
                for i in range(5)]
        pages, cursor = [], None
        while True:
            page = _text(await client.call_tool("list_runs", {"limit": 2, **({"cursor": cursor} if cursor else {})}))
            pages.append(page)
            more = [line for line in page.splitlines() if line.startswith("More:")]
            if not more:
                break
            cursor = more[0].split('cursor="', 1)[1].split('"', 1)[0]
        bad = await client.call_tool("list_runs", {"cursor": "not-a-cursor"})
        return made, pages, bad

    with served(writer, repo) as server:
        made, pages, bad = with_client(server, go)
    rows = [line.split("`")[1] for page in pages for line in page.splitlines() if line.startswith("| `")]
    assert rows == made[::-1] and len(pages) == 3
    assert _refusal(bad, "list_runs") == ("'not-a-cursor' is not a cursor of a page of runs (pass the next_cursor "
                                          "a page returned)")


def _self_caller(repo, config: ExecutionConfig | None = None) -> tuple[Agent, list[int]]:
    """An agent whose model always asks its own MCP tool again, and answers once a call comes back."""
    depths: list[int] = []

    def reply(messages, tools):
        last = messages[-1]
        if last["role"] == "tool":
            return f"back from below: {last['content'][:200]}"
        from agio_notebook import Reply

        return Reply.call("looper", query="go one level deeper, please, and report what you find there")

    agent = Agent(model=FunctionModel(reply, name="looper-script"), name="looper", config=config)
    return agent, depths


def _chain(repo) -> list:
    """The stored runs of the looper, outermost first (each one's parent is the one before)."""
    runs = [r for r in repo.list_runs() if r.agent_name == "looper"]
    return sorted(runs, key=lambda r: r.depth)


def test_an_agent_calling_itself_through_its_own_mcp_server_stops_at_the_depth_limit(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    agent, _ = _self_caller(repo)
    with served(agent, repo) as server:
        agent.registry.add(mcp_tools(server.url, headers=server.headers, timeout=120)[0])  # itself, over HTTP
        result = StepRunner(agent, repository=repo).run_sync(None, "start")
    chain = _chain(repo)
    assert [r.depth for r in chain] == list(range(MAX_DEPTH + 1))
    assert all(r.status.value == "completed" for r in chain) and result.status.value == "completed"
    for outer, inner in zip(chain, chain[1:]):  # each served run names the run and the tool call that asked
        assert inner.parent_run_id == outer.id
        call_id = next(s for s in repo.get_steps(outer.session_id) if s.run_id == outer.id
                       and s.role.value == "assistant").tool_calls[0].id
        assert inner.parent_tool_call_id == call_id
    deepest = chain[-1]
    refusal = next(s for s in repo.get_steps(deepest.session_id) if s.role.value == "tool")
    assert refusal.status == "error"
    assert (f"agent 'looper' not run: agents may nest {MAX_DEPTH} levels deep, and this call came from depth "
            f"{MAX_DEPTH}") in refusal.error


def test_an_agent_calling_itself_through_its_own_mcp_server_stays_within_the_outermost_max_tokens(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    budget = 400
    agent, _ = _self_caller(repo)
    with served(agent, repo) as server:
        agent.registry.add(mcp_tools(server.url, headers=server.headers, timeout=120)[0])
        runner = StepRunner(agent, repository=repo, config=ExecutionConfig(max_tokens=budget))
        result = runner.run_sync(None, "start")
    chain = _chain(repo)
    spent = sum(r.metrics.total_tokens or 0 for r in chain)
    assert spent <= budget, [(r.depth, r.status.value, r.metrics.total_tokens) for r in chain]
    assert result.run.metrics.total_tokens + sum(r.metrics.total_tokens or 0 for r in chain[1:]) == spent
    # every served run was capped by what its caller's tree had left when it called: the budget less the
    # first model call of every run above it; and the budget, not the depth, stopped them
    served_runs = chain[1:]
    assert served_runs and all(r.status.value == "budget_exceeded" for r in served_runs)
    caps = [int(re.search(r"max_tokens=(\d+)", r.error).group(1)) for r in served_runs]

    def first_call(run) -> int:
        return next(s for s in repo.get_steps(run.session_id) if s.run_id == run.id
                    and s.role.value == "assistant").metrics.total_tokens

    assert caps == [budget - sum(first_call(r) for r in chain[:i + 1]) for i in range(len(served_runs))]
    assert not any("agents may nest" in (s.error or "") for r in chain for s in repo.get_steps(r.session_id))


def test_malformed_caller_metadata_is_one_line(tmp_path):
    writer = recording_agent("writer", [])

    async def go(client):
        out = []
        for caller in ({"depth": -1}, {"depth": "deep"}, {"depth": 1, "max_tokens": -5}, "nonsense",
                       {"depth": 1, "max_cost": -0.5}, {"depth": 1, "max_runs": True}):
            out.append(await client.call_tool("writer", {"query": "x"}, meta={"agio-notebook/caller": caller}))
        out.append(await client.call_tool("writer", {"query": "x"},
                                          meta={"agio-notebook/caller": {"depth": MAX_DEPTH}}))
        return out

    with served(writer, TinyDBRepository(tmp_path / "store")) as server:
        results = with_client(server, go)
    texts = [_refusal(r, "writer") for r in results]
    assert "depth must be a whole number >= 0, got -1" in texts[0]
    assert "depth must be a whole number >= 0, got 'deep'" in texts[1]
    assert "max_tokens must be a whole number >= 0, got -5" in texts[2]
    assert "must be an object, got str" in texts[3]
    assert "max_cost must be a number >= 0" in texts[4]
    assert "max_runs must be a whole number >= 0, got True" in texts[5]
    assert texts[6].startswith(f"agent 'writer' not run: agents may nest {MAX_DEPTH} levels deep")


def test_parallel_calls_to_a_served_agent_share_the_outermost_budget_and_nested_runs(tmp_path):
    """Four calls made at once to an agent served over MCP are each lent an equal share of what the outermost
    run has left, set aside while they run: together they stay within its max_tokens (each alone was handed
    all of it before). And an agent calling itself twice at once through its own server starts no more runs
    than the outermost max_nested_runs, across processes as in one."""
    from agio_notebook import Reply, tool
    from agio_notebook.models.scripted import call

    @tool
    def fetch(page: int) -> str:
        """Fetch a page of a long document."""
        return f"page {page}: " + "lorem ipsum dolor sit amet " * 60

    def read(messages, tools):
        pages = sum(m["role"] == "tool" for m in messages)
        return Reply.call("fetch", page=pages + 1) if pages < 30 else "I read it all."

    def plan(messages, tools):
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=[call("reader", query=f"part {i}") for i in range(4)])
        return "done"

    repo = TinyDBRepository(tmp_path / "store")
    reader = Agent(model=FunctionModel(read, name="reader-model"), tools=[fetch], name="reader")
    with served(reader, repo) as server:
        planner = Agent(model=FunctionModel(plan, name="planner-model"), name="planner",
                        tools=mcp_tools(server.url, headers=server.headers, timeout=120))
        result = StepRunner(planner, repository=repo, config=ExecutionConfig(max_tokens=3000)).run_sync(None, "go")
    runs = [r for r in repo.list_runs() if r.parent_run_id == result.run_id]
    assert len(runs) == 4 and all(r.status.value == "budget_exceeded" for r in runs)
    caps = {int(re.search(r"max_tokens=(\d+)", r.error).group(1)) for r in runs}
    assert len(caps) == 1 and 4 * caps.pop() <= 3000  # one share each, of what was left when they started
    assert result.run.metrics.total_tokens + sum(r.metrics.total_tokens for r in runs) <= 3000

    def fan_out(messages, tools):
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=[call("fractal", query=f"{messages[-1]['content']}.{i}") for i in range(2)])
        return "ok"

    repo = TinyDBRepository(tmp_path / "fractal")
    fractal = Agent(model=FunctionModel(fan_out, name="m"), name="fractal")
    with served(fractal, repo) as server:
        fractal.registry.add(mcp_tools(server.url, headers=server.headers, timeout=120)[0])
        outer = StepRunner(fractal, repository=repo, config=ExecutionConfig(max_nested_runs=3)).run_sync(None, "q")
    under = [r for r in repo.list_runs() if r.id != outer.run_id]
    assert 1 <= len(under) <= 3, [(r.depth, r.status.value) for r in under]
