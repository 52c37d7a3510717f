"""Batches in a real ipykernel: the live monitor moves, its Cancel is heard in a foreground cell and in the
background, the summary bundle stays, and a batch resumes after the kernel is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from agio_notebook.scheduling import ExecStatus, ExecutionStore
from agio_notebook.storage import TinyDBRepository
from kernel_support import Kernel, install_kernelspec, of_type, offline_kernel, shown_widgets, widget_ids
from scheduling_support import wait_until

SETUP = r'''
%load_ext agio_notebook
import asyncio
import agio_notebook as agio
from agio_notebook import Agent, FunctionModel, ExecutionConfig

async def slow(messages, tools):
    await asyncio.sleep(0.15)
    q = next(m["content"] for m in messages if m["role"] == "user")
    return f"echo: {q}"

def failing(messages, tools):
    raise ValueError("<b>bad</b> item")

slowpoke = Agent(model=FunctionModel(slow), name="slowpoke", config=ExecutionConfig(enable_retry=False))
breaker = Agent(model=FunctionModel(failing), name="breaker", config=ExecutionConfig(enable_retry=False))
questions = [f"q{i}" for i in range(40)]
few = ["a", "b", "c", "d"]
ten = questions[:10]
'''

MIME = "application/vnd.agio.batch+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "batch", SETUP)
    yield k
    k.close()


def run(kernel, code, timeout=60):
    """``kernel.execute`` whose reply is this cell's own (a widget click can leave a stray reply queued)."""
    res = kernel.execute(code, timeout)
    while res["reply"]["parent_header"].get("msg_id") != res["msg_id"]:
        res["reply"] = kernel.kc.get_shell_msg(timeout=10)
    return res


def click(kernel, comm_id):
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom",
                                                                          "content": {"event": "click"}}})
    kernel.kc.shell_channel.send(msg)


def summary_of(messages):
    """The last batch summary bundle shown (a display when the batch was already over, else an update)."""
    found = [m["content"]["data"] for m in of_type(messages, "display_data", "update_display_data")
             if MIME in m["content"]["data"]]
    assert found, "no batch summary"
    return found[-1]


def progress_values(messages, progress_id):
    return [m["content"]["data"]["state"]["value"] for m in of_type(messages, "comm_msg")
            if m["content"]["comm_id"] == progress_id and "value" in m["content"]["data"].get("state", {})]


def test_foreground_batch_monitor_moves_then_leaves_a_summary(kernel):
    res = kernel.execute("%agio batch ten --agent slowpoke --name fg-done --concurrency 2", timeout=120)
    msgs = res["messages"]
    assert res["reply"]["content"]["status"] == "ok"
    [progress] = widget_ids(msgs, _model_name="IntProgressModel")
    values = progress_values(msgs, progress)
    assert len(set(values)) >= 2 and values == sorted(values), values  # it moved while the cell waited
    updates = of_type(msgs, "update_display_data")
    assert updates, "the monitor was not replaced by a summary"
    data = updates[-1]["content"]["data"]
    assert set(data) >= {MIME, "text/html", "text/plain"}
    assert data[MIME]["completed"] == 10 and data[MIME]["status"] == "finished"
    assert "10/10 completed" in data["text/html"] and "agio-batch-hist" in data["text/html"]
    assert sum(b["count"] for b in data[MIME]["histogram"]) == 10
    # the cell waited for the batch: the handle is in Out and finished
    assert kernel.value("_.metrics()['completed']") == 10


def test_cancel_button_is_heard_while_a_foreground_batch_cell_runs(kernel):
    msg_id = kernel.kc.execute("h = %agio batch questions --agent slowpoke --name fg-cancel --concurrency 2")
    msgs = kernel.drain(60, stop=lambda m: m["msg_type"] == "comm_open"
                        and m["content"]["data"].get("state", {}).get("description") == "Cancel")
    [button] = shown_widgets(kernel, msgs, description="Cancel")
    [progress] = shown_widgets(kernel, msgs, _model_name="IntProgressModel")
    more = kernel.drain(60, stop=lambda m: progress_values([m], progress) and progress_values([m], progress)[-1] >= 4)
    msgs += more
    clicked_at = time.time()
    click(kernel, button)

    def idle(m):
        return (m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                and m["parent_header"].get("msg_id") == msg_id)

    rest = kernel.drain(60, stop=idle)
    assert rest and idle(rest[-1]), "the foreground cell did not end after Cancel"
    assert rest[-1]["_t"] - clicked_at < 15  # 40 items at 2 x 0.15 s would need 3 s more; it stopped at once
    while kernel.kc.get_shell_msg(timeout=10)["parent_header"].get("msg_id") != msg_id:
        pass
    bundle = of_type(rest, "update_display_data")[-1]["content"]["data"]
    data = bundle[MIME]
    assert data["status"] == "cancelled" and data["cancelled"] > 0 and 4 <= data["completed"] < 40
    # the saved views tell the truth: cancelled, counts by status, the rate of completed items, cost unknown
    assert data["completed"] + data["cancelled"] == 40 and data["cost"] is None
    assert data["completed_per_s"] == pytest.approx(data["completed"] / data["elapsed_s"])
    for view in (bundle["text/html"], bundle["text/plain"]):
        assert "cancelled" in view and f"{data['completed']}/40 completed" in view and "cost unknown" in view
        assert f"{data['cancelled']} cancelled" in view and "40/40" not in view
    assert "agio-batch-bar-cancelled" in bundle["text/html"] and "$" not in bundle["text/html"]
    m = kernel.value("h.metrics()")
    assert m["cancelled"] + m["completed"] == 40 and m["running"] == 0


def test_cancel_button_works_for_a_background_batch(kernel):
    res = kernel.execute("hb = %agio batch questions --agent slowpoke --name bg-cancel --concurrency 2 --background")
    assert res["idle_at"] - res["messages"][0]["_t"] < 10
    [button] = widget_ids(res["messages"], description="Cancel")
    click(kernel, button)
    msgs = kernel.drain(60, stop=lambda m: m["msg_type"] == "update_display_data")
    data = of_type(msgs, "update_display_data")[-1]["content"]["data"][MIME]
    assert data["status"] == "cancelled" and data["completed"] < 40
    # cancelling it again, from Python, says so in one line
    res = kernel.execute("hb.cancel()")
    [err] = [m["content"] for m in of_type(res["messages"], "error")]
    assert err["ename"] == "InvalidOperationError" and "already finished" in err["evalue"]


def test_kernel_interrupt_cancels_a_foreground_batch(kernel):
    msg_id = kernel.kc.execute("hi = %agio batch questions --agent slowpoke --name fg-interrupt --concurrency 2")
    msgs = kernel.drain(60, stop=lambda m: m["msg_type"] == "comm_open"
                        and m["content"]["data"].get("state", {}).get("_model_name") == "IntProgressModel")
    [progress] = shown_widgets(kernel, msgs, _model_name="IntProgressModel")
    kernel.drain(60, stop=lambda m: progress_values([m], progress) and progress_values([m], progress)[-1] >= 2)
    kernel.km.interrupt_kernel()  # the cell is awaiting its batch by now
    rest = kernel.drain(60, stop=lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                        and m["parent_header"].get("msg_id") == msg_id)
    assert rest and rest[-1]["msg_type"] == "status", "the cell did not end after the interrupt"
    summary = summary_of(rest)[MIME]
    assert summary["status"] == "cancelled" and summary["completed"] < 40
    while kernel.kc.get_shell_msg(timeout=10)["parent_header"].get("msg_id") != msg_id:
        pass
    m = kernel.value("agio.executions(batch='fg-interrupt').status.value_counts().to_dict()")
    assert m.get("cancelled", 0) > 0 and m.get("running", 0) == 0 and m.get("queued", 0) == 0


def test_errors_are_escaped_and_bad_input_is_one_line(kernel):
    res = kernel.execute("%agio batch few --agent breaker --name esc")
    data = summary_of(res["messages"])
    assert "&lt;b&gt;bad&lt;/b&gt;" in data["text/html"] and "<b>bad</b>" not in data["text/html"]
    assert data[MIME]["failed"] == 4
    for cell, needle in [("%agio batch nothing_here", "no variable 'nothing_here'"),
                         ("empty = []\n%agio batch empty", "input list is empty"),
                         ("%agio batch few --rpm 0", "rpm=0"),
                         ("%agio batch ten --name esc", "already exists with different inputs"),
                         ("%agio batch few --name refused --timeout 0", "timeout must be a positive number"),
                         ("%agio batch few --name refused --retries -1", "retries must be at least 0"),
                         ("%agio batch few --name refused --priority high", "invalid int value: 'high'"),
                         ("%agio batch few --name refused --concurrency 0", "concurrency must be at least 1"),
                         ("%agio batch few --name refused --batch-max-tokens 0", "batch_max_tokens must be at least 1"),
                         ("%agio batch --resume refused", "no batch named 'refused'")]:
        res = run(kernel, cell)
        content = res["reply"]["content"]
        assert content["status"] == "error", cell
        assert content["ename"] == "UsageError" and needle in content["evalue"], content["evalue"]
        assert "\n" not in content["evalue"]


def test_python_api_await_and_frames(kernel):
    res = kernel.execute("h2 = await agio.batch(slowpoke, few, name='py-api')\n"
                         "print(h2.results()['final_text'].tolist(), len(agio.executions(batch='py-api')))")
    out = "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))
    assert "['echo: a', 'echo: b', 'echo: c', 'echo: d'] 4" in out


def test_plan_shows_a_live_dag_then_a_static_bundle(kernel):
    res = run(kernel, "from agio_notebook.scheduling import Plan, PlanExecutor\n"
                      "plan = Plan(name='kplan').add('a', 'A').add('b', 'B').add('c', 'C {a} {b}', depends_on=['a', 'b'])\n"
                      "ph = PlanExecutor(slowpoke).execute_plan(plan)\nph")
    opened = [m for m in of_type(res["messages"], "comm_open")
              if "agio-plan" in json.dumps(m["content"]["data"].get("state", {}))]
    assert opened and "<svg" in opened[0]["content"]["data"]["state"]["value"]
    msgs = res["messages"] + kernel.drain(60, stop=lambda m: m["msg_type"] == "update_display_data"
                                          and "application/vnd.agio.plan+json" in m["content"]["data"])
    data = of_type(msgs, "update_display_data")[-1]["content"]["data"]
    assert data["application/vnd.agio.plan+json"]["status"] == "completed"
    html = data["text/html"]  # sanitisers strip SVG: the saved fallback is a list, the extension draws the layout
    assert html.count(">completed</span>") == 3 and "<svg" not in html and "after a, b" in html
    layout = data["application/vnd.agio.plan+json"]["layout"]
    assert set(layout["nodes"]) == {"a", "b", "c"}
    assert sorted((e["tail"], e["head"]) for e in layout["edges"]) == [("a", "c"), ("b", "c")]


def test_resume_after_sigkill_runs_nothing_twice(tmp_path):
    install_kernelspec(tmp_path / "jupyter")
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": ""}
    k = Kernel(tmp_path, env=env)
    try:
        k.execute(SETUP)
        k.execute("h = agio.batch(slowpoke, questions, name='killed', concurrency=4)")
        repo_path = tmp_path / "store"
        store = ExecutionStore(TinyDBRepository(repo_path))

        def completed():
            return {r.index for r in store.records("killed") if r.status is ExecStatus.COMPLETED}

        wait_until(lambda: len(completed()) >= 8, 120, "eight items recorded completed")
        os.kill(k.km.provisioner.pid if hasattr(k.km, "provisioner") and k.km.provisioner else k.km.kernel.pid,
                signal.SIGKILL)
        wait_until(lambda: not k.km.is_alive(), 30, "the kernel to die")
    finally:
        k.close()
    before = completed()
    repo = TinyDBRepository(repo_path)
    done_runs = [r for r in repo.list_runs() if r.status.value == "completed"]
    assert 8 <= len(done_runs) < 40

    k2 = Kernel(tmp_path, env=env)
    try:
        k2.execute(SETUP)
        res = k2.execute("h = agio.resume_batch('killed'); h.wait(120); print(h.metrics()['completed'])", timeout=180)
        assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
        assert k2.value("h.metrics()['completed']") == 40
        ran = k2.value("[r.index for r in h.records() if r.attempts and r.status.value == 'completed']")
        assert len(ran) == 40
    finally:
        k2.close()
    repo2 = TinyDBRepository(repo_path)
    completed_runs = [r for r in repo2.list_runs() if r.status.value == "completed"]
    per_item: dict[str, int] = {}
    for run in completed_runs:
        item = run.session_id.split("-")[1]  # killed-00012[-a2]
        per_item[item] = per_item.get(item, 0) + 1
    assert len(per_item) == 40 and set(per_item.values()) == {1}, per_item  # no item completed twice
    records = {r.index: r for r in ExecutionStore(TinyDBRepository(repo_path)).records("killed")}
    for i in before:
        assert records[i].run_id in {r.id for r in done_runs}  # completed before the kill: not run again


def test_display_then_await_from_python_shows_one_monitor_then_its_summary(kernel):
    res = run(kernel, "h3 = agio.batch(slowpoke, ten, name='py-display', concurrency=2)\ndisplay(h3)\nawait h3", 120)
    msgs = res["messages"]
    assert len(widget_ids(msgs, _model_name="IntProgressModel")) == 1
    assert len(widget_ids(msgs, description="Cancel")) == 1
    summaries = [m for m in of_type(msgs, "display_data", "update_display_data", "execute_result")
                 if MIME in m["content"]["data"] and WIDGET_VIEW not in m["content"]["data"]]
    assert len(summaries) == 1 and summaries[0]["msg_type"] == "update_display_data"  # the monitor's snapshot aside
    assert summaries[0]["content"]["data"][MIME]["completed"] == 10
