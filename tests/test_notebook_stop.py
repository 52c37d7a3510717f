"""Stop, interrupt and "Run All" for %%agio cells in a real ipykernel, and the background handle's repr.

The Stop click is sent as the browser sends it: a comm message to the button's model, on the shell
channel, while the cell is still executing.
"""

from __future__ import annotations

import json
import time

import ipykernel
import pytest

from kernel_support import collect_until, of_type, offline_kernel, stream_text, widget_ids

SETUP = r'''
%load_ext agio_notebook
import asyncio
from agio_notebook import Agent, FunctionModel, tool, Reply

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

NAP = 30

def sleepy(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.call("nap", seconds=NAP)
    return "woke up"

async def slow_words(messages, tools):
    for i in range(40):
        await asyncio.sleep(0.025)
        yield f"word{i} "

def _agio_last():
    return list(get_ipython().magics_manager.registry["AgioMagics"].controller.handles.values())[-1]

async def crawl(messages, tools):
    crawl.seen.append([m.get("content") for m in messages])
    if messages[-1]["content"] == "go on":
        yield "done"
        return
    for i in range(400):
        await asyncio.sleep(0.05)
        yield f"crawl{i} "

crawl.seen = []

sleeper = Agent(model=FunctionModel(sleepy), tools=[nap], name="sleeper")
streamer = Agent(model=FunctionModel(slow_words), name="streamer")
crawler = Agent(model=FunctionModel(crawl), name="crawler")
'''

IPYKERNEL_7 = int(ipykernel.__version__.split(".")[0]) >= 7


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "stop", SETUP)
    yield k
    k.close()


def idle_of(msg_id):
    return lambda m: (m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                      and m["parent_header"].get("msg_id") == msg_id)


def stop_button(messages):
    ids = widget_ids(messages, _model_name="ButtonModel", description="Stop")
    return ids[0] if ids else None


def tool_running(messages):
    return any("nap" in str(m["content"]["data"].get("state", {}).get("value", ""))
               for m in of_type(messages, "comm_msg"))


def cancelled_bundle(messages):
    for m in of_type(messages, "update_display_data"):
        run = m["content"]["data"].get("application/vnd.agio.run+json", {}).get("run", {})
        if run.get("status") == "cancelled":
            return m
    return None


ON_IPYKERNEL_6 = pytest.mark.skipif(not IPYKERNEL_7, reason="ipykernel 6 queues clicks behind a running cell: "
                                    "the fallback there is the kernel interrupt (test_interrupt_still_cancels)")


@ON_IPYKERNEL_6
def test_stop_click_cancels_a_foreground_run_within_half_a_second(kernel):
    stop_within_half_a_second(kernel, "%%agio sleeper --new-session\nnap please", ["user", "assistant"])


@ON_IPYKERNEL_6
def test_stop_click_cancels_a_foreground_retry_cell(kernel):
    """A cell that is just ``%agio retry ...`` (what the transcript's Retry inserts) awaits its run too."""
    kernel.execute("NAP = 0.05")
    kernel.execute("%%agio sleeper --new-session\nnap briefly")
    run_id = kernel.value("_agio_last().run_id")
    assert kernel.value("_agio_last().status") == "completed"
    kernel.execute("NAP = 30")
    stop_within_half_a_second(kernel, f"%agio retry {run_id} --from-seq 2", ["assistant"])
    assert kernel.value("_agio_last().run.retry_of") == run_id


def stop_within_half_a_second(kernel, cell, kept_roles):
    msg_id = kernel.kc.execute(cell)
    seen: list = []
    assert collect_until(kernel, seen, lambda s: stop_button(s) and tool_running(s), 60), "the tool never started"
    comm_id = stop_button(seen)
    click = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id,
                                               "data": {"method": "custom", "content": {"event": "click"}}})
    clicked = time.time()
    kernel.kc.shell_channel.send(click)
    assert collect_until(kernel, seen, cancelled_bundle, 30), "no cancelled transcript after Stop"
    cancelled_at = cancelled_bundle(seen)["_t"]
    assert cancelled_at - clicked <= 0.5, f"Stop took {cancelled_at - clicked:.2f}s"
    assert collect_until(kernel, seen, lambda s: any(idle_of(msg_id)(m) for m in s), 30)
    kernel.reply_to(msg_id)
    assert not of_type(seen, "error")
    streams = {n: stream_text(seen, n)
               for n in ("stdout", "stderr")}
    assert "stopped; its completed steps" in streams["stdout"] and not streams["stderr"]  # a status, not an error
    assert kernel.value("_agio_last().status") == "cancelled"
    assert kernel.value("list(_agio_last().steps.role.astype(str))") == kept_roles
    assert not of_type(seen, "execute_result"), "no Out[n] repr beside the transcript"
    assert kernel.value("_agio.status") == "cancelled"


def test_interrupt_still_cancels_an_awaiting_cell(kernel):
    msg_id = kernel.kc.execute("%%agio sleeper --new-session\nnap please")
    seen: list = []
    assert collect_until(kernel, seen, tool_running, 60), "the tool never started"
    kernel.km.interrupt_kernel()
    assert collect_until(kernel, seen, lambda s: any(idle_of(msg_id)(m) for m in s), 30)
    kernel.reply_to(msg_id)
    assert not of_type(seen, "error")
    stdout = stream_text(seen, "stdout")
    assert "cancelled by the interrupt" in stdout
    assert kernel.value("_agio_last().status") == "cancelled"
    assert cancelled_bundle(seen) is not None


def test_run_all_stays_sequential(kernel):
    """Two cells sent back to back, as "Run All" does: the second starts after the run has ended."""
    first = kernel.kc.execute("%%agio streamer --new-session\nforty words")
    second = kernel.kc.execute("print('after the run:', _agio_last().status, len(_agio_last().final_text.split()))")
    seen: list = []
    assert collect_until(kernel, seen, lambda s: any(idle_of(second)(m) for m in s), 60)
    kernel.reply_to(first), kernel.reply_to(second)
    out = "".join(m["content"]["text"] for m in of_type(seen, "stream") if m["parent_header"]["msg_id"] == second)
    assert "after the run: completed 40" in out
    first_idle = next(m["_t"] for m in seen if idle_of(first)(m))
    second_busy = next(m["_t"] for m in seen if m["msg_type"] == "status" and m["content"]["execution_state"] == "busy"
                       and m["parent_header"].get("msg_id") == second)
    assert first_idle <= second_busy


def test_background_cell_repr_is_current_and_updated_when_the_run_ends(kernel):
    res = kernel.execute("%%agio streamer --background --new-session\nbackground words")
    own = [m for m in of_type(res["messages"], "display_data") if "text/plain" in m["content"]["data"]
           and m["content"]["data"]["text/plain"].startswith("<agio run")]
    assert not own, "the cell shows its live view only, no repr line beside it"
    res = kernel.execute("_agio")  # the handle shown elsewhere while it runs: a line updated when it ends
    shown = [m for m in of_type(res["messages"], "display_data") if "text/plain" in m["content"]["data"]
             and m["content"]["data"]["text/plain"].startswith("<agio run")]
    assert shown, "the handle shows itself in another cell"
    first = shown[0]["content"]["data"]["text/plain"]
    assert "?" not in first.split()[2] and "running" in first and "pending" not in first, first
    repr_id = shown[0]["content"]["transient"]["display_id"]
    assert not of_type(res["messages"], "execute_result"), "no stale Out[n] that never changes"
    later: list = []
    assert collect_until(kernel, later, lambda s: any(
        m["content"].get("transient", {}).get("display_id") == repr_id for m in of_type(s, "update_display_data")), 30)
    final = [m for m in of_type(later, "update_display_data")
             if m["content"]["transient"]["display_id"] == repr_id][-1]["content"]["data"]["text/plain"]
    assert final.startswith(first.split(" running")[0]) and "completed: 'word0 word1" in final, final
    # the live view was replaced by the transcript in the same cell
    bundles = [m for m in of_type(later, "update_display_data")
               if "application/vnd.agio.run+json" in m["content"]["data"]]
    assert bundles and bundles[-1]["content"]["data"]["application/vnd.agio.run+json"]["run"]["status"] == "completed"
    # displayed again once finished: a plain, current value
    res = kernel.execute("_agio_last()")
    assert "completed: 'word0" in of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"]


def test_with_autoawait_off_the_cell_blocks_and_still_completes(kernel):
    try:
        kernel.execute("%autoawait off")
        res = kernel.execute("%%agio streamer --new-session\nforty words")
        assert not of_type(res["messages"], "execute_result")
        assert kernel.value("_.status") == "completed" and "completed: 'word0" in kernel.value("repr(_agio)")
    finally:
        kernel.execute("%autoawait asyncio")
    assert kernel.value("get_ipython().autoawait") is True


def test_the_live_view_says_how_to_stop_where_clicks_wait(kernel):
    """On ipykernel 6 a foreground run's view points to the interrupt; elsewhere Stop just works."""
    def hints(res):
        return [m for m in of_type(res["messages"], "comm_open")
                if "agio-stop-hint" in str(m["content"]["data"].get("state", {}).get("value", ""))]
    foreground = kernel.execute("%%agio streamer --new-session\nforty words")
    assert bool(hints(foreground)) is (not IPYKERNEL_7)
    if not IPYKERNEL_7:
        assert "interrupt the kernel" in str(hints(foreground)[0]["content"]["data"]["state"]["value"])
    background = kernel.execute("%%agio streamer --background --new-session\nforty words")
    assert not hints(background)
    kernel.execute("_agio_last().wait(30)")


def test_stop_keeps_the_partial_answer_and_the_next_turn_sends_it(kernel):
    """Stop mid-stream: the words shown stay, in the transcript and the store, as a step marked partial;
    the next cell's model call sees them as the assistant's (cut-off) message."""
    msg_id = kernel.kc.execute("%%agio crawler --new-session\ncount for me")
    seen: list = []

    def streamed(s):
        return stop_button(s) and any("crawl5 " in json.dumps(m["content"]) for m in of_type(s, "comm_msg"))
    assert collect_until(kernel, seen, streamed, 60), "the answer never streamed"
    click = kernel.kc.session.msg("comm_msg", {"comm_id": stop_button(seen),
                                               "data": {"method": "custom", "content": {"event": "click"}}})
    kernel.kc.shell_channel.send(click)
    assert collect_until(kernel, seen, cancelled_bundle, 30), "no cancelled transcript after Stop"
    assert collect_until(kernel, seen, lambda s: any(idle_of(msg_id)(m) for m in s), 30)
    kernel.reply_to(msg_id)
    data = cancelled_bundle(seen)["content"]["data"]
    steps = [e["payload"]["step"] for e in data["application/vnd.agio.run+json"]["events"]
             if e["type"] == "step_completed"]
    partial = steps[-1]
    assert partial["role"] == "assistant" and partial["status"] == "cancelled" and partial["extra"]["partial"]
    assert partial["content"].startswith("crawl0 crawl1 crawl2 crawl3 crawl4 crawl5")
    assert partial["content"] in data["text/plain"] and "stopped: partial answer" in data["text/html"]
    stored = kernel.value("[(s.role.value, s.status, s.content) for s in "
                          "_agio_last()._controller.repository.get_steps(_agio_last().session_id)]")
    assert stored == [["user", "ok", "count for me"], ["assistant", "cancelled", partial["content"]]]
    kernel.execute("%%agio crawler\ngo on")
    assert kernel.value("crawl.seen[-1]") == ["count for me", partial["content"], "go on"]
