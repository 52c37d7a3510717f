"""The cells transcript controls insert, in real kernels: after a restart, in a kernel that never ran
``%load_ext`` (the extension loads agio silently first, as ``control`` does here), with the run's agent
missing, on a superseded attempt, with the store gone, with a spent script; what the cells print (one line,
no ``Out[n]`` repr), and that they leave ``_`` to the cell above."""

from __future__ import annotations

import re
import shutil

import pytest

from kernel_support import Kernel, install_kernelspec, of_type, stream_text

MIME = "application/vnd.agio.run+json"

AGENTS = r'''
from agio_notebook import Agent, FunctionModel, Reply, tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

answers = iter(range(1, 1000))

def counting(messages, tools):
    if messages[-1]["role"] == "user" and "add" in messages[-1]["content"]:
        return Reply.call("add", a=2, b=3)
    return f"answer {next(answers)}"

coder = Agent(model=FunctionModel(counting), tools=[add], name="coder2")
'''


@pytest.fixture
def workdir(tmp_path):
    install_kernelspec(tmp_path / "jupyter")
    return tmp_path


def fresh(workdir) -> Kernel:
    """A new kernel on the same store: what a restart or a reopened notebook gets."""
    return Kernel(workdir, env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": ""})


def streams(res, name="stdout") -> str:
    return stream_text(res["messages"], name)


def bundles(res) -> list[dict]:
    """The transcripts shown (not the snapshots displayed beside a live view's widget)."""
    return [m["content"]["data"][MIME] for m in of_type(res["messages"], "display_data", "update_display_data")
            if MIME in m["content"]["data"] and "application/vnd.jupyter.widget-view+json" not in m["content"]["data"]]


def ok(res) -> None:
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]


def control(k: Kernel, command: str) -> dict:
    """What a click does: load agio silently (labextension/src/plugin.ts), then run the command's cell."""
    assert k.silent('get_ipython().extension_manager.load_extension("agio_notebook")')["content"]["status"] == "ok"
    return k.execute(command)


def first_run(workdir) -> tuple[Kernel, dict]:
    k = fresh(workdir)
    ok(k.execute("%load_ext agio_notebook\n" + AGENTS))
    res = k.execute("%%agio coder --new-session\nplease add")
    ok(res)
    html = next(m["content"]["data"]["text/html"] for m in of_type(res["messages"], "update_display_data")
                if MIME in m["content"]["data"])
    assert "agio-tool-label" in html and "\N{WRENCH}" not in html  # no emoji font needed for the fallback
    return k, bundles(res)[-1]["run"]


def test_control_cells_work_in_a_kernel_that_never_loaded_agio_and_print_once(workdir):
    k, run = first_run(workdir)
    k.close()
    k = fresh(workdir)  # restarted: no %load_ext, no agent yet
    try:
        # the agent the retry needs is missing: one line naming it, nothing run, never the offline model
        res = control(k, f"%agio retry {run['id'][:8]} --from-seq 4")
        reply = res["reply"]["content"]
        assert reply["ename"] == "UsageError" and "Agent(name='coder2'" in reply["evalue"], reply
        assert "\n" not in reply["evalue"] and not bundles(res)
        assert "offline" not in str(res["messages"])
        # the same control cell again, once the agent's cell has run: it loads nothing twice, says nothing
        ok(k.execute(AGENTS))
        res = control(k, f"%agio retry {run['id'][:8]} --from-seq 4")
        ok(res)
        assert "already loaded" not in streams(res)
        retried = bundles(res)[-1]["run"]
        assert retried["status"] == "completed" and retried["final_text"] == "answer 1" and retried["kind"] == "retry"
        assert not of_type(res["messages"], "execute_result"), "no Out[n] repr beside the transcript"
        assert k.value("_agio.run_id") == retried["id"]
        # fork (the last forkable step of the tool-using run, named by the run) prints its id once, no Out[n]
        res = control(k, f"%agio fork {run['session_id'][:8]} --at 4 --run {run['id'][:8]}")
        ok(res)
        out = streams(res)
        assert out.count("forked into session") == 1 and not of_type(res["messages"], "execute_result")
        new = out.split("forked into session ")[1].split(";")[0]
        assert out.count(new) == 1 and len(new) == 8  # the id as the transcript shows it
        # feedback and use-attempt too
        ok(control(k, f"%agio feedback {run['id'][:8]} +1 --no-propose"))
        res = control(k, f"%agio use-attempt {run['id'][:8]} 1")
        ok(res)
        assert "is current" in streams(res) and not of_type(res["messages"], "execute_result")
        assert run["id"] not in streams(res)  # ids shown cut to 8 characters
        # a cell saved by an earlier version (its own %load_ext line) still runs, and prints nothing more
        res = k.execute(f"%load_ext agio_notebook\n%agio feedback {run['id']} -1 --no-propose")
        ok(res)
        assert "already loaded" not in streams(res)
    finally:
        k.close()
    # a kernel that never loaded agio at all: the click loads it, silently, and the cell is only the command
    k = fresh(workdir)
    try:
        ok(k.execute(AGENTS))
        res = control(k, f"%agio retry {run['id'][:8]} --from-seq 4")
        ok(res)
        assert bundles(res)[-1]["run"]["status"] == "completed"
    finally:
        k.close()


def test_control_cells_leave_underscore_to_the_cell_above(workdir):
    """A tutorial cell below a run reads ``_`` (``forecast = _``): whatever was clicked in between, it still
    gets that run's handle; ``_agio`` is the latest run's."""
    k, run = first_run(workdir)
    try:
        assert k.value("_.run_id") == run["id"]
        for command in (f"%agio retry {run['id'][:8]} --from-seq 4", f"%agio fork {run['session_id'][:8]} --at 4",
                        f"%agio feedback {run['id'][:8]} +1 --no-propose", f"%agio use-attempt {run['id'][:8]} 1"):
            ok(control(k, command))
            assert k.value("_.run_id") == run["id"], command
        assert k.value("_agio.run_id") != run["id"]  # the retry's
        # assigned, the value is kept
        ok(k.execute(f"new = %agio fork {run['session_id'][:8]} --at 4"))
        assert len(k.value("new")) == 32
    finally:
        k.close()


SPENT = r'''
from agio_notebook import Agent, ScriptedModel
once = Agent(model=ScriptedModel(["the only reply"]), name="once")
other = Agent(model=ScriptedModel(["another reply"], loop=True), name="other")
'''


def test_a_spent_script_is_one_line_saying_what_to_do_and_changes_nothing(workdir):
    k = fresh(workdir)
    try:
        ok(k.execute("%load_ext agio_notebook\n" + SPENT))
        res = k.execute("%%agio once --new-session\nhi")
        first = bundles(res)[-1]["run"]
        for cell in (f"%agio retry {first['id'][:8]}", "%%agio once\nagain"):
            reply = control(k, cell)["reply"]["content"]
            assert reply["ename"] == "UsageError" and "\n" not in reply["evalue"], reply
            assert "ScriptedModel" in reply["evalue"] and "loop=True" in reply["evalue"] and "'once'" in reply["evalue"]
        assert k.value("len(_agio._controller.repository.list_runs())") == 1  # nothing ran
        # retried by another agent, then the spent one's attempt retried: refused before it becomes current
        ok(control(k, f"%agio retry {first['id'][:8]} --agent other"))
        reply = control(k, f"%agio retry {first['id'][:8]}")["reply"]["content"]
        assert reply["ename"] == "UsageError" and "ScriptedModel" in reply["evalue"]
        current = k.value(f"[a.current for a in __import__('agio_notebook.execution.attempts', fromlist=['x'])"
                          f".attempts_of(_agio._controller.repository, {first['id']!r})]")
        assert current == [False, True]  # the retry's attempt is still the one in use
    finally:
        k.close()


def test_result_metrics_read_as_a_table_and_a_line(workdir):
    k = fresh(workdir)
    try:
        ok(k.execute("%load_ext agio_notebook\n" + SPENT))
        res = k.execute("from agio_notebook import StepRunner\n"
                        "result = await StepRunner(other).run(None, 'hi')\nresult.metrics")
        data = of_type(res["messages"], "execute_result")[0]["content"]["data"]
        assert data["text/plain"].startswith("agio run metrics: 2 steps (1 model call) · 0 tool calls")
        assert "ttft_ms=" not in data["text/plain"] and "RunMetrics(" not in data["text/plain"]
        html = data["text/html"]
        assert '<table class="agio-run-metrics"' in html and "time to first token" in html
        assert re.search(r"<td[^>]*>\d+ ms</td>", html)  # whole milliseconds, not 0.05011500002183311
    finally:
        k.close()


def test_controls_under_a_superseded_attempt_act_on_that_attempt(workdir):
    k, run = first_run(workdir)
    try:
        res = k.execute(f"%agio retry {run['id']} --from-seq 4")
        retry = [b for b in bundles(res) if b["run"]["kind"] == "retry"][-1]
        assert retry["run"]["final_text"] == "answer 2"
        # the first transcript, redrawn in place: it now says it is superseded
        redrawn = [b for b in bundles(res) if b["run"]["id"] == run["id"]]
        assert redrawn and redrawn[-1]["run"]["superseded_by"] == retry["run"]["id"]
        assert [a["current"] for a in redrawn[-1]["attempts"]] == [False, True]
        ok(k.execute(f"%agio fork {run['session_id']} --at 4 --run {run['id']}"))
        steps = k.value("[s.content for s in _agio._controller.repository.get_steps("
                        "_agio._controller.session_id)]")
        assert steps[-1] == "answer 1", steps  # the superseded attempt's answer, as its transcript shows
        # from Python, the handle of the first attempt forks its own steps too
        assert k.value(f"_agio._controller.handles[{run['id']!r}].fork(4) != ''") is True
        steps = k.value("[s.content for s in _agio._controller.repository.get_steps("
                        "_agio._controller.session_id)]")
        assert steps[-1] == "answer 1", steps
        ok(k.execute(f"%agio fork {run['session_id']} --at 4"))  # without --run: the current attempt
        steps = k.value("[s.content for s in _agio._controller.repository.get_steps("
                        "_agio._controller.session_id)]")
        assert steps[-1] == "answer 2"
        # a second retry, from the tool call: attempt 3 has steps 2..4 of its own
        ok(k.execute(f"%agio retry {run['id']} --from-seq 2"))
        # a bad step under a replaced attempt is one line, and changes nothing
        res = k.execute(f"%agio retry {run['id']} --from-seq 3")
        assert res["reply"]["content"]["ename"] == "UsageError" and "no step 3" in res["reply"]["content"]["evalue"]
        assert k.value(f"[a.current for a in __import__('agio_notebook.execution.attempts', fromlist=['x'])"
                       f".attempts_of(_agio._controller.repository, {run['id']!r})]") == [False, False, True]
        # Retry under the first attempt's transcript: it starts from ITS steps 1..3, not attempt 3's
        res = k.execute(f"%agio retry {run['id']} --from-seq 4")
        ok(res)
        assert "is current again" in streams(res)
        current = k.value(f"[s.run_id for s in _agio._controller.repository.get_steps({run['session_id']!r})]")
        assert current[1:3] == [run["id"], run["id"]] and current[3] == k.value("_agio.run_id"), current
        # inside the tool batch is still refused, in one line
        res = k.execute(f"%agio fork {run['session_id']} --at 2 --run {run['id']}")
        assert res["reply"]["content"]["ename"] == "UsageError" and "tool batch" in res["reply"]["content"]["evalue"]
    finally:
        k.close()


def test_tree_after_a_fork_shows_the_family(workdir):
    k, run = first_run(workdir)
    try:
        ok(k.execute(f"%agio fork {run['session_id']} --at 4"))
        res = k.execute("%agio tree")
        data = of_type(res["messages"], "execute_result")[0]["content"]["data"]
        tree = data["application/vnd.agio.tree+json"]
        assert tree["session_id"] == run["session_id"]  # the root session ...
        forks = [n for n in tree["root"]["children"][0]["children"] if n["kind"] == "session"]
        assert tree["focus"] == forks[0]["id"] and forks[0]["forked_at"] == 4  # ... with the fork in it
        assert run["id"][:8] in data["text/plain"] and "fork" in data["text/plain"]
    finally:
        k.close()


def test_wrong_agent_name_lists_the_kernels_agents(workdir):
    k, _ = first_run(workdir)
    try:
        res = k.execute("%%agio coder2\nhi")
        evalue = res["reply"]["content"]["evalue"]
        assert "no agent named 'coder2'" in evalue and "variable's name" in evalue
        assert "coder (Agent name 'coder2')" in evalue and "did you mean coder?" in evalue
        assert "\n" not in evalue
    finally:
        k.close()


def test_a_control_after_the_store_was_moved_is_one_line(workdir):
    k, run = first_run(workdir)
    try:
        shutil.move(str(workdir / "store"), str(workdir / "moved"))
        for cell in (f"%agio retry {run['id']} --from-seq 4", f"%agio fork {run['session_id']} --at 4 --run {run['id']}",
                     f"%agio use-attempt {run['id']} 1", f"%agio feedback {run['id']} +1"):
            res = control(k, cell)
            reply = res["reply"]["content"]
            assert reply["ename"] == "UsageError" and "\n" not in reply["evalue"], (cell, reply)
            assert run["id"] in reply["evalue"] or run["session_id"] in reply["evalue"], (cell, reply)
            assert not bundles(res)
    finally:
        k.close()


def test_the_offline_model_says_what_it_is_and_how_to_change_it(workdir):
    k = fresh(workdir)
    try:
        ok(k.execute("%load_ext agio_notebook"))
        res = k.execute("%%agio --new-session\nhello")
        text = bundles(res)[-1]["run"]["final_text"]
        assert "offline stand-in" in text and "not a language model" in text
        assert "OPENAI_API_KEY" in text and "%agio config" in text and "ScriptedModel" in text
    finally:
        k.close()
