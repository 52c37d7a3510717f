"""Step mode in a real ipykernel: the pause view in the cell, clicks heard while the cell awaits, edits
typed into its editors, a bad edit as one line, and an interrupt while paused."""

from __future__ import annotations

import json

import ipykernel
import pytest

from kernel_support import collect_until, of_type, offline_kernel, placed, stream_text

SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, ScriptedModel, Reply, tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

adder = Agent(model=ScriptedModel([Reply.call("add", a=2, b=3), "the sum is there"], loop=True), tools=[add],
              name="adder")

def _agio_last():
    return list(get_ipython().magics_manager.registry["AgioMagics"].controller.handles.values())[-1]
'''

pytestmark = pytest.mark.skipif(int(ipykernel.__version__.split(".")[0]) < 7,
                                reason="ipykernel 6 queues clicks behind a running cell")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "debugger", SETUP)
    yield k
    k.close()


def states(messages):
    """Each widget's current state (comm id -> state), folded from its comm_open and later updates."""
    out = {}
    for m in messages:
        if m["msg_type"] == "comm_open":
            out[m["content"]["comm_id"]] = dict(m["content"]["data"].get("state", {}))
        elif m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update":
            out.setdefault(m["content"]["comm_id"], {}).update(m["content"]["data"].get("state", {}))
    return out


def _opened(messages, cls):
    """comm ids of placed widgets with the DOM class ``cls``, in the order they were opened."""
    shown = placed(messages)
    return [c for c, st in states(messages).items() if cls in (st.get("_dom_classes") or ()) and c in shown]


def _closed(messages):
    return {m["content"]["comm_id"] for m in of_type(messages, "comm_close")}


def open_pauses(messages, kind=None):
    """Pause views not yet closed (of ``kind``: model, tool, ...)."""
    cls = f"agio-pause-{kind}" if kind else "agio-pause"
    return [c for c in _opened(messages, cls) if c not in _closed(messages)]


def pause_widget(messages, cls):
    """The newest open widget with DOM class ``cls`` (a button or an editor of the current pause view)."""
    ids = [c for c in _opened(messages, cls) if c not in _closed(messages)]
    return ids[-1] if ids else None


def send(kernel, comm_id, data):
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))


def click(kernel, seen, cls):
    send(kernel, pause_widget(seen, cls), {"method": "custom", "content": {"event": "click"}})


def type_into(kernel, seen, cls, value):
    send(kernel, pause_widget(seen, cls), {"method": "update", "state": {"value": value}, "buffer_paths": []})


def note_text(messages):
    """The pause note's latest line (its widget is opened with its first line, then updated)."""
    notes = [m["content"]["data"]["state"].get("value", "") for m in of_type(messages, "comm_open", "comm_msg")
             if "agio-pause-note" in str(m["content"]["data"].get("state", {}).get("value", ""))]
    return notes[-1] if notes else ""


def idle_of(msg_id):
    return lambda s: any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                         and m["parent_header"].get("msg_id") == msg_id for m in s)


def test_step_through_a_run_editing_a_message_and_a_tool_call(kernel):
    msg_id = kernel.kc.execute("%%agio adder --new-session --step\nWhat is 2 + 3?")
    seen: list = []
    assert collect_until(kernel, seen, lambda s: open_pauses(s, "model")), "no pause before the model call"
    first = open_pauses(seen, "model")[0]
    # the request is laid out: the user message with its tokens, the tool, the settings
    html = " ".join(str(m["content"]["data"]["state"].get("value", "")) for m in of_type(seen, "comm_open"))
    assert "agio-pause-request" in html and "What is 2 + 3?" in html and "<code" in html and "add" in html
    # a bad edit: one line, the pause stays
    type_into(kernel, seen, "agio-pause-edit-messages", '[{"role": "user", "content": "x"')
    click(kernel, seen, "agio-pause-continue")
    assert collect_until(kernel, seen, lambda s: "not valid JSON" in note_text(s), 30), "no line for bad JSON"
    assert first in open_pauses(seen)
    edited = json.dumps([{"role": "user", "content": "What is 20 + 30?"}])
    type_into(kernel, seen, "agio-pause-edit-messages", edited)
    click(kernel, seen, "agio-pause-continue")
    assert collect_until(kernel, seen, lambda s: open_pauses(s, "tool")), "no pause before the tool call"
    assert first in _closed(seen)
    type_into(kernel, seen, "agio-pause-edit-arguments", '{"a": "two"}')
    click(kernel, seen, "agio-pause-edit")
    assert collect_until(kernel, seen, lambda s: "add rejects these arguments" in note_text(s), 30)
    type_into(kernel, seen, "agio-pause-edit-arguments", '{"a": 20, "b": 30}')
    click(kernel, seen, "agio-pause-continue")
    assert collect_until(kernel, seen, lambda s: len(_opened(s, "agio-pause-model")) == 2), "no second model pause"
    click(kernel, seen, "agio-pause-continue")
    assert collect_until(kernel, seen, idle_of(msg_id), 60), "the cell never finished"
    kernel.reply_to(msg_id)
    assert not of_type(seen, "error"), "\n".join(t for m in of_type(seen, "error") for t in m["content"]["traceback"])
    assert kernel.value("_agio_last().status") == "completed"
    steps = kernel.value("[(s.role.value, s.content, s.extra.get('edited')) for s in "
                         "get_ipython().magics_manager.registry['AgioMagics'].controller.repository"
                         ".get_steps(_agio_last().session_id)]")
    assert [s[0] for s in steps] == ["user", "assistant", "tool", "assistant"]
    assert steps[2][1].startswith("50") and steps[2][2]["arguments"]["sent"] == '{"a": 20, "b": 30}'
    sent = kernel.value("get_ipython().magics_manager.registry['AgioMagics'].controller.repository"
                        ".get_steps(_agio_last().session_id)[1].extra['request']['edited']['fields']")
    assert sent == ["messages"]
    # the transcript that replaced the live view keeps the pauses, the edits and what the model saw
    bundle = [m for m in of_type(seen, "update_display_data")
              if "application/vnd.agio.run+json" in m["content"]["data"]][-1]["content"]["data"]
    events = [e["type"] for e in bundle["application/vnd.agio.run+json"]["events"]]
    assert events.count("run_paused") == 3 and events.count("run_resumed") == 3
    assert bundle["application/vnd.agio.run+json"]["seen"]["calls"].keys() == {"2", "4"}
    assert "paused before tool call add" in bundle["text/plain"] and "[edited]" in bundle["text/plain"]
    assert "What the model saw" in bundle["text/html"] and "agio-edited" in bundle["text/html"]


def test_interrupt_while_paused_ends_the_run_cancelled_keeping_its_steps(kernel):
    msg_id = kernel.kc.execute("%%agio adder --new-session --step --break tool\nWhat is 2 + 3?")
    seen: list = []
    assert collect_until(kernel, seen, lambda s: open_pauses(s, "tool")), "no pause before the tool call"
    kernel.km.interrupt_kernel()
    assert collect_until(kernel, seen, idle_of(msg_id), 30)
    kernel.reply_to(msg_id)
    assert not of_type(seen, "error"), "\n".join(t for m in of_type(seen, "error") for t in m["content"]["traceback"])
    stdout = stream_text(seen, "stdout")
    assert "interrupted while paused before tool call add" in stdout and "cancelled by the interrupt" in stdout
    assert kernel.value("_agio_last().status") == "cancelled"
    assert kernel.value("list(_agio_last().steps.role.astype(str))") == ["user", "assistant"]
    assert not open_pauses(seen), "the pause view closed with its run"


def test_abort_and_bad_arguments_are_one_line(kernel):
    for cell, line in (("%%agio adder --break tool\nx", "--break needs --step"),
                       ("%%agio adder --step --break tools\nx", "unknown breakpoint 'tools'"),
                       ("%%agio adder --step --background\nx", "--step runs in the foreground")):
        res = kernel.execute(cell)
        reply = res["reply"]["content"]
        assert reply["status"] == "error" and reply["ename"] == "UsageError" and line in reply["evalue"], reply
        assert stream_text(res["messages"], "stderr") == f"UsageError: {reply['evalue']}\n"
    try:  # a cell that blocks would never hear the pause's buttons
        kernel.execute("%autoawait off")
        reply = kernel.execute("%%agio adder --step\nx")["reply"]["content"]
        assert reply["ename"] == "UsageError" and "--step needs a cell that awaits" in reply["evalue"]
    finally:
        kernel.execute("%autoawait asyncio")
    msg_id = kernel.kc.execute("%%agio adder --new-session --step\nWhat is 2 + 3?")
    seen: list = []
    assert collect_until(kernel, seen, lambda s: open_pauses(s, "model"))
    click(kernel, seen, "agio-pause-abort")
    assert collect_until(kernel, seen, idle_of(msg_id), 30)
    kernel.reply_to(msg_id)
    assert kernel.value("_agio_last().status") == "cancelled"
    assert kernel.value("list(_agio_last().steps.role.astype(str))") == ["user"]


def one_model_pauses(messages, kind):
    """Open one-model pause views of ``kind`` (comm id -> state)."""
    closed, shown = _closed(messages), placed(messages)
    return {c: st for c, st in states(messages).items()
            if st.get("_model_name") == "AgioPauseModel" and st.get("kind") == kind and c not in closed and c in shown}


def click_one_model(kernel, comm_id, name, **texts):
    send(kernel, comm_id, {"method": "custom", "content": {"event": "click", "name": name, "texts": texts}})


def test_where_the_extension_answers_a_pause_is_one_widget_and_a_click_carries_the_texts(kernel):
    """The extension's answer to the kernel's hello (as JupyterLab's would be): pauses become one model
    each, a click brings the editors' texts, and junk messages change nothing."""
    hello = kernel.execute("from agio_notebook.notebook import frontend as _f; _f.say_hello()\n"
                           "fresh = Agent(model=ScriptedModel([Reply.call('add', a=2, b=3), 'the sum is there']), "
                           "tools=[add], name='fresh')")["messages"]
    opened = [m for m in of_type(hello, "comm_open") if m["content"]["target_name"] == "agio.frontend"]
    assert len(opened) == 1
    seen: list = []
    msg_id = None
    try:
        # as in Run All: the step cell is sent before the answer, whose first pause waits for it
        msg_id = kernel.kc.execute("%%agio fresh --new-session --step\nWhat is 2 + 3?")
        send(kernel, opened[0]["content"]["comm_id"], {"extension": "0.1.0", "widgets": ["AgioPauseModel"]})
        assert opened[0]["content"]["data"] == {"kernel": "0.1.0"}
        assert collect_until(kernel, seen, lambda s: one_model_pauses(s, "model")), "no one-model pause"
        (first, state), = one_model_pauses(seen, "model").items()
        made = [st.get("_model_name") for st in states(seen).values()]
        pause_parts = [st for st in states(seen).values() if any(c.startswith("agio-pause") and c != "agio-pause-note"
                                                                  for c in st.get("_dom_classes") or ())]
        assert made.count("AgioPauseModel") == 1 and "TextareaModel" not in made and not pause_parts
        assert "agio-pause-request" in state["html"] and "What is 2 + 3?" in state["html"]
        assert [e["key"] for e in state["editors"]] == ["messages", "system", "settings"]
        assert [b[0] for b in state["buttons"]] == ["Continue", "Step", "Edit", "Abort"]
        # junk: not a click, an unknown button, texts of the wrong type: nothing happens
        send(kernel, first, {"method": "custom", "content": "junk"})
        click_one_model(kernel, first, "Explode")
        send(kernel, first, {"method": "custom", "content": {"event": "click", "name": "Edit", "texts": ["x"]}})
        click_one_model(kernel, first, "Continue", messages='[{"role": "user", "content": "x"')
        assert collect_until(kernel, seen, lambda s: "not valid JSON" in note_text(s), 30), "no line for bad JSON"
        assert first in one_model_pauses(seen, "model")
        edited = json.dumps([{"role": "user", "content": "What is 20 + 30?"}])
        click_one_model(kernel, first, "Continue", messages=edited, system="", settings="{}")
        assert collect_until(kernel, seen, lambda s: one_model_pauses(s, "tool")), "no pause before the tool call"
        (tool, _), = one_model_pauses(seen, "tool").items()
        assert first in _closed(seen)
        click_one_model(kernel, tool, "Edit", arguments='{"a": "two"}', skip="")
        assert collect_until(kernel, seen, lambda s: "add rejects these arguments" in note_text(s), 30)
        click_one_model(kernel, tool, "Continue", arguments='{"a": 20, "b": 30}', skip="")
        assert collect_until(kernel, seen, lambda s: one_model_pauses(s, "model")), "no second model pause"
        (second, _), = one_model_pauses(seen, "model").items()
        click_one_model(kernel, second, "Continue")
        assert collect_until(kernel, seen, idle_of(msg_id), 60), "the cell never finished"
        kernel.reply_to(msg_id)
        assert not of_type(seen, "error") and not [m for m in of_type(seen, "stream") if m["content"]["name"] == "stderr"]
        steps = kernel.value("[(s.role.value, s.content) for s in get_ipython().magics_manager.registry['AgioMagics']"
                             ".controller.repository.get_steps(_agio_last().session_id)]")
        assert [s[0] for s in steps] == ["user", "assistant", "tool", "assistant"] and steps[2][1].startswith("50")
    finally:
        if msg_id and not idle_of(msg_id)(seen):  # failed while paused: end the run before the next test
            kernel.km.interrupt_kernel()
            collect_until(kernel, seen, idle_of(msg_id), 30)
        kernel.execute("_f._widgets.clear()")
