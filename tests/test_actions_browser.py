"""The browser toolkit with Debian's chromium against a real server on 127.0.0.1 (allowlisted)."""

from __future__ import annotations

import base64
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

import agio_notebook
from agio_notebook import Agent, ScriptedModel, StepRunner
from agio_notebook.models.scripted import Reply
from agio_notebook.storage import TinyDBRepository
from agio_notebook.toolkits import browser

from actions_support import descendants, one_tool_step, run_calls, tool_steps

FORM = b"""<html><head><title>Form</title></head><body><h1>Sign up</h1>
<form action="/hello" method="get"><input id="name" name="name"><button id="go" type="submit">Go</button></form>
<a id="next" href="/second">next page</a></body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = urlsplit(self.path)
        port = self.server.server_address[1]
        if parts.path == "/":
            self._send(FORM)
        elif parts.path == "/second":
            self._send(b"<html><head><title>Second</title></head><body><p>You made it.</p></body></html>")
        elif parts.path == "/hello":
            name = parse_qs(parts.query).get("name", ["?"])[0]
            self._send(f"<html><head><title>Hi</title></head><body><p>Hello, {name}!</p></body></html>".encode())
        elif parts.path == "/to-localhost":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/second")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts.path == "/loop":  # never reaches DOMContentLoaded
            self._send(b"<html><body><p>spin</p><script>while (true) {}</script></body></html>")
        elif parts.path == "/late-loop":  # loads, then loops: the text extraction would wait forever
            self._send(b"<html><body><p>late</p><script>setTimeout(() => { while (true) {} }, 20)</script></body></html>")
        elif parts.path == "/websocket":
            # a WebSocket is not seen by Playwright's route filter; the proxy must refuse it
            self._send(f"<html><body><script>new WebSocket('ws://localhost:{port}/ws')</script></body></html>"
                       .encode())
        else:
            self.send_error(404)

    def _send(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_WORKSPACES", str(tmp_path / "ws"))
    repo = TinyDBRepository(tmp_path / "store")
    tools = browser(allow=["127.0.0.1"])
    yield repo, tools
    tools[0].close()
    repo.close()


def test_navigate_click_fill_and_screenshot_through_a_scripted_agent(env, server):
    repo, tools = env
    result = run_calls(repo, "b", tools,
                       ("navigate_and_extract", {"url": server + "/"}),
                       ("click", {"selector": "#next"}),
                       ("fill_form", {"url": server + "/", "form_data": {"#name": "Ada"}, "submit": "#go"}),
                       ("screenshot", {}))
    steps = tool_steps(result)
    assert [s.status for s in steps] == ["ok"] * 4, [s.content for s in steps]
    assert "Title: Form" in steps[0].content and "# Sign up" in steps[0].content
    assert "You made it." in steps[1].content
    assert "Hello, Ada!" in steps[2].content
    shot = steps[3].extra["actions"][0]["output"]["screenshot"]
    assert base64.b64decode(shot).startswith(b"\x89PNG")
    frame = agio_notebook.actions("b", repository=repo)
    assert list(frame["name"]) == ["navigate_and_extract", "click", "fill_form", "screenshot"]
    assert frame["screenshot"].iloc[3] == shot and frame["http_status"].iloc[0] == 200
    # the screenshot is shown in the transcript (live view and saved notebook render the same HTML)
    from agio_notebook.notebook.transcript import bundle_for_run

    html = bundle_for_run(repo, result.run_id)["text/html"]
    assert f'src="data:image/png;base64,{shot}"' in html


def test_private_addresses_are_blocked_in_the_browser(env, server):
    repo, tools = env
    direct = one_tool_step(repo, "p", tools, "navigate_and_extract", url="http://10.0.0.1/")
    assert direct.status == "error" and "10.0.0.1 is a private address" in direct.content
    hop = one_tool_step(repo, "p", tools, "navigate_and_extract", url=server + "/to-localhost")
    assert hop.status == "error" and "localhost resolves to 127.0.0.1" in hop.content
    page = one_tool_step(repo, "p", tools, "navigate_and_extract", url=server + "/websocket")
    assert page.status == "ok"
    proxy = tools[0].close.__self__._proxy
    deadline = time.monotonic() + 30
    while not any("localhost resolves to 127.0.0.1" in r for r in proxy.refusals) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("localhost resolves to 127.0.0.1" in r for r in proxy.refusals), proxy.refusals
    ok = one_tool_step(repo, "p", tools, "navigate_and_extract", url=server + "/second")
    assert ok.status == "ok" and "You made it." in ok.content


def test_one_context_per_session_closed_with_the_agent(env, server, tmp_path):
    repo, tools = env
    agent = Agent(model=ScriptedModel([Reply.call("navigate_and_extract", url=server + "/"), Reply.say("ok")]),
                  tools=tools)
    import asyncio

    asyncio.run(StepRunner(agent, repository=repo).run("s1", "go"))
    asyncio.run(StepRunner(Agent(model=ScriptedModel([Reply.call("navigate_and_extract", url=server + "/second"),
                                                       Reply.say("ok")]), tools=tools),
                           repository=repo).run("s2", "go"))
    host = tools[0].close.__self__
    assert set(host.contexts) == {"s1", "s2"}
    agent.close()
    assert host.contexts == {} and host._browser is None
    after = one_tool_step(repo, "s1", tools, "navigate_and_extract", url=server + "/")
    assert after.status == "error" and "this browser was closed" in after.content


def test_chromium_runs_unprivileged_with_its_own_sandbox(env, server):
    import os

    repo, tools = env
    assert one_tool_step(repo, "u", tools, "navigate_and_extract", url=server + "/").status == "ok"
    mine = descendants(os.getpid())
    chromium = []
    for pid in mine:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except OSError:
            continue
        if argv and argv[0].endswith(b"chromium"):
            chromium.append((pid, uid, argv))
    assert chromium, "no chromium process found"
    assert not [a for _, _, a in chromium if b"--no-sandbox" in a]
    if os.geteuid() == 0:
        assert {uid for _, uid, _ in chromium} == {65534}


def _spinning_renderers() -> list[int]:
    """Our chromium renderers whose main thread is always runnable over half a second (an endless loop)."""
    import os

    renderers = []
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--type=renderer" in f.read():
                    renderers.append(pid)
        except OSError:
            continue
    hits = dict.fromkeys(renderers, 0)
    for _ in range(50):
        for pid in renderers:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    hits[pid] += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:
                pass
        time.sleep(0.01)
    return [pid for pid, n in hits.items() if n >= 45]


@pytest.mark.parametrize("path", ["/loop", "/late-loop"])
def test_a_page_in_an_endless_loop_does_not_disable_the_browser(tmp_path, server, path):
    from agio_notebook.toolkits import BrowserLimits

    repo = TinyDBRepository(tmp_path / "store")
    tools = browser(allow=["127.0.0.1"], limits=BrowserLimits(timeout=6))
    host = tools[0].close.__self__
    host.call(host._start)  # chromium's start-up on a loaded machine is not what these timeouts measure
    try:
        assert one_tool_step(repo, "spin", tools, "navigate_and_extract", url=server + "/").status == "ok"
        stuck = one_tool_step(repo, "spin", tools, "navigate_and_extract", url=server + path)
        assert stuck.status == "error", stuck.content
        assert "the page was closed and the session's next call gets a fresh page" in stuck.content, stuck.content
        # no core left busy: a renderer that spins on forever is found however long we look; on a busy
        # machine a healthy one can be seen runnable, waiting for a core, once in a while
        deadline = time.monotonic() + 20
        while (spinning := _spinning_renderers()) and time.monotonic() < deadline:
            pass
        assert not spinning
        after = run_calls(repo, "spin", tools, ("navigate_and_extract", {"url": server + "/second"}),
                          ("screenshot", {}), ("click", {"selector": "text=You made it."}))
        assert [s.status for s in tool_steps(after)] == ["ok"] * 3, [s.content for s in tool_steps(after)]
        assert "You made it." in tool_steps(after)[0].content
    finally:
        tools[0].close()
        repo.close()


def test_an_element_that_never_appears_keeps_the_page(env, server):
    from agio_notebook.toolkits import BrowserLimits

    repo, _ = env
    tools = browser(allow=["127.0.0.1"], limits=BrowserLimits(timeout=5))
    host = tools[0].close.__self__
    host.call(host._start)
    try:
        result = run_calls(repo, "keep", tools, ("navigate_and_extract", {"url": server + "/second"}),
                           ("click", {"selector": "#missing"}), ("screenshot", {}))
        nav, click, shot = tool_steps(result)
        assert nav.status == "ok", nav.content
        assert click.status == "error" and "fresh page" not in click.content, click.content
        assert shot.status == "ok" and f"Screenshot of {server}/second" in shot.content, shot.content
    finally:
        tools[0].close()


def _private_tmpdir(tmp_root: str) -> str:
    """A TMPDIR only root can enter (as CI, JupyterHub and HPC sites set one), under /var/tmp."""
    import os
    import tempfile

    private = tempfile.mkdtemp(prefix="agio-private-tmp-", dir=tmp_root)
    os.chmod(private, 0o700)
    return private


def test_the_browser_works_whatever_tmpdir_is(tmp_path, server, monkeypatch):
    import os
    import shutil
    import tempfile

    private = _private_tmpdir("/var/tmp")
    try:
        monkeypatch.setenv("TMPDIR", private)
        monkeypatch.setattr(tempfile, "tempdir", None)
        assert tempfile.gettempdir() == private
        repo = TinyDBRepository(tmp_path / "store")
        tools = browser(allow=["127.0.0.1"])
        try:
            step = one_tool_step(repo, "t", tools, "navigate_and_extract", url=server + "/second")
            assert step.status == "ok" and "You made it." in step.content, step.content
        finally:
            tools[0].close()
            repo.close()
        assert os.listdir(private) == []  # the browser's files went where its user can write, and are gone
    finally:
        shutil.rmtree(private, ignore_errors=True)


EXITS_WITH_A_BROWSER_OPEN = """
import sys
sys.path.insert(0, sys.argv[1])
from actions_support import one_tool_step
from agio_notebook.storage import TinyDBRepository
from agio_notebook.toolkits import browser

tools = browser(allow=["127.0.0.1"])
step = one_tool_step(TinyDBRepository(sys.argv[2]), "x", tools, "navigate_and_extract", url=sys.argv[3])
print(step.status, tools[0].close.__self__._files, flush=True)
"""


def test_the_interpreter_exits_quietly_with_a_browser_open(tmp_path, server):
    """No close by hand: the exit handler closes the browser, with nothing on stderr and no chromium left."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    private = _private_tmpdir("/var/tmp")
    try:
        env = dict(os.environ, TMPDIR=private, AGIO_WORKSPACES=str(tmp_path / "ws"),
                   PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, "-c", EXITS_WITH_A_BROWSER_OPEN, str(root / "tests"),
                            str(tmp_path / "store"), server + "/second"], env=env, capture_output=True, text=True,
                           timeout=180)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    status, files = r.stdout.split()
    assert status == "ok"
    assert not os.path.exists(files)
    leftover = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if files.encode() in f.read():
                    leftover.append(pid)
        except OSError:
            continue
    assert not leftover, leftover


def test_starting_the_browser_never_changes_the_processs_environment(env, server):
    """Playwright's driver gets the browser's own TMPDIR; the kernel's other threads never see it."""
    import os

    repo, tools = env
    before = os.environ.get("TMPDIR")
    seen: set = set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.add(os.environ.get("TMPDIR"))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        step = one_tool_step(repo, "env", tools, "navigate_and_extract", url=server + "/")
    finally:
        stop.set()
        watcher.join()
    assert step.status == "ok", step.content
    assert seen == {before}, seen  # (only Playwright's own PLAYWRIGHT_NODEJS_PATH names the driver's launcher)


def test_the_chromium_to_drive_is_found_or_named_in_one_line(tmp_path, monkeypatch):
    import os
    import shutil as sh

    from agio_notebook.toolkits.browser_tool import find_chromium
    from agio_notebook.toolkits.errors import ActionError

    real = sh.which("chromium") or "/usr/bin/chromium"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "chromium-browser").symlink_to(real)
    monkeypatch.setenv("PATH", str(fake_bin))
    monkeypatch.delenv("AGIO_CHROMIUM", raising=False)
    assert find_chromium() == str(fake_bin / "chromium-browser")  # found on PATH under another name
    monkeypatch.setenv("AGIO_CHROMIUM", real)
    assert find_chromium() == real
    monkeypatch.setenv("AGIO_CHROMIUM", str(tmp_path / "nowhere"))
    with pytest.raises(ActionError, match=r"^no chromium at .*nowhere \(from AGIO_CHROMIUM\)"):
        browser()
    with pytest.raises(ActionError, match=r"from executable="):
        browser(executable=str(tmp_path / "also-nowhere"))
    monkeypatch.delenv("AGIO_CHROMIUM")
    monkeypatch.setattr("agio_notebook.toolkits.browser_tool.CHROMIUM", str(tmp_path / "not-installed"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ActionError, match=r"^no chromium found \(chromium, chromium-browser"):
        browser()
    assert "\n" not in str(os.environ.get("PATH"))
