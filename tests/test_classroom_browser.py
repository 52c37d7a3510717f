"""A class in real parts: PostgreSQL, JupyterHub with configurable-http-proxy and servers on this machine,
the configuration `agio classroom init --trial-password --course notebooks` writes, and Debian's chromium.
Two students and a teacher log in; each student runs a cell and an exercise (check() keeps its result) in their own server; the
teacher's dashboard shows both; each student's Runs panel shows only their own runs; the teacher opens a
student's transcript from the dashboard; a user the class does not know is refused at the spawn in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import BrowserContext, Page, sync_playwright

from hub_support import quiet_lab_settings, running_hub
from lab_support import CHROMIUM, CHROMIUM_ARGS, accept_kernel_choice, run_all
from store_backends import running_postgres

ROOT = Path(__file__).resolve().parent.parent
LONG = 180_000  # ms: three servers and their kernels start on a shared machine
PASSWORD = "class-trial-password"
TEACHER, STUDENTS = "tina", ["alice", "bob"]

SETUP = '''%load_ext agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

def adding(messages, tools):
    return Reply.call("add", a=2, b=3) if messages[-1]["role"] == "user" else f"it is {messages[-1]['content']}"

helper = Agent(name="helper", model=FunctionModel(adding), tools=[add])'''

EXERCISE = '''from agio_notebook.exercises import RATES, check, exercise

def convert_currency(amount: float, currency: str) -> str:
{doc}    return f"{{amount * RATES[currency]:.2f}} {{currency}}"

result = check(exercise("tool_docstring"), convert_currency)
result'''

DOCSTRING = '''    """Convert an amount of US dollars to another currency.

    Args:
        amount: the amount in US dollars.
        currency: a three-letter ISO 4217 code such as 'EUR', 'GBP' or 'JPY'.
    """
'''


def student_notebook(name: str) -> nbformat.NotebookNode:
    spec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    doc = DOCSTRING if name == "bob" else ""  # bob documented the tool; alice has not yet
    return new_notebook(cells=[new_code_cell(SETUP), new_code_cell(f"%%agio helper\nwhat is two plus three, {name}?"),
                               new_code_cell(EXERCISE.format(doc=doc))],
                        metadata={"kernelspec": spec})


@pytest.fixture(scope="module")
def hub(tmp_path_factory, kernelspec_dir):
    work = tmp_path_factory.mktemp("classroom-hub")
    with running_postgres() as pg:
        url = pg.new_database()
        init = subprocess.run([sys.executable, "-m", "agio_notebook", "classroom", "init", url, "--teacher", TEACHER,
                               "--students", ",".join(STUDENTS), "--secrets", str(work / "secrets.json"),
                               "--hub-config", str(work / "class_config.py"), "--course", str(ROOT / "notebooks"),
                               "--trial-password", PASSWORD], cwd=work, capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, init.stderr
        for name in (TEACHER, *STUDENTS, "zed"):
            home = work / "homes" / name
            quiet_lab_settings(home)
            if name in STUDENTS:
                nbformat.write(student_notebook(name), home / "mine.ipynb")
        with running_hub(work, (work / "class_config.py").read_text()) as base:
            yield base, work


def log_in(context: BrowserContext, base: str, name: str) -> Page:
    page = context.new_page()
    page.goto(f"{base}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    return page


def open_with_kernel(page: Page, base: str, name: str, path: str) -> None:
    """Start the notebook's kernel on the user's server (as JupyterLab would, with the page's login), then open
    the notebook, which joins it: a slow start on a busy machine makes JupyterLab ask which kernel to use."""
    xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_xsrf")
    body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
    answer = page.request.post(f"{base}/user/{name}/api/sessions", data=json.dumps(body),
                               headers={"X-XSRFToken": xsrf, "Content-Type": "application/json"}, timeout=LONG)
    assert answer.ok, answer.text()
    page.goto(f"{base}/user/{name}/lab/tree/{path}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
    page.wait_for_function("document.body.innerText.includes('Python 3 (ipykernel) | Idle') || "
                           "document.querySelector('.jp-Dialog')", timeout=LONG)
    accept_kernel_choice(page)


def open_panel(page: Page) -> None:
    page.locator('.jp-SideBar li[data-id="agio-runs-panel"]').click(timeout=LONG)
    page.wait_for_selector(".agio-runs-panel .agio-runs-where", timeout=LONG)


def panel_rows(page: Page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('.agio-runs-panel .agio-runs-row')].map(r => ({
        id: r.dataset.runId, user: (r.querySelector('.agio-runs-user') || {}).textContent || null,
        query: r.querySelector('.agio-runs-query').textContent}))""")


def test_a_class_on_jupyterhub(hub):
    base, work = hub
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pages: dict[str, Page] = {}
        for name in (*STUDENTS, TEACHER):  # each in a browser context of their own (their own hub cookie)
            pages[name] = log_in(browser.new_context(viewport={"width": 1400, "height": 1100}), base, name)
        for name in (*STUDENTS, TEACHER):
            pages[name].wait_for_url(f"**/user/{name}/lab**", timeout=LONG)
            pages[name].wait_for_selector(".jp-SideBar", timeout=LONG)
        # each user's server has the course and its own store: the role its URL names
        assert (work / "homes" / "alice" / "course" / "quickstart.ipynb").exists()
        teacher = pages[TEACHER]
        open_panel(teacher)
        teacher.wait_for_selector(".agio-runs-panel .agio-runs-dashboard:not([hidden])", timeout=LONG)
        assert f"· {TEACHER}" in teacher.locator(".agio-runs-where").inner_text()
        teacher.locator(".agio-runs-dashboard").click()
        teacher.wait_for_selector(".agio-class-dashboard", timeout=LONG)
        # each student runs their notebook: a %%agio cell and an exercise
        done_at: dict[str, float] = {}
        for name in STUDENTS:
            page = pages[name]
            open_with_kernel(page, base, name, "mine.ipynb")
            run_all(page, agio_cells=1, timeout=LONG)
        for name in STUDENTS:
            page = pages[name]
            # check() keeps the result in the class's store, as the role of whoever checked
            page.wait_for_function("[...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')]"
                                   ".some(o => o.innerText.includes('exercise tool_docstring'))", timeout=LONG)
            done_at[name] = time.monotonic()
            assert page.locator(".jp-Notebook .jp-AgioRun .agio-run").count() == 1
        # the teacher's dashboard shows both students' results (it follows the store live)
        cell = ".agio-class-cell[data-user='{}'][data-exercise='tool_docstring'].{}"
        teacher.wait_for_selector(cell.format("alice", "agio-class-failing"), timeout=2000 + 1000 * (time.monotonic()
                                  - max(done_at.values())))
        teacher.wait_for_selector(cell.format("bob", "agio-class-passed"), timeout=2000)
        shown = time.monotonic() - max(done_at.values())
        print(f"the dashboard showed both students {shown:.2f} s after the later one's check showed its result")
        reason = teacher.locator(cell.format("alice", "agio-class-failing") + " .agio-class-reason").inner_text()
        assert reason  # why alice's attempt failed, as the exercise said it
        # each student's panel shows only their own runs
        for name in STUDENTS:
            page = pages[name]
            open_panel(page)
            page.wait_for_function("document.querySelectorAll('.agio-runs-panel .agio-runs-row').length >= 1",
                                   timeout=LONG)
            rows = panel_rows(page)
            assert [(r["user"], r["query"]) for r in rows] == [(name, f"what is two plus three, {name}?")], rows
        # the teacher opens a student's transcript, one click from the dashboard
        bob_run = teacher.locator(".agio-class-student-runs[data-user='bob'] .agio-runs-row").first
        bob_run.wait_for(timeout=LONG)
        run_id = bob_run.get_attribute("data-run-id")
        bob_run.locator(".agio-runs-query").click()
        transcript = teacher.locator(f".lm-DockPanel .agio-runs-transcript-view .agio-run[data-agio-run='{run_id}']")
        transcript.wait_for(timeout=LONG)
        assert "by bob" in teacher.locator(".lm-DockPanel .agio-runs-transcript-view:visible .agio-runs-origin").inner_text()
        # the teacher's panel lists both students' runs, each with its user
        users = {r["user"] for r in panel_rows(teacher)}
        assert {"alice", "bob"} <= users
        # a user the class does not know gets one line at the spawn, and no server
        stranger = log_in(browser.new_context(), base, "zed")
        stranger.wait_for_function("document.body && document.body.innerText.includes('zed is not a member of this "
                                   "class')", timeout=LONG)
        assert "agio classroom add-student zed" in stranger.locator("body").inner_text()
        browser.close()
    assert json.loads((work / "secrets.json").read_text())["passwords"].keys() == {TEACHER, *STUDENTS}
