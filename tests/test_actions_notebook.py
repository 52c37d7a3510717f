"""In a real kernel: `%%agio --tools python` runs sandboxed code whose figure and table appear in the
live view, in the transcript bundle and in the saved notebook; the isolation level is shown."""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

from actions_support import descendants
from kernel_support import KERNEL_NAME, Kernel, install_kernelspec

MIME = "application/vnd.agio.run+json"
SETUP = """
%load_ext agio_notebook
from agio_notebook import Agent, ScriptedModel
from agio_notebook.models.scripted import Reply
code = '''import pandas as pd, matplotlib.pyplot as plt
df = pd.DataFrame({"x": [1, 2, 3], "y": [2, 4, 9]})
df.plot(x="x", y="y")
df'''
coder = Agent(model=ScriptedModel([Reply.call("run_python", code=code), Reply.say("Plotted.")]), name="coder")
"""
CELL = "%%agio coder --tools python\nplot y against x"


@pytest.fixture
def kernel(tmp_path):
    install_kernelspec(tmp_path / "jupyter")
    k = Kernel(tmp_path, env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": "",
                              "AGIO_WORKSPACES": str(tmp_path / "ws")})
    k.execute(SETUP)
    yield k
    k.close()


def reply_of(kernel, res):
    """The shell reply to this very cell (a late reply to an earlier one is skipped)."""
    reply = res["reply"]
    while reply["parent_header"].get("msg_id") != res["msg_id"]:
        reply = kernel.kc.get_shell_msg(timeout=60)
    return reply["content"]


def test_figure_and_table_in_live_view_and_transcript(kernel):
    res = kernel.execute(CELL, timeout=120)
    assert reply_of(kernel, res)["status"] == "ok", reply_of(kernel, res)
    live = [json.dumps(m["content"]["data"].get("state", {})) for m in res["messages"] if m["msg_type"] == "comm_msg"]
    assert any("data:image/png;base64," in s for s in live), "the live view never showed the figure"
    bundles = [m["content"]["data"] for m in res["messages"]
               if m["msg_type"] in ("display_data", "update_display_data", "execute_result")
               and MIME in m["content"]["data"]]
    assert bundles, "no transcript bundle"
    final = bundles[-1]
    html = final["text/html"]
    assert "data:image/png;base64," in html and "<table" in html and "<th>y</th>" in html
    assert "[sandbox: bubblewrap: no network, read-only system, writable /workspace only]" in html
    assert '<span class="agio-isolation"' in html and "· sandbox: bubblewrap</span></summary>" in html
    assert any("agio-isolation" in s and "sandbox: bubblewrap<" in s for s in live), "no isolation on the live card"
    events = final[MIME]["events"]
    done = [e for e in events if e["type"] == "action_completed"]
    assert done and done[0]["payload"]["name"] == "run_python"
    tool_step = next(e["payload"]["step"] for e in events if e["type"] == "step_completed"
                     and e["payload"]["step"]["role"] == "tool")
    (action,) = tool_step["extra"]["actions"]
    assert {d["mime"] for d in action["output"]["displays"]} == {"image/png", "text/html"}
    png = next(d["data"] for d in action["output"]["displays"] if d["mime"] == "image/png")
    assert json.dumps(final[MIME]).count(png) == 1  # the figure is in the transcript's events once
    assert "1 figure(s), 1 table(s) shown" in final["text/plain"]


def test_a_write_shows_its_diff_in_the_live_view(kernel):
    kernel.execute("from agio_notebook.models.scripted import Reply\n"
                   "writer = Agent(model=ScriptedModel([Reply.call('write_file', path='n.txt', content='hello'),"
                   " Reply.say('ok')]), name='writer')")
    res = kernel.execute("%%agio writer --tools files\nwrite a note", timeout=120)
    live = [json.dumps(m["content"]["data"].get("state", {})) for m in res["messages"] if m["msg_type"] == "comm_msg"]
    assert any("agio-tool-diff" in s and "+hello" in s for s in live), "the live card never showed the diff"


def test_unknown_toolkit_is_one_clear_line(kernel):
    res = kernel.execute("%%agio coder --tools python,teleport\nhi")
    reply = reply_of(kernel, res)
    assert reply["status"] == "error" and reply["ename"] == "UsageError"
    assert reply["evalue"] == "%agio: unknown toolkit(s) teleport (choose from python, files, web, browser)"


def executed_interpreter_notebook(tmp_path):
    """The code-interpreter cell run in a real kernel through nbclient, as a saved notebook would hold it."""
    install_kernelspec(tmp_path / "jupyter")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(CELL)]
    env = {"AGIO_STORE": str(tmp_path / "store"), "AGIO_WORKSPACES": str(tmp_path / "ws"), "OPENAI_API_KEY": ""}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=180,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return nb


def test_saved_notebook_keeps_the_figure(tmp_path):
    nb = executed_interpreter_notebook(tmp_path)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    reread = nbformat.read(path, as_version=4)
    outputs = [o["data"] for o in reread.cells[1]["outputs"] if MIME in o.get("data", {})]
    assert outputs and "data:image/png;base64," in outputs[-1]["text/html"]
    assert "application/vnd.jupyter.widget-view+json" not in outputs[-1]


def test_actions_and_replay_code_commands(kernel):
    kernel.execute(CELL, timeout=120)
    kernel.execute("first = _\nbranch = first.fork(at=4)")
    assert kernel.value("list(agio_actions := __import__('agio_notebook').actions(first.session_id)['name'])") == \
        ["run_python"]
    res = kernel.execute("%agio replay-code")
    assert reply_of(kernel, res)["status"] == "ok"
    out = [m["content"]["data"]["text/plain"] for m in res["messages"] if m["msg_type"] == "execute_result"]
    assert out and "replayed 1 run_python call(s) of session" in out[0] and "failed" not in out[0]
    # the fork's fresh interpreter has df again
    assert kernel.value("__import__('agio_notebook.toolkits.sandbox', fromlist=['pool']).pool._boxes[branch]"
                        ".execute('int(df.y.sum())').value") == "15"
    frame = kernel.execute("%agio actions")
    assert "run_python" in json.dumps([m["content"].get("data") for m in frame["messages"]])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sandbox_and_browser_end_with_the_kernel(tmp_path):
    import time

    install_kernelspec(tmp_path / "jupyter")
    k = Kernel(tmp_path, env={"OPENAI_API_KEY": "", "AGIO_WORKSPACES": str(tmp_path / "ws")})
    try:
        res = k.execute(
            "import threading, http.server\n"
            "httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
            "threading.Thread(target=httpd.serve_forever, daemon=True).start()\n"
            "from agio_notebook.toolkits import browser, python_sandbox\n"
            "tools = {t.name: t for t in [*browser(allow=['127.0.0.1']), *python_sandbox()]}\n"
            "print(tools['run_python'].function(code='1+1'))\n"
            "print(tools['navigate_and_extract'].function(url=f'http://127.0.0.1:{httpd.server_address[1]}/'))",
            timeout=120)
        printed = "".join(m["content"].get("text", "") for m in res["messages"] if m["msg_type"] == "stream")
        assert "[value] 2" in printed and "Status: 200" in printed, printed
        kernel_pid = k.km.provisioner.process.pid
        started = descendants(kernel_pid)
        names = set()
        for pid in started:
            try:
                names.add(open(f"/proc/{pid}/comm").read().strip())
            except OSError:
                pass
        assert "bwrap" in names and any("chrom" in n for n in names), names
    finally:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=False)  # a normal shutdown, as JupyterLab's "Shut Down Kernel"
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if _alive(p)]


def test_the_code_interpreter_tutorial_stops_at_a_failed_tool(kernelspec_dir, tmp_path, monkeypatch):
    """The tutorial's scripted agent answers the same whatever its tools returned; with the sandbox
    unable to start, the tutorial must stop right after the run, naming the failed tool, instead of
    reading on as if it had worked."""
    from pathlib import Path

    from nbclient.exceptions import CellExecutionError

    root = Path(__file__).resolve().parent.parent
    nb = nbformat.read(root / "notebooks" / "code_interpreter.ipynb", as_version=4)
    broken = ("from agio_notebook.toolkits import sandbox\n"
              "sandbox._probe['bubblewrap'] = 'bwrap: execvp /x/bin/python3: No such file or directory'")
    nb.cells.insert(1, nbformat.v4.new_code_cell(broken))
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count, cell.outputs = None, []
    first_check = next(i for i, c in enumerate(nb.cells) if "tools_worked(first.steps)" in c.source)
    for name, value in (("AGIO_STORE", str(tmp_path / "store")), ("AGIO_WORKSPACES", str(tmp_path / "ws"))):
        monkeypatch.setenv(name, value)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=180, resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as failed:
        client.execute()
    assert "a tool call failed" in str(failed.value) and "run_python: Error" in str(failed.value), failed.value
    assert "sandbox refused" in str(failed.value)
    ran = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count")]
    assert max(ran) == first_check, (ran, first_check)  # nothing after the failed check ran
