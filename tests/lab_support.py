"""A real `jupyter lab` on 127.0.0.1 for browser tests, and how to launch Debian's chromium."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
import uuid
from typing import Any, AsyncIterator, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SOURCE_EXTENSION = Path(__file__).resolve().parent.parent / "agio_notebook" / "labextension"


def source_extension_path(root: Path) -> Path:
    """A Jupyter path whose agio-notebook extension is this source tree's build (first found wins)."""
    link = root / ".jupyter-src" / "labextensions" / "agio-notebook"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(SOURCE_EXTENSION, target_is_directory=True)
    return link.parent.parent


def loaded_extension_entry(base: str, token: str) -> str:
    """The remote entry file the server hands out for agio-notebook (its name carries the build's hash)."""
    page = urllib.request.urlopen(f"{base}/lab?token={token}").read().decode()
    start = page.index('id="jupyter-config-data"')
    config = json.loads(page[page.index(">", start) + 1:page.index("</script>", start)])
    entry = next(e for e in config["federated_extensions"] if e["name"] == "agio-notebook")
    return entry["load"].rsplit("/", 1)[-1]


def source_extension_entry() -> str:
    return next((SOURCE_EXTENSION / "static").glob("remoteEntry.*.js")).name


@contextlib.contextmanager
def running_lab(root: Path, env: dict[str, str], *extra_args: str, port: int | None = None,
                token: str | None = None) -> Iterator[tuple[str, str]]:
    """Serve ``root``; yields (base URL, token). Every notebook cell is rendered (no virtual scrolling).
    ``port`` and ``token``: those of a server started before (a restart the page reconnects to).

    The JupyterLab extension served is the one built from this source tree, whatever the venv has installed.
    """
    paths = [str(source_extension_path(root)), env.get("JUPYTER_PATH", "")]
    env = {**env, "JUPYTER_PATH": os.pathsep.join(p for p in paths if p)}
    settings = root / ".settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = port or free_port(), token or secrets.token_hex(16)
    # the server's log goes to a file: a pipe nobody reads would stop the server once full
    log = server_log(root)
    with log.open("a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
             f"--LabApp.user_settings_dir={root / '.settings'}", f"--LabApp.workspaces_dir={root / '.ws'}",
             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", *extra_args],
            stdout=out, stderr=subprocess.STDOUT, env={**env, "JUPYTER_CONFIG_DIR": str(root / ".config")})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        else:
            proc.kill()
            raise RuntimeError("jupyter lab did not start: " + log.read_text()[-4000:])
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def kernel_iopub(base: str, token: str, code: str) -> AsyncIterator[tuple[float, dict[str, Any]]]:
    """Run ``code`` in a new kernel of the server at ``base``, through its kernel websocket (as a page
    does); yields (arrival time, message) for each of the cell's iopub messages, up to its idle status."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    request = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    kernel_id = json.loads(urllib.request.urlopen(request, timeout=60).read())["id"]
    url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?token={token}"
    ws = await websocket_connect(HTTPRequest(url, request_timeout=60))
    msg_id = uuid.uuid4().hex
    ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False}}))
    try:
        while True:
            message = json.loads(await ws.read_message())
            arrived = time.time()
            if message.get("parent_header", {}).get("msg_id") != msg_id or message["channel"] != "iopub":
                continue
            yield arrived, message
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return
    finally:
        ws.close()


def server_log(root: Path) -> Path:
    """Where ``running_lab(root, ...)`` writes the server's output."""
    return root / "jupyter-lab.log"


# the page has a websocket open to the kernel of its notebook's session (as the server counts them);
# true as well where the notebook has no session on the server
KERNEL_CONNECTED = """async () => {
  const path = decodeURIComponent(location.pathname.split('/tree/')[1] || '');
  const config = document.getElementById('jupyter-config-data');
  const base = (config && JSON.parse(config.textContent).baseUrl) || '/';  // a hub serves lab under /user/NAME/
  const reply = await fetch(base + 'api/sessions', { cache: 'no-store' });
  if (!reply.ok) return false;
  const sessions = await reply.json();
  const own = sessions.find(s => s.path === path);
  return !own || (!!own.kernel && own.kernel.connections > 0);
}"""

KERNEL_IDLE = """() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  if (indicator) return indicator.dataset.status === 'idle';
  const status = document.querySelector('.jp-KernelStatus');
  return !!status && /Idle/.test(status.textContent);
}"""


# in JupyterLab's "Select Kernel" dialog, choose the running kernel of the notebook's own session when the
# list offers it (its option's title starts "Path: <the notebook's path>"); true if chosen
JOIN_OWN_KERNEL = """(dialog) => {
  const name = ((dialog.querySelector('label') || {}).textContent || '').match(/"(.*)"$/);
  const select = dialog.querySelector('select');
  if (!name || !select) return false;
  const own = [...select.options].find(o => o.value.startsWith('{"id"')
    && /^Path: (.*\\/)?(.*)$/.exec((o.title || '').split('\\n')[0])?.[2] === name[1]);
  if (!own) return false;
  select.value = own.value;
  select.dispatchEvent(new Event('change', { bubbles: true }));
  return true;
}"""


def accept_kernel_choice(page) -> bool:
    """Answer JupyterLab's "Select Kernel" dialog as a person would: with the notebook's running kernel
    when the list offers it, else with the kernel it proposes (the notebook's own kernelspec). JupyterLab
    asks when a cell is run before the page has connected to the notebook's kernel, or when its request
    to start one failed; both happen on a loaded machine. Accepting the proposed kernelspec while a kernel
    runs replaces that kernel with a new one, and the cells queued to the old one are never run (seen
    under load, with and without the project's server extension: bench/lab_extension_under_load.py).
    A click can land while the dialog still lays itself out, so it is repeated until the dialog goes.
    Returns whether it was there."""
    dialog = page.locator(".jp-Dialog:has-text('Select Kernel')")
    if not dialog.count():
        return False
    dialog.first.evaluate(JOIN_OWN_KERNEL)
    for _ in range(6):
        try:
            dialog.first.locator(".jp-mod-accept").click(timeout=10000)
            dialog.first.wait_for(state="detached", timeout=10000)
            return True
        except Exception:  # noqa: BLE001 - still there: click again
            if not dialog.count():
                return True
    raise AssertionError("JupyterLab's Select Kernel dialog stays after six clicks on Select: "
                         + " | ".join(dialog.first.inner_text().split("\n"))[:500])


def open_with_kernel(page, base: str, token: str, name: str, timeout: float = 120, workspace: str | None = None) -> str:
    """Start the kernel of notebook ``name`` on the server (as JupyterLab would), then open the
    notebook, which joins that session. The page then never has to start a kernel itself: a start
    that takes too long on a loaded machine makes JupyterLab ask which kernel to use instead.
    ``workspace``: open it in a JupyterLab workspace of that name (only this notebook open, not the tabs a
    page before left). Returns the session's id (``close_session`` shuts its kernel down)."""
    quoted = urllib.parse.quote(name)
    contents = json.loads(urllib.request.urlopen(f"{base}/api/contents/{quoted}?token={token}",
                                                 timeout=timeout).read())
    kernel = contents["content"]["metadata"]["kernelspec"]["name"]
    body = json.dumps({"path": name, "name": name, "type": "notebook", "kernel": {"name": kernel}}).encode()
    request = urllib.request.Request(f"{base}/api/sessions?token={token}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    session = json.loads(urllib.request.urlopen(request, timeout=timeout).read())
    where = f"workspaces/{urllib.parse.quote(workspace)}/" if workspace else ""
    page.goto(f"{base}/lab/{where}tree/{quoted}?token={token}")
    return session["id"]


def close_session(base: str, token: str, session_id: str, timeout: float = 60) -> None:
    """Shut a notebook's session and its kernel down (a module that opens many notebooks keeps one kernel)."""
    request = urllib.request.Request(f"{base}/api/sessions/{session_id}?token={token}", method="DELETE")
    urllib.request.urlopen(request, timeout=timeout).read()


def save_until(page, path: Path, ready, timeout: float = 60) -> Any:
    """Save the open notebook with its toolbar's button (a key press can land where focus left it, after a
    button it clicked disappeared) and wait until the file on disk holds what ``ready`` expects; the
    notebook as read back (multi-line strings joined)."""
    import nbformat

    page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").first.click()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            saved = nbformat.reads(path.read_text(), as_version=4)
            if ready(saved):
                return saved
        except (OSError, ValueError):
            pass
        page.wait_for_timeout(200)
    raise AssertionError(f"{path.name} was not saved with what the test expects")


def run_all(page, agio_cells: int = 0, timeout: float = 60000) -> None:
    """Run All Cells from the menu once the notebook is settled: the kernel is idle and the extension
    has given each ``%%agio`` cell its highlighting (a click before that can be lost). Run All queues
    every code cell at once, so it has worked when every prompt shows ``[*]`` or a number. A click that
    was lost, or that landed on a neighbouring item while the menu laid itself out (which runs only the
    selected first cell, ``%load_ext``), is repeated; a cell that failed is reported with its output."""
    # the page is connected to the notebook's kernel, and it is idle: Run All before that makes
    # JupyterLab ask which kernel to use (the status bar may show the kernel idle before the page connects)
    page.wait_for_function(KERNEL_CONNECTED, polling=250, timeout=timeout)
    page.wait_for_function(KERNEL_IDLE, timeout=timeout)
    page.wait_for_function(f"document.querySelectorAll('.jp-Cell[data-agio-highlight]').length >= {agio_cells}",
                           timeout=timeout)
    for _ in range(3):
        if accept_kernel_choice(page):
            page.wait_for_function(KERNEL_IDLE, timeout=timeout)
        try:
            page.locator(".jp-Cell").first.click(timeout=timeout)
        except Exception:
            if accept_kernel_choice(page):
                continue
            dialog = page.locator(".jp-Dialog")
            if dialog.count():  # say what JupyterLab asked, not only that a click timed out
                raise AssertionError("a JupyterLab dialog blocks the notebook: "
                                     + " | ".join(dialog.first.inner_text().split("\n"))[:500]) from None
            raise
        page.get_by_text("Run", exact=True).click(timeout=timeout)
        page.get_by_text("Run All Cells", exact=True).click(timeout=timeout)
        try:
            page.wait_for_function(f"({RUN_ALL_STATE})() !== 'none'", timeout=20000)
        except Exception:  # noqa: BLE001 - the click was lost: try again
            continue
        try:  # the cells are queued one after another, within moments
            page.wait_for_function(f"({RUN_ALL_STATE})() === 'all'", timeout=5000)
            return
        except Exception:  # noqa: BLE001 - some cells stay unqueued: see why below
            state = page.evaluate(RUN_ALL_STATE)
        if state == "failed":
            raise AssertionError("Run All Cells stopped at a failing cell: " + page.evaluate(CELL_STATES))
        # some cells ran, the rest were never queued: the click ran the selected cell only
    raise AssertionError("Run All Cells did not start every cell: " + page.evaluate(CELL_STATES))


# every code cell queued or run ('all'), some ('some'), none yet ('none'), or a cell failed and Run All
# stopped there ('failed': an error output, and a later cell not run)
RUN_ALL_STATE = """() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  const started = cells.map(c => /\\[(\\*|\\d+)\\]/.test(c.querySelector('.jp-InputArea-prompt')?.textContent || ''));
  if (started.every(s => s)) return 'all';
  if (!started.some(s => s)) return 'none';
  return cells.some(c => c.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) ? 'failed' : 'some';
}"""

CELL_STATES = """[...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map(c =>
  (c.querySelector('.jp-InputArea-prompt')?.textContent || '?').trim() + ' '
  + (c.querySelector('.jp-OutputArea')?.innerText || '').replace(/\\s+/g, ' ').slice(0, 300)).join(' | ')"""


PAGE_STATE = """() => [...document.querySelectorAll('.jp-Dialog, .jp-KernelStatus, .jp-Notebook-ExecutionIndicator')]
  .map(e => e.className.split(' ')[0] + ': ' + (e.innerText || e.dataset.status || '').replace(/\\s+/g, ' ').slice(0, 300))"""


@contextlib.contextmanager
def explained_timeouts(name: str) -> Iterator[None]:
    """While a browser test runs, a wait of its that times out leaves a screenshot in
    ``test-output/failures/<name>.png`` and notes on the error what the page showed (any dialog, the
    kernel's status): a failure seen once under load can then be understood, not only counted."""
    from playwright.sync_api import Locator, Page, TimeoutError as PlaywrightTimeout

    def explain(page, error: Exception) -> None:
        failures = Path(__file__).resolve().parent.parent / "test-output" / "failures"
        failures.mkdir(parents=True, exist_ok=True)
        try:
            page.screenshot(path=str(failures / f"{name}.png"), full_page=True, timeout=10000)
            shown = page.evaluate(PAGE_STATE)
            error.add_note(f"page at timeout ({failures.name}/{name}.png): " + (" | ".join(shown) or "no dialog"))
        except Exception as failed:  # noqa: BLE001 - the page itself may be gone
            error.add_note(f"no screenshot: {failed}")

    def wrapped(method, page_of):
        def wait(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except PlaywrightTimeout as error:
                explain(page_of(self), error)
                raise
        return wait

    originals = {(Page, "wait_for_function"): Page.wait_for_function,
                 (Page, "wait_for_selector"): Page.wait_for_selector, (Locator, "wait_for"): Locator.wait_for}
    for (owner, attr), method in originals.items():
        setattr(owner, attr, wrapped(method, (lambda p: p) if owner is Page else (lambda loc: loc.page)))
    try:
        yield
    finally:
        for (owner, attr), method in originals.items():
            setattr(owner, attr, method)
