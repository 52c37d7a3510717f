"""Attempts and the commands behind the transcript's controls, in a real kernel.

The quickstart's weather run retried with an exhausted ScriptedModel is the known case: the failed
retry must supersede nothing. The controls of a finished run are part of its transcript bundle;
no widget is left in the cell.
"""

from __future__ import annotations

import json

import pytest

from kernel_support import offline_kernel, stream_text

MIME = "application/vnd.agio.run+json"
WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, ScriptedModel, Reply, tool
from agio_notebook.models import call
import agio_notebook as agio

@tool
def weather(city: str) -> dict:
    """Current weather of a city."""
    table = {"paris": ("light rain", 14), "tokyo": ("clear", 21)}
    sky, celsius = table[city.lower()]
    return {"city": city, "sky": sky, "celsius": celsius}

def current(session):
    return [[int(r.sequence), r.content] for r in agio.steps(session_id=session).itertuples() if r.current]

def rows(frame, *cols):
    return [[v.item() if hasattr(v, "item") else v for v in row] for row in frame[list(cols)].itertuples(index=False)]

forecaster = Agent(model=ScriptedModel([
    Reply.calls(call("weather", city="Paris"), call("weather", city="Tokyo"), text="Checking both cities."),
    "Paris: light rain, 14 °C. Tokyo: clear, 21 °C.",
]), tools=[weather], name="forecaster")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "attempts", SETUP)
    yield k
    k.close()


def final_outputs(res):
    """What the cell's output area holds at the end: displays, updated in place, plus any stream text."""
    shown: dict[str, dict] = {}
    order: list[str] = []
    for m in res["messages"]:
        if m["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            key = m["content"].get("transient", {}).get("display_id") or m["header"]["msg_id"]
            if m["msg_type"] != "update_display_data" and key not in shown:
                order.append(key)
            shown[key] = m["content"]["data"]
    return [shown[k] for k in order]


def bundle(res):
    found = [d[MIME] for d in final_outputs(res) if MIME in d]
    assert found, "no transcript in the cell"
    return found[-1]


def text_of(res, name="stdout"):
    return stream_text(res["messages"], name)


def test_weather_retry_with_an_exhausted_model_is_refused_and_a_failed_retry_supersedes_nothing(kernel):
    first = kernel.execute("%%agio forecaster --new-session\nWhat's the weather in Paris and Tokyo?")
    run = bundle(first)["run"]
    assert run["status"] == "completed"
    # no widget is left in the finished cell: only the transcript bundle (with its controls' data)
    assert not any(WIDGET in d for d in final_outputs(first))
    assert bundle(first)["attempts"] == [{"number": 1, "run_id": run["id"], "status": "completed", "current": True,
                                          "steps": 5}]
    html = next(d["text/html"] for d in final_outputs(first) if MIME in d)
    # the defaults the fallback shows are ones the commands accept: the answer, and the end of the run
    assert f"%agio retry {run['id'][:8]} --from-seq 5" in html  # ids as the transcript shows them
    assert f"%agio fork {run['session_id'][:8]} --at 5 --run {run['id'][:8]}" in html

    before = kernel.value(f"current({run['session_id']!r})")
    # the script has no reply left: one line saying what to do, and no attempt is made
    refused = kernel.execute(f"%agio retry {run['id']} --from-seq 2")["reply"]["content"]
    assert refused["ename"] == "UsageError" and "ScriptedModel" in refused["evalue"] and "loop=True" in refused["evalue"]
    assert kernel.value(f"current({run['session_id']!r})") == before
    # a model that fails at once: the retry fails, and replaces nothing
    kernel.execute("def unreachable(messages, tools):\n    raise ConnectionError('the endpoint is unreachable')\n"
                   "from agio_notebook import FunctionModel\nforecaster.model = FunctionModel(unreachable)")
    retry = kernel.execute(f"%agio retry {run['id']} --from-seq 2")
    failed = bundle(retry)
    assert failed["run"]["status"] == "failed" and "unreachable" in failed["run"]["error"]
    shown = next(d for d in final_outputs(retry) if MIME in d)  # the failure is shown in the cell
    assert "failed" in shown["text/plain"] and "unreachable" in shown["text/html"]
    after = kernel.value(f"current({run['session_id']!r})")
    assert after == before and len(after) == 5
    # the failed attempt is listed, not current; the first stays current
    kernel.execute(f"table = get_ipython().run_line_magic('agio', 'attempts {run['id']}')")
    attempts = kernel.value("rows(table, 'attempt', 'status', 'current', 'steps')")
    assert attempts == [[1, "completed", True, 5], [2, "failed", False, 0]]
    assert [a["current"] for a in failed["attempts"]] == [True, False]
    # the fork the transcript shows still works after the failed retry
    fork = kernel.execute(f"%agio fork {run['session_id']} --at 5")
    assert "forked into session" in text_of(fork)


def test_use_attempt_from_python_and_the_magic(kernel):
    kernel.execute("forecaster.model = ScriptedModel(['first answer', 'second answer', 'third answer'])")
    first = bundle(kernel.execute("%%agio forecaster --new-session\nanswer me"))["run"]
    kernel.execute("first = _")
    second = bundle(kernel.execute(f"%agio retry {first['id']} --from-seq 2"))
    assert second["run"]["attempt"] == 2 and second["run"]["final_text"] == "second answer"
    assert [(a["number"], a["current"]) for a in second["attempts"]] == [(1, False), (2, True)]
    html_attempts = kernel.value("rows(first.attempts, 'attempt', 'current')")
    assert html_attempts == [[1, False], [2, True]]
    # from Python
    kernel.execute("first.use_attempt(1)")
    assert kernel.value("agio.steps(session_id=first.session_id).query('current')['content'].tolist()") == \
        ["answer me", "first answer"]
    assert kernel.value("rows(agio.runs(first.session_id), 'attempt', 'current')") == [[1, True], [2, False]]
    # from the magic (what the transcript's attempt selector inserts and runs)
    res = kernel.execute(f"%agio use-attempt {first['id']} 2")
    assert "attempt 2" in text_of(res) and "is current" in text_of(res)
    assert kernel.value("agio.steps(session_id=first.session_id).query('current')['content'].tolist()") == \
        ["answer me", "second answer"]
    assert kernel.value("rows(agio.runs(first.session_id), 'attempt', 'current')") == [[1, False], [2, True]]
    # the next cell continues from the attempt made current
    kernel.execute(f"%agio use-attempt {first['id']} 1")
    third = bundle(kernel.execute("%%agio forecaster\nand then?"))
    assert third["run"]["session_id"] == first["session_id"]
    ctx = [c for _, c in kernel.value("current(first.session_id)")]
    assert ctx == ["answer me", "first answer", "and then?", "third answer"]


@pytest.mark.parametrize("cell, needle", [
    ("%agio use-attempt nope 1", "no run 'nope'"),
    ("%agio use-attempt", "use-attempt"),
    ("%agio attempts", "attempts"),
])
def test_bad_attempt_commands_are_one_line(kernel, cell, needle):
    res = kernel.execute(cell)
    err = [m for m in res["messages"] if m["msg_type"] == "error"]
    out = json.dumps([m["content"] for m in err]) + text_of(res, "stderr")
    assert needle in out
    assert all(len(m["content"]["traceback"]) <= 1 for m in err)


def test_a_run_that_cannot_start_leaves_a_line_not_a_widget(kernel):
    kernel.execute("import asyncio\nfrom agio_notebook import FunctionModel\n"
                   "async def slow(messages, tools):\n    await asyncio.sleep(3)\n    yield 'late'\n"
                   "sloth = Agent(model=FunctionModel(slow), name='sloth')")
    kernel.execute("%%agio sloth --new-session --background\ntake your time")
    kernel.execute("background = _")
    session = kernel.value("background.session_id")
    blocked = kernel.execute(f"%%agio sloth --session {session}\nme too")
    shown = final_outputs(blocked)
    assert not any(WIDGET in d for d in shown)
    assert any("did not start" in d.get("text/plain", "") and "in progress" in d.get("text/plain", "")
               for d in shown), shown
    assert kernel.value("background.wait(60).status") == "completed"  # the first run was not disturbed
