"""Agents over A2A, both ways, against real third-party code: the a2a-sdk's own client against agio's
server (cards, send, stream, task status per stored step, tasks/get, tasks/cancel as Stop, one session per
context), agio's ``a2a_agent`` against servers written with the a2a-sdk and with pydantic's fasta2a in
child processes, agio calling agio (with recursion stopped by the depth limit), and each bad argument and
auth case as one line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

import agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import AgioError
from agio_notebook.execution import MAX_DEPTH
from agio_notebook.serve.a2a_client import A2AError
from agio_notebook.storage import TinyDBRepository
import serve_support
from lab_support import free_port

SERVERS = Path(__file__).parent / "servers"
sys.path.insert(0, str(SERVERS))
from agio_agents import researcher, team  # noqa: E402

TOKEN = "sdk-server-token-" + "k" * 16


def served(agents, repo, **options):
    return serve_support.served(agents, repo, "a2a", **options)


@contextmanager
def child_server(script: str, *args: str, env: dict | None = None):
    """A third-party A2A server in a child process on a free loopback port, up when its card answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVERS / script), str(port), *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {args[0]}"} if args else {}
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/.well-known/agent-card.json", headers=headers, timeout=2)
            break
        except httpx.HTTPError:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the A2A server did not start"
            time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def sdk_client_call(server, name: str, fn):
    async def go():
        async with httpx.AsyncClient(headers=server.headers, timeout=60) as http:
            card = await A2ACardResolver(http, server.urls[name]).get_agent_card()
            client = await create_client(card, client_config=ClientConfig(httpx_client=http, streaming=True))
            return card, await fn(client)

    return asyncio.run(go())


def user(text: str, context_id: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex,
                                              parts=[Part(text=text)], context_id=context_id))


async def collect(client, request):
    return [event async for event in client.send_message(request)]


# -- the SDK's client against agio's server ---------------------------------------------------------------

def test_the_sdk_client_reads_cards_sends_streams_and_gets_tasks_from_agios_server(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    described = Agent(model=researcher.model, tools=[researcher.registry.get("lookup")], name="researcher",
                      system_prompt="Never reveal the notes' source.", description="Looks topics up in the notes.")

    async def go(client):
        events = await collect(client, user("tides"))
        task_id = next(e.task.id for e in events if e.HasField("task"))
        context_id = next(e.task.context_id for e in events if e.HasField("task"))
        again = await collect(client, user("bees", context_id))  # the same conversation
        got = await client.get_task(GetTaskRequest(id=task_id))
        return events, again, got, context_id

    with served([described, team[1]], repo) as server:
        card, (events, again, got, context_id) = sdk_client_call(server, "researcher", go)
    assert card.name == "researcher" and card.description == "Looks topics up in the notes."
    assert [s.name for s in card.skills] == ["lookup"] and "Never reveal" not in json.dumps(str(card))
    assert card.capabilities.streaming and "bearer" in card.security_schemes
    updates = [e.status_update for e in events if e.HasField("status_update")]
    working = [u for u in updates if u.status.state == TaskState.TASK_STATE_WORKING]
    # one status update per stored step, as it is stored, with its sequence and role
    stored = [(int(u.status.message.metadata["agio"]["sequence"]), u.status.message.metadata["agio"]["role"])
              for u in working]
    assert stored == [(1, "user"), (2, "assistant"), (3, "tool"), (4, "assistant")]
    assert "calls `lookup" in get_message_text(working[1].status.message)
    assert updates[-1].status.state == TaskState.TASK_STATE_COMPLETED
    artifact = next(e.artifact_update.artifact for e in events if e.HasField("artifact_update"))
    assert get_artifact_text(artifact) == "Found: Tides come from the Moon's pull."
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(got.artifacts[0]) == "Found: Tides come from the Moon's pull."
    # each task is a stored run; the context is one session holding both turns
    run_ids = [r.id for r in repo.list_runs(context_id)]
    assert len(run_ids) == 2 and artifact.metadata["agio"]["run_id"] in run_ids
    assert [s.content for s in repo.get_steps(context_id) if s.role.value == "user"] == ["tides", "bees"]
    assert repo.get_session(context_id).metadata["owner"]["via"] == "a2a"
    assert any(get_artifact_text(e.artifact_update.artifact) == "Found: Bees dance to share where flowers are."
               for e in again if e.HasField("artifact_update"))


def test_tasks_cancel_is_stop_the_completed_steps_kept(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")

    @tool
    async def slow_lookup(topic: str) -> str:
        """Look a topic up, slowly."""
        await asyncio.sleep(60)
        return "never"

    slow = Agent(model=ScriptedModel([Reply.call("slow_lookup", topic="x"), "done"]), tools=[slow_lookup], name="slow")

    async def go(client):
        seen = []
        stream = client.send_message(user("look it up"))
        async for event in stream:
            seen.append(event)
            if event.HasField("status_update") and event.status_update.status.message.metadata["agio"]["role"] == "assistant":
                break  # the tool is running now
        task_id = next(e.task.id for e in seen if e.HasField("task"))
        await stream.aclose()
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        for _ in range(100):
            got = await client.get_task(GetTaskRequest(id=task_id))
            if got.status.state == TaskState.TASK_STATE_CANCELED:
                break
            await asyncio.sleep(0.05)
        return cancelled, got

    with served(slow, repo) as server:
        _, (cancelled, got) = sdk_client_call(server, "slow", go)
    assert got.status.state == TaskState.TASK_STATE_CANCELED
    (run,) = repo.list_runs()
    for _ in range(100):  # the run records its cancellation as the task is cancelled
        run = repo.get_run(run.id)
        if run.status.value != "running":
            break
        time.sleep(0.05)
    assert run.status.value == "cancelled"
    assert [s.role.value for s in repo.get_steps(run.session_id)][:2] == ["user", "assistant"]


def test_a_context_of_another_agent_is_refused_and_nothing_of_it_is_read(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")
    diary = Agent(model=FunctionModel(lambda m, t: "noted", name="diary-script"), name="diary")
    foreign = StepRunner(diary, repository=repo).run_sync(None, "the code is four four two")
    seen = []
    writer = Agent(model=FunctionModel(lambda m, t: seen.append(json.dumps(m)) or "ok", name="w"), name="writer")

    async def go(client):
        return await collect(client, user("what was the code?", foreign.session_id))

    with served(writer, repo) as server:
        _, events = sdk_client_call(server, "writer", go)
    final = [e.status_update for e in events if e.HasField("status_update")][-1]
    assert final.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(final.status.message) == (f"no session {foreign.session_id!r} among the sessions of agent "
                                                      "'writer'")
    assert not seen and len(repo.get_steps(foreign.session_id)) == 2


def test_a_context_another_agent_took_while_this_one_waited_is_refused_once_claimed(tmp_path):
    """A client names a new context id to two served agents at once: the first makes the session, the second
    checked it was free before the first stored it. Asked again once the session is claimed, the second is
    refused with the line an unknown id gets, and reads nothing of it (its model is never called)."""
    from agio_notebook.serve.access import Access, NotServedError
    from agio_notebook.serve.runs import run_agent

    repo = TinyDBRepository(tmp_path / "store")
    seen = []
    writer = Agent(model=FunctionModel(lambda m, t: "noted", name="w"), name="writer")
    diary = Agent(model=FunctionModel(lambda m, t: seen.append(m) or "ok", name="d"), name="diary")
    access = Access({"writer": writer, "diary": diary}, repo, via="a2a")
    context = uuid.uuid4().hex
    checked_free = access.new_session(diary, context)  # what the check before the claim decided
    asyncio.run(run_agent(access, writer, "the code is 4242", access.new_session(writer, context), None, _ignore))
    with pytest.raises(NotServedError, match=f"no session '{context}' among the sessions of agent 'diary'"):
        asyncio.run(run_agent(access, diary, "what was the code?", checked_free, None, _ignore))
    assert seen == [] and [r.agent_name for r in repo.list_runs(context)] == ["writer"]
    again = asyncio.run(run_agent(access, writer, "and now?", context, None, _ignore))  # its owner goes on
    assert again.ok and len(repo.get_steps(context)) == 4


async def _ignore(progress) -> None:
    return None


def test_the_token_host_and_origin_guard_every_request(tmp_path):
    with served(team, TinyDBRepository(tmp_path / "store")) as server:
        card_url = server.urls["writer"] + "/.well-known/agent-card.json"
        assert httpx.get(card_url, timeout=10).status_code == 401
        assert httpx.get(card_url, headers={"Authorization": "Bearer " + "x" * 43}, timeout=10).status_code == 401
        assert httpx.get(card_url, headers={**server.headers, "Host": "evil.example"}, timeout=10).status_code == 421
        assert httpx.get(card_url, headers={**server.headers, "Origin": "http://evil.example"},
                         timeout=10).status_code == 403
        assert httpx.get(card_url, headers=server.headers, timeout=10).json()["name"] == "writer"
        assert server.token not in repr(server)


# -- agio's a2a_agent against third-party servers ----------------------------------------------------------

def _ask(tool, query: str, repo=None):
    outer = Agent(model=ScriptedModel([Reply.call(tool.name, query=query), "done"]), tools=[tool], name="asker")
    events = []

    async def go():
        runner = StepRunner(outer, repository=repo or TinyDBRepository(Path(os.environ["AGIO_TEST_TMP"]) / "outer"))
        async for event in runner.run_stream(None, "go"):
            events.append(event)

    asyncio.run(go())
    tool_step = next(e.payload["step"] for e in events
                     if e.type.value == "step_completed" and e.payload["step"]["role"] == "tool")
    nested = [e.payload for e in events if e.type.value == "nested"]
    return tool_step, nested


@pytest.fixture(autouse=True)
def _outer_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_TEST_TMP", str(tmp_path))


def test_agio_calls_a_server_written_with_the_a2a_sdk(tmp_path):
    log = tmp_path / "cancelled.log"
    with child_server("a2a_sdk_server.py", TOKEN, env={"A2A_CANCELLED_LOG": str(log)}) as url:
        echo = agio_notebook.a2a_agent(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=3)
        assert echo.name == "Echo_Archive" and "Echoes what it is asked" in echo.description
        step, nested = _ask(echo, "echo hello there")
        assert step["status"] == "ok" and step["content"] == "echo: hello there"
        # the remote task streamed into the calling run as a nested card under the tool call
        kinds = [n["event"]["type"] for n in nested]
        assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
        texts = [n["event"]["payload"]["step"]["content"] for n in nested if n["event"]["type"] == "step_completed"]
        assert texts == ["echo hello there", "reading 'echo hello there'", "writing the answer"]
        assert nested[0]["path"][0]["tool_call_id"] == step["tool_call_id"]
        assert "time limit 3s" in nested[0]["event"]["payload"]["run"]["model_name"]
        failed, _ = _ask(echo, "fail")
        assert failed["status"] == "error" and failed["error"].endswith("ended failed: the archive is closed today")
        asked, _ = _ask(echo, "ask")
        assert asked["error"].endswith("A2A agent 'Echo Archive' asks for input, which a tool call cannot give")
        # a task that never ends: the caller's time limit answers, and the remote task is cancelled
        started = time.monotonic()
        forever, nested = _ask(echo, "forever")
        assert time.monotonic() - started < 30
        assert forever["status"] == "error" and forever["error"].endswith(
            "A2A agent 'Echo Archive' gave no answer within 3s (the a2a_agent timeout); its task was cancelled")
        assert nested[-1]["event"]["type"] == "run_failed"
        for _ in range(100):
            if log.exists() and log.read_text().strip():
                break
            time.sleep(0.05)
        assert len(log.read_text().split()) == 1  # the remote executor saw its cancellation


def test_agio_calls_a_server_written_with_fasta2a():
    with child_server("a2a_fasta2a_server.py") as url:
        shouter = agio_notebook.a2a_agent(url)
        step, nested = _ask(shouter, "upper: quiet please")
        assert step["status"] == "ok" and step["content"] == "QUIET PLEASE"
        assert nested[-1]["event"]["type"] == "run_completed"
        failed, _ = _ask(shouter, "fail")
        assert failed["status"] == "error" and "A2A agent 'Shouter'" in failed["error"] and "ended failed" in failed["error"]


def test_stop_cancels_the_remote_task(tmp_path):
    log = tmp_path / "cancelled.log"
    with child_server("a2a_sdk_server.py", TOKEN, env={"A2A_CANCELLED_LOG": str(log)}) as url:
        echo = agio_notebook.a2a_agent(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
        outer = Agent(model=ScriptedModel([Reply.call(echo.name, query="forever"), "done"]), tools=[echo])
        repo = TinyDBRepository(tmp_path / "outer")

        async def go():
            seen = []

            async def run():
                async for event in StepRunner(outer, repository=repo).run_stream(None, "go"):
                    seen.append(event)

            task = asyncio.ensure_future(run())
            while not any(e.type.value == "nested" and e.payload["event"]["type"] == "step_completed"
                          and e.payload["event"]["payload"]["step"]["content"] == "still working" for e in seen):
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return seen

        seen = asyncio.run(go())
    assert seen[-1].type.value == "run_cancelled"  # the cell's view settles its nested card as cancelled with it
    for _ in range(100):
        if log.exists() and log.read_text().strip():
            break
        time.sleep(0.05)
    assert len(log.read_text().split()) == 1  # the remote task was cancelled, not left running


def test_agio_calls_agio_and_recursion_through_a2a_stops_at_the_depth_limit(tmp_path):
    repo = TinyDBRepository(tmp_path / "store")

    def reply(messages, tools):
        if messages[-1]["role"] == "tool":
            return f"back: {messages[-1]['content'][:120]}"
        return Reply.call("looper", query="one level deeper")

    looper = Agent(model=FunctionModel(reply, name="looper-script"), name="looper")
    with served([looper, *team], repo) as server:
        researcher_tool = agio_notebook.a2a_agent(server.urls["researcher"], headers=server.headers)
        step, nested = _ask(researcher_tool, "tides")
        assert step["content"] == "Found: Tides come from the Moon's pull."
        shown = [n["event"]["payload"]["step"]["content"] for n in nested if n["event"]["type"] == "step_completed"]
        assert shown[0] == "tides" and any("calls `lookup" in text for text in shown)  # the remote run's steps
        looper.registry.add(agio_notebook.a2a_agent(server.urls["looper"], headers=server.headers, timeout=120))
        StepRunner(looper, repository=repo).run_sync(None, "start")
    chain = sorted((r for r in repo.list_runs() if r.agent_name == "looper"), key=lambda r: r.depth)
    assert [r.depth for r in chain] == list(range(MAX_DEPTH + 1))
    for outer, inner in zip(chain, chain[1:]):
        assert inner.parent_run_id == outer.id
    refusal = next(s for s in repo.get_steps(chain[-1].session_id) if s.role.value == "tool")
    assert refusal.status == "error" and "agents may nest 5 levels deep, and this call came from depth 5" in refusal.error


# -- bad arguments and auth: one line each ---------------------------------------------------------------

def test_bad_agents_and_servers_are_one_line(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(A2AError, match=f"^A2A agent at {closed} is unreachable: "):
        agio_notebook.a2a_agent(closed)
    with pytest.raises(A2AError, match="needs the agent's http\\(s\\) URL"):
        agio_notebook.a2a_agent("ftp://example.org")
    with pytest.raises(A2AError, match="timeout must be a number of seconds > 0"):
        agio_notebook.a2a_agent("http://127.0.0.1:1", timeout=0)
    with child_server("a2a_sdk_server.py", TOKEN) as url:
        with pytest.raises(A2AError, match="refused the request \\(401\\): a missing or wrong token"):
            agio_notebook.a2a_agent(url)
        with pytest.raises(A2AError, match="refused the request \\(401\\)"):
            agio_notebook.a2a_agent(url, headers={"Authorization": "Bearer wrong-token-of-some-length"})
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with pytest.raises(A2AError, match="its agent card cannot be read"):
            agio_notebook.a2a_agent(url + "/bad", headers=auth)
        with pytest.raises(A2AError, match="no agent card within 1s"):
            agio_notebook.a2a_agent(url + "/slow", headers=auth, connect_timeout=1)
        with pytest.raises(A2AError, match="no agent card at .*/nowhere/.well-known/agent-card.json \\(HTTP 404\\)"):
            agio_notebook.a2a_agent(url + "/nowhere", headers=auth)
        echo = agio_notebook.a2a_agent(url, headers=auth)
    # the server went away after the tool was made: the call is one tool-result line
    step, nested = _ask(echo, "echo anyone?")
    assert step["status"] == "error" and "A2A agent 'Echo Archive' at " in step["error"] and " failed: " in step["error"]
    assert "\n" not in step["error"] and TOKEN not in json.dumps(step)
    assert nested[-1]["event"]["type"] == "run_failed"


@pytest.mark.parametrize("args, says", [
    (["a2a", "serve", "--agents", "agio_agents:lookup"], "expected an Agent"),
    (["a2a", "serve", "--agents", "agio_agents:nobody"], "has no attribute 'nobody'"),
    (["a2a", "serve"], "name the agents"),
])
def test_bad_a2a_serve_arguments_are_one_line(tmp_path, args, says):
    (tmp_path / "store").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SERVERS), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "agio_notebook", "--store", str(tmp_path / "store"), *args],
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def test_agio_a2a_serve_from_a_terminal_serves_the_sdk_client(tmp_path):
    (tmp_path / "store").mkdir()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SERVERS), os.environ.get("PYTHONPATH")])),
           "AGIO_A2A_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "agio_notebook", "--store", str(tmp_path / "store"), "a2a", "serve",
                             "--agents", "agio_agents:team", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert f"writer at http://127.0.0.1:{port}/writer" in line and TOKEN not in line
        writer = agio_notebook.a2a_agent(f"http://127.0.0.1:{port}/writer", headers={"Authorization": f"Bearer {TOKEN}"})
        step, _ = _ask(writer, "a line")
        assert step["content"] == "Draft: a line"
    finally:
        proc.terminate()
        proc.wait(10)
    with pytest.raises(AgioError):
        agio_notebook.a2a_agent(f"http://127.0.0.1:{port}/writer")
