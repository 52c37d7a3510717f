"""A remote A2A agent as a tool in a real ipykernel: its task streams into the calling cell as a nested card
(live and in the saved transcript), with its status messages and the time limit it runs under."""

from __future__ import annotations

import html
import json

import pytest

from kernel_support import of_type, offline_kernel
from test_a2a import TOKEN, child_server

MIME = "application/vnd.agio.run+json"


@pytest.fixture(scope="module")
def archive():
    with child_server("a2a_sdk_server.py", TOKEN) as url:
        yield url


def test_a_remote_task_is_a_nested_card_in_the_calling_cell(tmp_path_factory, archive):
    setup = (f"%load_ext agio_notebook\n"
             f"from agio_notebook import Agent, FunctionModel, Reply, a2a_agent\n"
             f"echo = a2a_agent({archive!r}, headers={{'Authorization': 'Bearer {TOKEN}'}}, timeout=60)\n"
             "def model(messages, tools):\n"
             "    if messages[-1]['role'] == 'user':\n"
             "        return Reply.call(echo.name, query='echo the tide tables')\n"
             "    return 'the archive said: ' + messages[-1]['content']\n"
             "asker = Agent(model=FunctionModel(model), tools=[echo], name='asker')\n")
    k = offline_kernel(tmp_path_factory, "a2a_kernel", setup)
    try:
        res = k.execute("%%agio asker --new-session\nwhat do the tide tables say?", timeout=120)
        assert not of_type(res["messages"], "error")
        live = [str(m["content"]["data"].get("state", {}).get("value", "")) for m in of_type(res["messages"], "comm_msg")]
        assert any('class="agio-nested-run"' in v and "reading" in v for v in live)  # streamed while it ran
        bundles = [m["content"]["data"] for m in of_type(res["messages"], "update_display_data", "display_data")
                   if MIME in m["content"]["data"]]
        final = bundles[-1]
        assert final[MIME]["run"]["status"] == "completed"
        assert final[MIME]["run"]["final_text"] == "the archive said: echo: the tide tables"
        assert final["text/html"].count('class="agio-nested-run"') == 1
        nested = [e["payload"] for e in final[MIME]["events"] if e["type"] == "nested"]
        started = next(n["event"]["payload"]["run"] for n in nested if n["event"]["type"] == "run_started")
        assert started["agent_name"] == "Echo Archive" and "time limit 60s" in started["model_name"]
        steps = [n["event"]["payload"]["step"]["content"] for n in nested if n["event"]["type"] == "step_completed"]
        assert steps == ["echo the tide tables", "reading 'echo the tide tables'", "writing the answer"]
        assert "reading 'echo the tide tables'" in html.unescape(final["text/html"])  # drawn in the saved card
        assert TOKEN not in json.dumps(final)
    finally:
        k.close()
