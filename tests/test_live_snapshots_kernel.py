"""In a real ipykernel: a batch's monitor, a run's live view and a plan's graph are displayed with a
snapshot beside the widget, the kernel keeps a fresher snapshot in the runtime directory while they go
on, a notebook saved then keeps that snapshot and no widget, and the file goes when the view ends."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, output_from_msg

from agio_notebook.notebook.snapshot_files import DIRECTORY, WIDGET_VIEW, snapshot_outputs
from kernel_support import of_type, offline_kernel
from scheduling_support import wait_until

SETUP = r'''
%load_ext agio_notebook
import asyncio
import agio_notebook as agio
from agio_notebook import Agent, FunctionModel, ExecutionConfig, Reply, tool

async def slow(messages, tools):
    await asyncio.sleep(0.1)
    return "echo <b>not bold</b>"

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

def sleepy(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.call("nap", seconds=60)
    return "woke up"

slowpoke = Agent(model=FunctionModel(slow), name="slowpoke", config=ExecutionConfig(enable_retry=False))
sleeper = Agent(model=FunctionModel(sleepy), tools=[nap], name="sleeper")
questions = [f"q{i}" for i in range(60)]
'''

BATCH = "application/vnd.agio.batch+json"
RUN = "application/vnd.agio.run+json"
PLAN = "application/vnd.agio.plan+json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("runtime")
    k = offline_kernel(tmp_path_factory, "snapshots", SETUP, {"JUPYTER_RUNTIME_DIR": str(runtime)})
    k.snapshots = runtime / DIRECTORY
    yield k
    k.close()


def shown(messages: list[dict], mime: str) -> dict:
    [msg] = [m for m in of_type(messages, "display_data") if mime in m["content"]["data"]]
    return msg


def snapshot(kernel, model_id: str) -> dict | None:
    try:
        return json.loads((kernel.snapshots / f"{model_id}.json").read_text())
    except (OSError, ValueError):
        return None


def ended(kernel, code: str) -> dict:
    """Run ``code``, which ends the view; the final bundle that replaced it."""
    msgs = kernel.execute(code)["messages"]
    if not of_type(msgs, "update_display_data"):
        msgs += kernel.drain(60, stop=lambda m: m["msg_type"] == "update_display_data")
    return of_type(msgs, "update_display_data")[-1]["content"]["data"]


def saved(msg: dict, snapshots: Path) -> dict:
    """The output as the server's pre-save hook saves a notebook holding it."""
    nb = new_notebook(cells=[new_code_cell("x", outputs=[output_from_msg(msg)])])
    content = json.loads(nbformat.writes(nb))
    assert snapshot_outputs(content, snapshots) == 1
    back = nbformat.reads(json.dumps(content), as_version=4)
    nbformat.validate(back)
    return back.cells[0].outputs[0]["data"]


def test_a_running_batch_is_saved_as_its_latest_snapshot_and_the_file_goes_at_the_end(kernel):
    res = kernel.execute('h = agio.batch(slowpoke, questions, name="snap-batch", concurrency=2)\nh')
    msg = shown(res["messages"], BATCH)
    data = msg["content"]["data"]
    model_id = data[WIDGET_VIEW]["model_id"]  # the live monitor, drawn while the kernel runs
    assert data[BATCH]["status"] == "running" and data[BATCH]["snapshot_at"]
    assert data["text/plain"].startswith("[snapshot saved while it ran")
    wait_until(lambda: (snapshot(kernel, model_id) or {}).get(BATCH, {}).get("completed", 0) >= 4, 60,
               "a fresher snapshot")
    kept = saved(msg, kernel.snapshots)
    assert WIDGET_VIEW not in kept and kept[BATCH]["status"] == "running" and kept[BATCH]["completed"] >= 4
    assert "snapshot saved while it ran" in kept["text/html"] and "<b>not bold</b>" not in kept["text/html"]
    final = ended(kernel, "h.cancel()")
    assert final[BATCH]["status"] == "cancelled" and "snapshot_at" not in final[BATCH] and WIDGET_VIEW not in final
    wait_until(lambda: not (kernel.snapshots / f"{model_id}.json").exists(), 30, "the snapshot removed")


def test_a_running_run_is_saved_as_its_transcript_so_far(kernel):
    res = kernel.execute("%%agio sleeper --background\nrest a while")
    msg = shown(res["messages"], RUN)
    model_id = msg["content"]["data"][WIDGET_VIEW]["model_id"]

    def calls_nap() -> bool:
        events = (snapshot(kernel, model_id) or {}).get(RUN, {}).get("events", [])
        return any(e["type"] == "tool_call_started" for e in events)

    wait_until(calls_nap, 60, "a snapshot with the tool call")
    kept = saved(msg, kernel.snapshots)
    assert WIDGET_VIEW not in kept and kept[RUN]["snapshot_at"] and kept[RUN]["trace_svg"] is None
    assert "rest a while" in kept["text/plain"] and "nap" in kept["text/plain"]
    assert kept["text/plain"].startswith("[snapshot saved while it ran")
    final = ended(kernel, "_agio.cancel()")
    assert "snapshot_at" not in final[RUN] and WIDGET_VIEW not in final
    wait_until(lambda: not (kernel.snapshots / f"{model_id}.json").exists(), 30, "the snapshot removed")


def test_a_running_plan_is_saved_as_its_graph_so_far(kernel):
    res = kernel.execute("from agio_notebook.scheduling import Plan, PlanExecutor\n"
                         "plan = Plan(name='snap-plan').add('a', 'A').add('b', 'B {a}', depends_on=['a'])\n"
                         "ph = PlanExecutor(slowpoke).execute_plan(plan)\nph")
    msg = shown(res["messages"], PLAN)
    model_id = msg["content"]["data"][WIDGET_VIEW]["model_id"]
    kept = saved(msg, kernel.snapshots / "elsewhere")  # no file there: the bundle shown with the widget
    assert WIDGET_VIEW not in kept and kept[PLAN]["snapshot_at"] and set(kept[PLAN]["layout"]["nodes"]) == {"a", "b"}
    msgs = res["messages"]

    def plan_updates(messages):  # the plan's own output (another output may be redrawn meanwhile)
        return [m for m in of_type(messages, "update_display_data") if PLAN in m["content"]["data"]]

    if not plan_updates(msgs):
        msgs += kernel.drain(60, stop=lambda m: m["msg_type"] == "update_display_data" and PLAN in m["content"]["data"])
    final = plan_updates(msgs)[-1]["content"]["data"]
    assert final[PLAN]["status"] == "completed" and "snapshot_at" not in final[PLAN]
    wait_until(lambda: not (kernel.snapshots / f"{model_id}.json").exists(), 30, "the snapshot removed")
