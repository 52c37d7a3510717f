"""Every tutorial opened as a learner first meets it: untrusted, no kernel, in JupyterLab (chromium).

Two sets of notebooks: the tutorials as saved in the repository, and the same tutorials executed now
by scripts/refresh_tutorials.py (what the saved outputs become when refreshed), plus a notebook of the
views no tutorial shows (a plan, a cancelled batch, dollar amounts in HTML). None is trusted: the
notary database is new. Each notebook must show every output, each agio view drawn by the extension,
no raw repr where a view is promised, no run-on fallback text, no typeset math, no missing renderer,
and no console error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, running_lab

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "agio_notebook" / "labextension"
TUTORIALS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))

# views the extension must draw, by MIME type: (selector of the drawn view, what it must contain)
DRAWN = {
    "application/vnd.agio.run+json": ".jp-AgioRun .agio-run",
    "application/vnd.agio.diff+json": ".jp-AgioRun .agio-diff",
    "application/vnd.agio.tree+json": ".jp-AgioRun .agio-tree",
    "application/vnd.agio.batch+json": ".jp-AgioRun .agio-batch .agio-batch-counts",
    "application/vnd.agio.plan+json": ".jp-AgioRun .agio-plan",
    "application/vnd.agio.trace+json": ".jp-AgioRun .agio-trace-view svg .agio-graph-node",
    "application/vnd.agio.sweep+json": ".jp-AgioRun .agio-sweep .agio-sweep-variant",
}
RAW_REPR = re.compile(r"<agio (trace|plan|batch|sweep|diff|tree|memory)\b[^>]*>|<IPython\.core\.display\.\w+ object>|"
                      r"^SweepResult\(", re.M)
RUN_ON = re.compile(r"\d ms: \d+\d+\s*[–-]\s*\d")  # "108–172 ms: 24172–237 ms: 13": bins without separation
pytestmark = pytest.mark.timeout(2400)  # the fixture executes every tutorial first

BROKEN = ("No renderer", "could not be rendered", "Javascript Error", "Error displaying widget")

VIEWS_CELLS = [
    "%load_ext agio_notebook",
    """import asyncio
import agio_notebook as agio
from agio_notebook import Agent, FunctionModel, ScriptedModel
from agio_notebook.scheduling import Plan, PlanExecutor
from IPython.display import HTML, display

async def slow(messages, tools):
    await asyncio.sleep(0.2)
    return "ok"

slowpoke = Agent(model=FunctionModel(slow, name="slowpoke"), name="slowpoke")""",
    # a plan of three tasks, shown live then as its static bundle
    """plan = Plan(name='views-plan').add('draft', 'A').add('check', 'B').add('merge', 'C {draft} {check}',
                                                                        depends_on=['draft', 'check'])
ph = PlanExecutor(slowpoke).execute_plan(plan)
display(ph)  # live, then replaced by its bundle when the plan ends (within this cell)
ph.wait(); None""",
    # a batch cancelled after a few items: its saved summary must say so
    """import time
h = agio.batch(slowpoke, [f"q{i}" for i in range(40)], name="views-cancelled", concurrency=2)
while h.metrics()["completed"] < 3:
    time.sleep(0.05)
h.cancel(); h.wait()
h""",
    # an HTML table with two dollar amounts: text, never LaTeX
    "from agio_notebook.views import text_html\nHTML(text_html('<table><tr><td>$0.0012</td><td>$0.0034</td></tr></table>'))",
]


def execute_views(work: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in VIEWS_CELLS]
    saved = os.environ.get("AGIO_STORE")
    os.environ["AGIO_STORE"] = str(work / "store")
    try:
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, resources={"metadata": {"path": str(work)}}).execute()
    finally:
        if saved is None:
            os.environ.pop("AGIO_STORE", None)
        else:
            os.environ["AGIO_STORE"] = saved
    path = work / "views.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def lab(kernelspec_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("tutorials_lab")
    (root / "saved").mkdir()
    for name in TUTORIALS:
        shutil.copy(ROOT / "notebooks" / name, root / "saved" / name)
    # the tutorials executed now, through the script that refreshes their saved outputs
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "refresh_tutorials.py"), "--out", str(root / "executed")],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    views = execute_views(tmp_path_factory.mktemp("views"))
    shutil.copy(views, root / "executed" / "views.ipynb")
    for path in root.glob("*/*.ipynb"):  # no kernel starts: the learner has not run anything yet
        nb = json.loads(path.read_text())
        nb["metadata"]["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
        path.write_text(json.dumps(nb))
    data = root / "jupyter-data"  # a new notary database: nothing is trusted
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "agio-notebook").symlink_to(BUILD)
    env = {**{k: v for k, v in os.environ.items() if k not in ("JUPYTER_PATH", "JUPYTER_DATA_DIR")},
           "JUPYTER_PATH": str(data), "JUPYTER_DATA_DIR": str(data)}
    with running_lab(root, env, "--KernelSpecManager.allowed_kernelspecs=agio-absent") as served:
        yield served, root


def outputs_of(path: Path) -> list[dict]:
    return [o for c in json.loads(path.read_text())["cells"] for o in c.get("outputs", [])]


def shown_count(path: Path) -> int:
    """Outputs JupyterLab shows: consecutive stream outputs of one stream in a cell become one."""
    count = 0
    for cell in json.loads(path.read_text())["cells"]:
        last = None
        for o in cell.get("outputs", []):
            stream = o.get("name") if o["output_type"] == "stream" else None
            count += not (stream and stream == last)
            last = stream
    return count


def open_untrusted(page, base: str, token: str, rel: str, path: Path) -> list[str]:
    """Open ``rel`` (untrusted, no kernel) and wait for its outputs; console errors are collected."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    workspace = re.sub(r"[^a-z0-9]", "-", rel.lower())  # a workspace of its own: only this notebook is open
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{rel}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
    try:
        page.wait_for_function(f"document.querySelectorAll('.jp-OutputArea-output').length >= {shown_count(path)}",
                               timeout=60000)
    except Exception:  # noqa: BLE001 - reported by the caller as outputs not shown
        pass
    dialog = page.locator(".jp-Dialog")
    try:  # JupyterLab asks which kernel to use for the unknown one: keep none
        dialog.wait_for(timeout=20000)
        dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
        dialog.wait_for(state="detached", timeout=10000)
    except Exception:  # noqa: BLE001 - no dialog this time
        pass
    page.wait_for_timeout(500)  # the last renderers settle
    return errors


def check_notebook(page, base: str, token: str, rel: str, path: Path) -> list[str]:
    """Open ``rel`` untrusted; the problems a learner would see."""
    errors = open_untrusted(page, base, token, rel, path)
    outputs = outputs_of(path)
    problems = []
    shown = page.locator(".jp-OutputArea-output")
    if shown.count() != shown_count(path):
        problems.append(f"{shown.count()} outputs shown of {shown_count(path)} saved")
    for mime, selector in DRAWN.items():
        want = sum(mime in o.get("data", {}) for o in outputs)
        got = page.locator(selector).count() if want else 0
        if want and got < want:
            problems.append(f"{mime}: {got} of {want} drawn by the extension ({selector})")
    for text in shown.all_inner_texts():
        for pattern, what in ((RAW_REPR, "raw repr where a view is promised"), (RUN_ON, "run-on fallback text")):
            if match := pattern.search(text):
                problems.append(f"{what}: {match.group(0)!r}")
        problems += [f"{words!r}: {text[:120]!r}" for words in BROKEN if words in text]
    if page.locator(".jp-OutputArea-output mjx-container, .jp-OutputArea-output .MathJax").count():
        problems.append("an output was typeset as math")
    return problems + errors


@pytest.mark.parametrize("which", ["executed", "saved"])
def test_every_tutorial_renders_untrusted_and_unexecuted(lab, which):
    assert (BUILD / "static").is_dir(), "build the extension first (scripts/build_labextension.sh)"
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (scripts/setup.sh --browser installs it)"
    (base, token), root = lab
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    notebooks = sorted((root / which).glob("*.ipynb"))
    assert len(notebooks) >= len(TUTORIALS)
    found: dict[str, list[str]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for path in notebooks:
            page = browser.new_page(viewport={"width": 1300, "height": 1800})
            problems = check_notebook(page, base, token, f"{which}/{path.name}", path)
            if problems:
                found[path.name] = problems
            page.screenshot(path=str(out / f"tutorial-{which}-{path.stem}.png"), full_page=True)
            page.close()
        browser.close()
    assert not found, json.dumps(found, indent=1, ensure_ascii=False)


def test_views_say_what_their_data_says(lab):
    """The executed views, drawn by the extension: a cancelled batch, a plan, a trace, a sweep, dollars as text."""
    (base, token), root = lab
    out = ROOT / "test-output"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        views = root / "executed" / "views.ipynb"
        assert open_untrusted(page, base, token, "executed/views.ipynb", views) == []
        data = next(o["data"]["application/vnd.agio.batch+json"] for o in outputs_of(views)
                    if "application/vnd.agio.batch+json" in o.get("data", {}))
        assert data["status"] == "cancelled" and 3 <= data["completed"] < 40
        batch = page.locator(".jp-AgioRun .agio-batch").inner_text()
        assert f"cancelled · {data['completed']}/40 completed" in batch
        assert f"{data['cancelled']} cancelled" in batch and "completed/s" in batch and "cost unknown" in batch
        assert "40/40" not in batch and "items/s" not in batch
        assert page.locator(".jp-AgioRun .agio-batch-bar-cancelled").count() == 1
        plan = page.locator(".jp-AgioRun .agio-plan")
        assert plan.locator("svg .agio-task-completed").count() == 3 and plan.locator("svg path").count() == 2
        assert "draft" in plan.locator("svg").inner_html()
        dollars = page.locator(".jp-OutputArea-output").last
        assert "$0.0012" in dollars.inner_text() and "$0.0034" in dollars.inner_text()
        assert dollars.locator("mjx-container").count() == 0
        page.screenshot(path=str(out / "tutorial-views.png"), full_page=True)
        # the trace a tutorial promises as a drawing: a box per step
        feedback = root / "executed" / "learn_from_feedback.ipynb"
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        assert open_untrusted(page, base, token, "executed/learn_from_feedback.ipynb", feedback) == []
        trace = next(o["data"]["application/vnd.agio.trace+json"] for o in outputs_of(feedback)
                     if "application/vnd.agio.trace+json" in o.get("data", {}))
        drawn = page.locator(".jp-AgioRun .agio-trace-view svg")
        assert drawn.locator(".agio-graph-node").count() == len(trace["nodes"]) >= 3
        assert drawn.locator(".agio-graph-edge").count() == len(trace["edges"])
        assert "memory" in drawn.inner_html()
        # the system of agents: nested runs drawn in boxes named after their agents, steps named by agent
        compose = root / "executed" / "compose_agents.ipynb"
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        assert open_untrusted(page, base, token, "executed/compose_agents.ipynb", compose) == []
        graph = page.locator(".jp-AgioRun .agio-trace-view svg").first
        boxes = graph.locator(".agio-graph-cluster text").all_text_contents()  # SVG text: no innerText
        assert boxes.count("agent researcher") == 2 and boxes.count("agent writer") == 1, boxes
        labels = " | ".join(graph.locator(".agio-graph-node text").all_text_contents())
        assert "desk: calls transfer_to_planner" in labels and "planner: calls researcher" in labels, labels
        assert " model: " not in labels
        # the sweep: each column names its interval, dollar amounts are text
        sweep_nb = root / "executed" / "compare_and_choose.ipynb"
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        assert open_untrusted(page, base, token, "executed/compare_and_choose.ipynb", sweep_nb) == []
        sweep = page.locator(".jp-AgioRun .agio-sweep")
        assert sweep.locator(".agio-sweep-variant").count() == 4
        head = sweep.locator("tr").first.inner_text()
        assert "95% Wilson" in head and "95% bootstrap" in head and "Student" not in head
        assert "$0.0" in sweep.inner_text() and sweep.locator("mjx-container").count() == 0
        page.screenshot(path=str(out / "tutorial-sweep.png"), full_page=True)
        browser.close()
