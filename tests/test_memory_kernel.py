"""In a real kernel: an edited approval end to end, feedback through %agio, memory retrieved next run,
and the trace drawing as a notebook output."""

from __future__ import annotations

import json

import pytest
from kernel_support import of_type, offline_kernel

SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, tool, memory
import agio_notebook

@tool(requires_approval=True)
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"

seen = []

def mailer(messages, tools):
    seen.append([dict(m) for m in messages])
    last = messages[-1]
    if last["role"] == "user":
        return Reply.call("send_email", to="all@example.com", subject="hello")
    return f"tool said: {last['content']}"

mail = Agent(model=FunctionModel(mailer), tools=[send_email], name="mail")

def tutor_reply(messages, tools):
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return "299792 km/s" if "kilometres" in system else "186282 miles/s"

tutor = Agent(model=FunctionModel(tutor_reply), name="tutor", system_prompt="You teach physics.")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "memory", SETUP)
    yield k
    k.close()


def send_comm(kernel, comm_id, data):
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))


def comm_of(messages, model_name=None, **state):
    found = []
    for m in of_type(messages, "comm_open"):
        s = m["content"]["data"].get("state", {})
        if (model_name is None or s.get("_model_name") == model_name) and all(s.get(k) == v for k, v in state.items()):
            found.append(m["content"]["comm_id"])
    return found[-1]


def stream_text(res):
    return "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))


def test_edited_approval_end_to_end(kernel):
    res = kernel.execute("%%agio mail --new-session\nemail the team")
    assert "waits for your approval" in stream_text(res)
    msgs = res["messages"]
    textarea = comm_of(msgs, "TextareaModel")
    note = [m["content"]["comm_id"] for m in of_type(msgs, "comm_open")
            if m["content"]["data"]["state"].get("_model_name") == "HTMLModel"]
    approve = comm_of(msgs, description="Approve")
    # 1. arguments that fail the tool's schema: one line on the card, nothing runs
    send_comm(kernel, textarea, {"method": "update", "state": {"value": json.dumps({"to": "team@example.com"})},
                                 "buffer_paths": []})
    send_comm(kernel, approve, {"method": "custom", "content": {"event": "click"}})
    after = kernel.drain(10, stop=lambda m: m["msg_type"] == "comm_msg" and "rejects these arguments"
                         in json.dumps(m["content"]))
    shown = [m for m in after if "rejects these arguments" in json.dumps(m["content"])]
    assert shown and "subject: Field required" in json.dumps(shown[-1]["content"])
    assert shown[-1]["content"]["comm_id"] in note
    assert not of_type(after, "update_display_data")  # the run still waits
    textarea = comm_of(after, "TextareaModel")  # each edit renews the editor: the next edit goes to the new one
    # 2. valid edited arguments: the call runs as edited
    send_comm(kernel, textarea, {"method": "update", "state": {
        "value": json.dumps({"to": "team@example.com", "subject": "hello"})}, "buffer_paths": []})
    send_comm(kernel, approve, {"method": "custom", "content": {"event": "click"}})
    done = kernel.drain(30, stop=lambda m: m["msg_type"] == "update_display_data")
    payload = of_type(done, "update_display_data")[-1]["content"]["data"]["application/vnd.agio.run+json"]
    tool_step = next(e["payload"]["step"] for e in payload["events"]
                     if e["type"] == "step_completed" and e["payload"]["step"]["role"] == "tool")
    approval = tool_step["extra"]["approval"]
    assert json.loads(approval["proposed_arguments"]) == {"to": "all@example.com", "subject": "hello"}
    assert json.loads(approval["arguments"]) == {"to": "team@example.com", "subject": "hello"}
    assert approval["edited"] is True
    # the assistant step keeps the call as the model proposed it
    model_step = next(e["payload"]["step"] for e in payload["events"]
                      if e["type"] == "step_completed" and e["payload"]["step"]["role"] == "assistant")
    assert json.loads(model_step["tool_calls"][0]["function"]["arguments"])["to"] == "all@example.com"
    # the model's next turn saw the edited call's result and the note
    last_tool_msg = kernel.value("seen[-1][-1]")
    assert last_tool_msg["content"].startswith("sent to team@example.com: hello")
    assert "the user edited this call before approving it" in last_tool_msg["content"]
    assert 'You proposed {"to": "all@example.com", "subject": "hello"}' in last_tool_msg["content"]


def test_feedback_magic_accept_and_next_run_retrieves(kernel):
    res = kernel.execute("%%agio tutor --new-session\nWhat is the speed of light?")
    first = kernel.value("_.run_id")
    assert kernel.value("_.final_text") == "186282 miles/s"
    res = kernel.execute(f"%agio feedback {first} -1 Give speeds in kilometres per second")
    out = stream_text(res)
    assert "feedback -1 stored" in out and "proposed experience" in out
    pid = kernel.value("memory.proposals().loc[0, 'id']")
    res = kernel.execute(f"%agio memory accept {pid}")
    assert "is in memory (tutor)" in stream_text(res)
    kernel.execute("%%agio tutor --new-session\nWhat is the speed of light?")
    assert kernel.value("_.final_text") == "299792 km/s"
    # bad input: one line, no traceback
    res = kernel.execute("%agio feedback nope +1")
    err = [m for m in of_type(res["messages"], "error", "stream") if "no run 'nope'" in json.dumps(m["content"])]
    assert err and not any(m["msg_type"] == "error" and len(m["content"]["traceback"]) > 2 for m in err)


def test_trace_displays_as_a_drawing(kernel):
    kernel.execute("%%agio tutor --new-session\nWhat is the speed of light?")
    res = kernel.execute("agio_notebook.trace(_.run_id)")
    data = of_type(res["messages"], "execute_result")[-1]["content"]["data"]
    assert data["image/png"] and "image/svg+xml" not in data and data["application/vnd.agio.trace+json"]["layout"]["nodes"]
    run_id = kernel.value("_.run_id")
    res = kernel.execute(f"%agio trace {run_id}")
    data = of_type(res["messages"], "execute_result")[-1]["content"]["data"]
    trace = data["application/vnd.agio.trace+json"]
    assert [n["kind"] for n in trace["nodes"]] == ["user", "memory_read", "model"]
    assert len(trace["layout"]["nodes"]) == 3
