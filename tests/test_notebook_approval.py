"""Approval cards and the Stop button in a real kernel, clicked the way the frontend clicks (comm messages)."""

from __future__ import annotations

import json
import time

import pytest

from kernel_support import collect_until, of_type, offline_kernel, widget_ids

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


class Frontend:
    """What JupyterLab's widget manager does with edits, told by the kernel's messages: a widget sends one
    state update, then holds its next one until the kernel reports the first idle (ipywidgets' throttle),
    and a person edits the editor the card shows now."""

    def __init__(self, kernel, messages):
        self.kernel, self.seen, self.pending = kernel, list(messages), {}

    def wait(self, predicate, timeout: float = 60) -> bool:
        def done(seen):
            idle = {m["parent_header"].get("msg_id") for m in of_type(seen, "status")
                    if m["content"]["execution_state"] == "idle"}
            self.pending = {comm: msg for comm, msg in self.pending.items() if msg not in idle}
            return predicate()
        return collect_until(self.kernel, self.seen, done, timeout)

    def state(self, comm_id):
        state = {}
        for m in of_type(self.seen, "comm_open", "comm_msg"):
            if m["content"]["comm_id"] == comm_id and isinstance(m["content"]["data"].get("state"), dict):
                state.update(m["content"]["data"]["state"])
        return state

    def editor(self):
        """The arguments editor the approval card shows now."""
        (card,) = {m["content"]["comm_id"] for m in of_type(self.seen, "comm_open")
                   if "agio-approval" in self.state(m["content"]["comm_id"]).get("_dom_classes", ())}
        (editor,) = [ref.removeprefix("IPY_MODEL_") for ref in self.state(card)["children"]
                     if self.state(ref.removeprefix("IPY_MODEL_")).get("_model_name") == "TextareaModel"]
        return editor

    def edit(self, comm_id, arguments) -> bool:
        """Type ``arguments`` into an editor and leave it; False when the browser holds the update back."""
        if comm_id in self.pending:
            return False
        msg = self.kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
            "method": "update", "state": {"value": json.dumps(arguments)}, "buffer_paths": []}})
        self.kernel.kc.shell_channel.send(msg)
        self.pending[comm_id] = msg["header"]["msg_id"]
        return True


def test_a_second_edit_made_while_a_cell_runs_is_the_one_that_runs(kernel):
    """The card is shown and its cell released; another cell runs (it awaits, as a cell that waits for the
    run does) while the person edits the arguments twice, then approves: the second edit runs."""
    ui = Frontend(kernel, run_until_card(kernel, "%%agio guarded --new-session\nclean up twice"))
    busy = kernel.kc.execute("while not _agio.done:\n    await asyncio.sleep(0.02)")
    assert ui.wait(lambda: any(m["parent_header"].get("msg_id") == busy and m["content"]["execution_state"] == "busy"
                               for m in of_type(ui.seen, "status")))
    first = ui.editor()
    assert ui.edit(first, {"name": "first.txt"})
    # a moment later the person edits again: in the editor shown then, if it is free to send
    ui.wait(lambda: ui.editor() != first or first not in ui.pending, timeout=10)
    sent = ui.edit(ui.editor(), {"name": "second.txt"})
    ui.wait(lambda: ui.state(ui.editor()).get("value") == json.dumps({"name": "second.txt"}), timeout=10)
    click(kernel, widget_ids(ui.seen, description="Approve")[-1])
    assert ui.wait(lambda: any(m["parent_header"].get("msg_id") == busy for m in of_type(ui.seen, "status")
                               if m["content"]["execution_state"] == "idle")), "the run did not finish"
    ui.wait(lambda: of_type(ui.seen, "update_display_data"), timeout=20)
    payload = of_type(ui.seen, "update_display_data")[-1]["content"]["data"]["application/vnd.agio.run+json"]
    resolved = next(e for e in payload["events"] if e["type"] == "approval_resolved")["payload"]
    assert json.loads(resolved["arguments"]) == {"name": "second.txt"}, f"second edit sent: {sent}"
    assert kernel.value("deleted")[-1] == "second.txt"
