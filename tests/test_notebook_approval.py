"""Approval cards and the Stop button in a real kernel, clicked the way the frontend clicks (comm messages)."""

from __future__ import annotations

import json
import time

import pytest

from kernel_support import of_type, offline_kernel, widget_ids

SETUP = r'''
%load_ext agio_notebook
import asyncio
from agio_notebook import Agent, FunctionModel, Reply, tool

deleted = []

@tool(requires_approval=True)
def delete_note(name: str) -> str:
    """Delete a note."""
    deleted.append(name)
    return f"deleted {name}"

def planner(messages, tools):
    last = messages[-1]
    if last["role"] == "user":
        return Reply.call("delete_note", name="draft.txt")
    return f"tool said: {last['content']}"

guarded = Agent(model=FunctionModel(planner), tools=[delete_note], name="guarded")

async def endless(messages, tools):
    for i in range(100000):
        await asyncio.sleep(0.02)
        yield f"w{i} "

chatty = Agent(model=FunctionModel(endless), name="chatty")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "approval", SETUP)
    yield k
    k.close()


def send_comm(kernel, comm_id, data):
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    kernel.kc.shell_channel.send(msg)


def click(kernel, comm_id):
    send_comm(kernel, comm_id, {"method": "custom", "content": {"event": "click"}})


def run_until_card(kernel, cell):
    res = kernel.execute(cell)
    out = "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))
    assert "waits for your approval" in out
    return res["messages"]


def final_bundle(kernel):
    msgs = kernel.drain(20, stop=lambda m: m["msg_type"] == "update_display_data")
    updates = of_type(msgs, "update_display_data")
    assert updates, "the run did not finish"
    return updates[-1]["content"]["data"]["application/vnd.agio.run+json"]


def test_approve_with_edited_arguments(kernel):
    msgs = run_until_card(kernel, "%%agio guarded --new-session\nclean up")
    textarea = [m["content"]["comm_id"] for m in of_type(msgs, "comm_open")
                if m["content"]["data"]["state"].get("_model_name") == "TextareaModel"][-1]
    send_comm(kernel, textarea, {"method": "update", "state": {"value": json.dumps({"name": "old.txt"})},
                                 "buffer_paths": []})
    time.sleep(0.3)
    click(kernel, widget_ids(msgs, description="Approve")[-1])
    payload = final_bundle(kernel)
    types = [e["type"] for e in payload["events"]]
    assert "approval_requested" in types and "approval_resolved" in types
    resolved = next(e for e in payload["events"] if e["type"] == "approval_resolved")["payload"]
    assert resolved["approved"] is True and json.loads(resolved["arguments"]) == {"name": "old.txt"}
    assert payload["run"]["final_text"].startswith("tool said: deleted old.txt")
    assert kernel.value("deleted") == ["old.txt"]
    tool_step = [e["payload"]["step"] for e in payload["events"]
                 if e["type"] == "step_completed" and e["payload"]["step"]["role"] == "tool"][0]
    assert tool_step["extra"]["approval"]["approved"] is True and tool_step["extra"]["approval"]["edited"]


def test_reject_reaches_the_model_as_a_rejected_result(kernel):
    msgs = run_until_card(kernel, "%%agio guarded --new-session\nclean up again")
    click(kernel, widget_ids(msgs, description="Reject")[-1])
    payload = final_bundle(kernel)
    failed = next(e for e in payload["events"] if e["type"] == "tool_call_failed")["payload"]
    assert failed["error_type"] == "rejected"
    assert payload["run"]["final_text"].startswith("tool said: Tool call rejected")
    assert kernel.value("deleted") == ["old.txt"]  # nothing more was deleted


def test_stop_button_cancels_a_background_run(kernel):
    res = kernel.execute("%%agio chatty --background --new-session\ngo on forever")
    stop = widget_ids(res["messages"], description="Stop")
    assert stop
    time.sleep(0.5)
    click(kernel, stop[-1])
    payload = final_bundle(kernel)
    assert payload["run"]["status"] == "cancelled"
    repo = "get_ipython().magics_manager.registry['AgioMagics'].controller.repository"
    assert kernel.value(f"{repo}.get_run(_.run_id).status.value") == "cancelled"
    # the words streamed before Stop stay, as a step marked partial
    assert kernel.value(f"[(s.role.value, s.status) for s in {repo}.get_steps(_.session_id)]") == [
        ["user", "ok"], ["assistant", "cancelled"]]
