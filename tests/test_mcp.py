"""MCP servers as tools: a real reference server from PyPI (mcp-server-time) over stdio, and a small
server built on the SDK (tests/servers/mcp_edge_server.py) over stdio and streamable HTTP for the
edge cases: a tool error, a hang, a crash and its restart, bad commands and protocol versions."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner
from agio_notebook.models import call
from agio_notebook.storage.memory import InMemoryRepository
from agio_notebook.tools.mcp import MCPConnection, MCPError, close_mcp_servers, mcp_tools
from lab_support import free_port

SERVERS = Path(__file__).parent / "servers"
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
EDGE_SERVER = [sys.executable, str(SERVERS / "mcp_edge_server.py")]


@pytest.fixture(autouse=True)
def _close_servers():
    yield
    close_mcp_servers()


def _run(tools, *replies, timeout: float | None = None):
    agent = Agent(model=ScriptedModel(list(replies)), tools=tools)
    return StepRunner(agent, repository=InMemoryRepository()).run_sync(None, "go")


def test_a_reference_server_becomes_tools_with_schemas_and_descriptions_kept():
    tools = {t.name: t for t in mcp_tools(TIME_SERVER)}
    assert {"get_current_time", "convert_time"} <= set(tools)
    current = tools["get_current_time"]
    assert "time" in current.description.lower()
    params = current.schema()["function"]["parameters"]
    assert params["type"] == "object" and "timezone" in params["properties"]
    assert "timezone" in params.get("required", [])

    result = _run(list(tools.values()), Reply.call("get_current_time", timezone="Europe/Paris"), "done")
    tool_step = next(s for s in result.steps if s.role.value == "tool")
    assert tool_step.status == "ok", tool_step.error
    assert json.loads(tool_step.content)["timezone"] == "Europe/Paris"


def test_a_server_is_started_once_and_reused_then_closed():
    first = mcp_tools(EDGE_SERVER)
    second = mcp_tools(EDGE_SERVER, allow=["pid"])
    assert [t.name for t in second] == ["pid"]
    pids = {_run(tools, Reply.call("pid"), "ok").steps[2].content for tools in (first, second)}
    assert len(pids) == 1  # one process served both agents
    close_mcp_servers()
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(int(pids.pop()), 0)


def test_tool_errors_hangs_and_crashes_become_error_results_and_the_server_restarts():
    tools = mcp_tools(EDGE_SERVER, timeout=6.0)  # a restarted server answers well within it on a busy machine
    result = _run(tools, Reply.calls(call("fail", reason="broken on purpose"), call("echo", text="hi", times=2)),
                  Reply.call("hang", seconds=30), Reply.call("pid"), Reply.call("crash"), Reply.call("pid"), "end")
    by_seq = {s.sequence: s for s in result.steps}
    tool_steps = [s for s in result.steps if s.role.value == "tool"]
    assert [s.status for s in tool_steps] == ["error", "ok", "error", "ok", "error", "ok"]
    assert "broken on purpose" in tool_steps[0].error and tool_steps[1].content == "hi hi"
    assert "no answer within 6s" in tool_steps[2].error
    assert "failed during crash" in tool_steps[4].error
    assert tool_steps[3].content != tool_steps[5].content  # a new process after the crash
    assert result.status.value == "completed" and by_seq[max(by_seq)].content == "end"


def test_restarts_are_bounded():
    connection = MCPConnection(EDGE_SERVER, timeout=5.0, max_restarts=1)
    tools = {t.name: t for t in mcp_tools(connection)}
    result = _run(list(tools.values()), Reply.call("crash"), Reply.call("crash"), Reply.call("echo", text="x"), "end")
    errors = [s.error for s in result.steps if s.role.value == "tool"]
    assert "failed during crash" in errors[0] and "failed during crash" in errors[1]
    assert "restarted 1 times already" in errors[2]


def test_invalid_arguments_are_checked_against_the_servers_schema():
    tools = mcp_tools(EDGE_SERVER)
    result = _run(tools, Reply.call("echo", text=3), "end")
    tool_step = next(s for s in result.steps if s.role.value == "tool")
    assert tool_step.status == "error" and "is not of type 'string'" in tool_step.error


def test_streamable_http_transport():
    port = free_port()
    proc = subprocess.Popen([*EDGE_SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
            except urllib.error.HTTPError:
                break  # the server answers (a GET without a session is refused): it is up
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "HTTP MCP server did not start"
                time.sleep(0.1)
        tools = mcp_tools(url)
        result = _run(tools, Reply.call("echo", text="over http", times=1), "end")
        assert result.steps[2].content == "over http"
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_servers_get_one_clear_line():
    with pytest.raises(MCPError, match="command not found: no-such-mcp-server"):
        mcp_tools("no-such-mcp-server --stdio")
    with pytest.raises(MCPError, match="Unsupported protocol version.*1999-01-01"):
        mcp_tools([sys.executable, str(SERVERS / "mcp_wrong_version.py")])
    with pytest.raises(MCPError, match="has no tool 'ech'"):
        mcp_tools(EDGE_SERVER, allow=["ech"])
    with pytest.raises(MCPError, match="empty"):
        mcp_tools("  ")


def test_magics_name_a_server_and_a_cell_uses_its_tools_in_a_real_kernel(tmp_path_factory):
    from kernel_support import offline_kernel

    setup = ("%load_ext agio_notebook\n"
             "from agio_notebook import Agent, ScriptedModel, Reply\n"
             "asker = Agent(model=ScriptedModel([Reply.call('get_current_time', timezone='Asia/Tokyo'), "
             "'It is late in Tokyo.']), name='asker')\n")
    k = offline_kernel(tmp_path_factory, "mcp_kernel", setup)
    try:
        added = k.execute(f"%agio mcp add clock -- {' '.join(TIME_SERVER)}")
        assert "registered" in json.dumps([m["content"] for m in added["messages"]])
        run = k.execute("%%agio asker --mcp clock\nWhat time is it in Tokyo?", timeout=120)
        shown = json.dumps([m["content"] for m in run["messages"]])
        assert "get_current_time" in shown and "Asia/Tokyo" in shown  # the tool card, live and in the transcript
        assert k.value("_.status") == "completed"
        steps = k.value("[(s.role.value, s.status) for s in "
                        "get_ipython().magics_manager.registry['AgioMagics'].controller.repository"
                        ".get_steps(_.session_id)]")
        assert steps == [["user", "ok"], ["assistant", "ok"], ["tool", "ok"], ["assistant", "ok"]]
        listed = k.execute("%agio mcp list")
        assert "clock" in json.dumps([m["content"] for m in listed["messages"]])
        bad = k.execute("%%agio --mcp nowhere\nhello")
        assert "no MCP server named 'nowhere'" in json.dumps(bad["reply"]["content"]) + json.dumps(
            [m["content"] for m in bad["messages"]])
    finally:
        k.close()


BAD_SERVER = [sys.executable, str(SERVERS / "mcp_bad_server.py")]


def test_tools_with_bad_names_or_ref_loops_are_left_out_naming_the_server_and_the_others_work():
    import warnings

    from agio_notebook.tools.mcp import MCPToolRefused

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tools = mcp_tools(BAD_SERVER)
    assert sorted(t.name for t in tools) == ["echo", "huge", "tree_size"]
    refused = {str(w.message) for w in caught if issubclass(w.category, MCPToolRefused)}
    assert len(refused) == 8, refused
    assert all(line.startswith("MCP server 'mcp_bad_server.py': tool ") and "\n" not in line for line in refused)
    assert any("'looped' left out: its input schema has a $ref loop (" in line for line in refused)
    assert any("'self_ref' left out: its input schema has a $ref loop (#/properties/x → #/properties/x)" in line
               for line in refused)
    assert any("'dangling' left out: its input schema has a $ref to #/$defs/Missing, which points nowhere" in line
               for line in refused)
    for name in ("two words", "line\nbreak", "", "dotted.name", "x" * 80):  # a long name is shown cut
        assert any(f"tool {name!r} left out: its name is not a tool name" in line for line in refused), name
    # a recursive schema through properties/items is sane: kept, validated and called
    result = _run(tools, Reply.call("tree_size", node={"name": "a", "children": [{"name": "b", "children": []}]}),
                  Reply.call("echo", text="still here"), "end")
    contents = [s.content for s in result.steps if s.role.value == "tool"]
    assert contents == ["2", "still here"] and result.status.value == "completed"
    # asking for a refused tool by name is one clear error, not a silent omission
    with pytest.raises(MCPError, match="offers tool 'looped', but its input schema has a \\$ref loop"):
        mcp_tools(BAD_SERVER, allow=["echo", "looped"])


@pytest.mark.filterwarnings("ignore::agio_notebook.tools.mcp.MCPToolRefused")
def test_a_huge_result_is_capped_and_says_so():
    tools = mcp_tools(BAD_SERVER, max_result_chars=5000)
    result = _run(tools, Reply.call("huge", text=""), "end")
    tool_step = next(s for s in result.steps if s.role.value == "tool")
    head, _, note = tool_step.content.rpartition("\n")
    assert head == "y" * 5000
    assert note == "[truncated: the result had 20,971,520 characters; the first 5,000 are shown]"
    assert result.status.value == "completed"


def test_credential_headers_are_secrets_of_the_process():
    from agio_notebook.core import scrub
    from agio_notebook.tools.mcp import MCPConnection

    token, key = "tok-" + "q" * 30, "plain words api key value"
    MCPConnection("http://127.0.0.1:9/mcp", headers={"Authorization": f"Bearer {token}", "X-Api-Key": key,
                                                      "Accept": "application/json"})
    assert scrub(f"sent {token} and {key} as application/json") == "sent *** and *** as application/json"
