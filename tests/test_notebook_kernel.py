"""%%agio in a real ipykernel: live updates, coalescing, transcript bundle, interrupt, background, errors."""

from __future__ import annotations

import json
import time

import pytest

from kernel_support import of_type, offline_kernel, stream_text

SETUP = r'''
%load_ext agio_notebook
import asyncio
from agio_notebook import Agent, FunctionModel, tool, Reply

async def slow_words(messages, tools):
    for i in range(60):
        await asyncio.sleep(0.025)
        yield f"word{i} "

async def flood(messages, tools):
    for i in range(4000):
        yield f"t{i} "
        if i % 200 == 0:
            await asyncio.sleep(0.01)

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

def sleepy(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.call("nap", seconds=30)
    return "woke up"

def _agio_ctrl():
    return get_ipython().magics_manager.registry["AgioMagics"].controller

def _agio_repo():
    return _agio_ctrl().repository

def _agio_last():
    return list(_agio_ctrl().handles.values())[-1]

streamer = Agent(model=FunctionModel(slow_words), name="streamer")
flooder = Agent(model=FunctionModel(flood), name="flooder")
sleeper = Agent(model=FunctionModel(sleepy), tools=[nap], name="sleeper")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "kernel", SETUP)
    yield k
    k.close()


def text_updates(messages):
    return [m for m in of_type(messages, "comm_msg")
            if "word" in json.dumps(m["content"]["data"].get("state", {}))]


def bundle_of(messages):
    updates = of_type(messages, "update_display_data")
    assert updates, "no transcript bundle"
    return updates[-1]["content"]["data"]


def test_text_streams_in_several_updates_then_becomes_a_bundle(kernel):
    res = kernel.execute("%%agio streamer\nTell me sixty words")
    msgs = res["messages"]
    updates = text_updates(msgs)
    bundle_at = of_type(msgs, "update_display_data")[-1]["_t"]
    assert len(updates) >= 5, "text should arrive in several updates while the run streams"
    assert updates[0]["_t"] < bundle_at - 0.5
    data = bundle_of(msgs)
    assert set(data) >= {"application/vnd.agio.run+json", "text/html", "text/plain"}
    payload = data["application/vnd.agio.run+json"]
    assert payload["run"]["status"] == "completed" and payload["run"]["final_text"].startswith("word0 word1")
    assert "word59" in data["text/plain"]
    # the transcript is drawn first, its trace graph (Graphviz) right after, in the same output
    finals = [m["content"]["data"] for m in of_type(msgs, "update_display_data")
              if "application/vnd.agio.run+json" in m["content"]["data"]][-2:]
    assert [f["application/vnd.agio.run+json"]["trace_svg"] is None for f in finals] == [True, False]
    assert payload["trace_svg"].startswith("<svg")
    # the transcript is the cell's only view: no Out[n] repr beside it; the handle is still `_` and `_agio`
    assert not of_type(msgs, "execute_result"), "no Out[n] repr under a %%agio cell"
    assert kernel.value("_.run_id == _agio.run_id == %r" % payload["run"]["id"]) is True
    assert "completed" in kernel.value("repr(_agio)")


def test_long_answer_updates_stay_within_the_coalescing_bound(kernel):
    t0 = time.time()
    res = kernel.execute("%%agio flooder\nFlood me")
    elapsed = res["idle_at"] - t0
    comm = of_type(res["messages"], "comm_msg")
    flushes = kernel.value("_.live_flushes")
    assert flushes <= elapsed * 20 + 3, (flushes, elapsed)
    # each flush writes a few widgets; with ~4000 deltas, per-token updates would be thousands
    assert len(comm) <= 8 * (elapsed * 20 + 3) + 60, (len(comm), elapsed)
    sent = sum(len(json.dumps(m["content"])) for m in comm)
    answer = kernel.value("len(_.final_text)")
    assert sent < 12 * answer + 100_000, "text must not be resent whole on every update"


def test_value_of_the_cell_is_a_handle_with_frames(kernel):
    kernel.execute("%%agio streamer\nagain")
    assert kernel.value("_.status") == "completed"
    assert kernel.value("list(_.steps.role.astype(str))") == ["user", "assistant"]
    assert kernel.value("list(_.events.type.astype(str))[0]") == "run_started"
    assert kernel.value("len(_.run_id)") == 32


def test_interrupt_cancels_a_foreground_run_and_keeps_steps(kernel):
    msg_id = kernel.kc.execute("%%agio sleeper --new-session\nnap please")
    time.sleep(2.0)  # the tool is sleeping now
    kernel.km.interrupt_kernel()
    msgs = kernel.drain(30, stop=lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                        and m["parent_header"].get("msg_id") == msg_id)
    kernel.reply_to(msg_id)
    errors = of_type(msgs, "error")
    assert not errors, errors
    streams = {n: stream_text(msgs, n)
               for n in ("stdout", "stderr")}
    assert "cancelled by the interrupt" in streams["stdout"] and not streams["stderr"]  # a status, not an error
    assert kernel.value("_agio_last().status") == "cancelled"
    assert kernel.value("[s.role.value for s in _agio_repo().get_steps(_agio_last().session_id)]") == [
        "user", "assistant"]
    assert bundle_of(msgs)["application/vnd.agio.run+json"]["run"]["status"] == "cancelled"


def test_background_returns_at_once_and_the_run_completes(kernel):
    t0 = time.time()
    res = kernel.execute("%%agio streamer --background --new-session\nbackground words")
    assert res["idle_at"] - t0 < 1.0
    later = kernel.drain(15, stop=lambda m: m["msg_type"] == "update_display_data")
    assert text_updates(later), "the run kept streaming after the cell returned"
    assert bundle_of(later)["application/vnd.agio.run+json"]["run"]["status"] == "completed"


@pytest.mark.parametrize("cell, needle", [
    ("%%agio --max-steps nope\nhi", "%%agio: argument --max-steps: invalid int value: 'nope'"),
    ("%%agio --session a --new-session\nhi", "not allowed with argument"),
    ("%%agio no_such_agent\nhi", "no agent named 'no_such_agent'"),
    ("%%agio --session missing\nhi", "no session 'missing'"),
    ("%%agio\nhello {undefined_name}", "no variable 'undefined_name'"),
    ("%agio retry nope", "no run 'nope'"),
    ("%agio frobnicate", "unknown command 'frobnicate'"),
    ("%agio fork --at 999", "sequence 999"),
])
def test_bad_input_is_one_line_without_traceback(kernel, cell, needle):
    before = kernel.value("len(_agio_repo().list_runs())")
    res = kernel.execute(cell)
    reply = res["reply"]["content"]
    assert reply["status"] == "error" and reply["ename"] == "UsageError" and needle in reply["evalue"], reply
    assert "\n" not in reply["evalue"] and not reply["traceback"] and not of_type(res["messages"], "error")
    assert "".join(m["content"]["text"] for m in of_type(res["messages"], "stream")) == f"UsageError: {reply['evalue']}\n"
    assert kernel.value("len(_agio_repo().list_runs())") == before


def test_braces_interpolate_and_literal_braces_survive(kernel):
    kernel.execute("city = 'Lima'")
    kernel.execute("%%agio streamer\nWeather in {city}? {{not a var}}")
    assert kernel.value("_.run.query") == "Weather in Lima? {not a var}"


def test_await_runner_run_works_in_a_cell(kernel):
    res = kernel.execute("from agio_notebook import StepRunner\n"
                         "r = await StepRunner(streamer).run(None, 'hi')\nprint(r.status.value, r.final_text[:5])")
    out = "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))
    assert "completed word0" in out


def test_config_shows_settings_but_never_the_key(kernel, tmp_path):
    res = kernel.execute("import os; os.environ['OPENAI_API_KEY'] = 'sk-never-shown-123456'\n"
                         f"%agio config --model gpt-test --base-url http://127.0.0.1:9/v1 --store {tmp_path}/cfg")
    out = "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))
    assert "model: gpt-test at http://127.0.0.1:9/v1" in out and f"store: {tmp_path}/cfg" in out
    assert "OPENAI_API_KEY set" in out and "sk-never-shown" not in out
    kernel.execute("os.environ['OPENAI_API_KEY'] = ''\n%agio config --store " + str(tmp_path / "back"))
