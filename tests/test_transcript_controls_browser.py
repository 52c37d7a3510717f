"""Retry, Fork and attempt selection from a run's output in a real JupyterLab (Debian's chromium):
each click inserts and runs one cell with the equivalent %agio command, live and after the notebook
is saved, the server restarted and the notebook reopened with a kernel. No widget is left behind.
Also: %%agio cells get Markdown highlighting, not Python's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import Page, sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, loaded_extension_entry, run_all, running_lab, source_extension_entry

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"
MIME = "application/vnd.agio.run+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
LONG = 90_000  # ms: generous, the machine is shared

CELLS = [
    "%load_ext agio_notebook",
    '''from agio_notebook import Agent, FunctionModel
answers = iter(range(1, 1000))

def counting(messages, tools):
    return f"answer {next(answers)}"

helper = Agent(model=FunctionModel(counting), name="helper")''',
    "%%agio helper --new-session\nWhat's 2 + 2?",
]


def kernel_notebook(cells: list[str]):
    spec = {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}
    return new_notebook(cells=[new_code_cell(c) for c in cells], metadata={"kernelspec": spec})


@pytest.fixture
def lab_env(kernelspec_dir, tmp_path):
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    return tmp_path, env


def sources(page: Page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(
        c => c.querySelector('.cm-content') ? c.querySelector('.cm-content').innerText : '')""")


def cell(page: Page, i: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(i)


def wait_cells(page: Page, n: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length >= {n}", timeout=LONG)


def wait_output(page: Page, i: int, text: str) -> None:
    page.wait_for_function(
        """([i, text]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                           return c && c.querySelector('.jp-OutputArea') &&
                                  c.querySelector('.jp-OutputArea').innerText.includes(text); }""",
        arg=[i, text], timeout=LONG)


def wait_transcript(page: Page, i: int, kind: str) -> None:
    page.wait_for_function(
        """([i, kind]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                           const r = c && c.querySelector('.jp-AgioRun .agio-run');
                           return r && r.querySelector('.agio-header b').textContent === kind &&
                                  r.querySelector('.agio-status').textContent === 'completed' &&
                                  r.querySelector('.agio-controls') !== null; }""",
        arg=[i, kind], timeout=LONG)


def save_and_read(page: Page, path: Path, ready) -> nbformat.NotebookNode:
    """Save from the browser (Ctrl+S) and wait until the file on disk holds what ``ready`` expects."""
    page.keyboard.press("Control+s")
    deadline = time.time() + LONG / 1000
    while time.time() < deadline:
        try:
            nb = nbformat.read(path, as_version=4)
            if ready(nb):
                return nb
        except (OSError, ValueError):
            pass
        page.wait_for_timeout(300)
    raise AssertionError("the notebook was not saved with the expected cells")


def out_text(c) -> str:
    return json.dumps(c.get("outputs", []))


def no_widgets(nb) -> bool:
    return all(WIDGET not in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def open_notebook(pw, base, token, name):
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{base}/lab/tree/{name}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
    # the kernel has started and is idle (the status bar says so): keys and clicks now reach it
    page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=LONG)
    return browser, page, errors


def test_controls_insert_and_run_one_cell_live_and_after_reopening(lab_env):
    root, env = lab_env
    path = root / "controls.ipynb"
    nbformat.write(kernel_notebook(CELLS), path)
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        # -- live -------------------------------------------------------------------------------------------
        with running_lab(root, env) as (base, token):
            assert loaded_extension_entry(base, token) == source_extension_entry()
            browser, page, _ = open_notebook(pw, base, token, "controls.ipynb")
            run_all(page)
            wait_transcript(page, 2, "agio Run")
            first = cell(page, 2).locator(".agio-run")
            run_id, session_id = first.get_attribute("data-agio-run"), None
            assert first.locator(".agio-step-picker").input_value() == "2"  # the answer is preselected
            assert page.get_by_text("Error displaying widget").count() == 0

            first.locator("button.agio-retry").click()
            wait_cells(page, 4)
            assert sources(page)[3] == f"%agio retry {run_id} --from-seq 2"
            wait_transcript(page, 3, "agio Retry")
            retry = cell(page, 3).locator(".agio-run")
            assert "answer 2" in retry.inner_text()
            retry_id = retry.get_attribute("data-agio-run")

            first.locator("button.agio-fork").click()  # one click: one cell, right below the run
            wait_cells(page, 5)
            src = sources(page)
            assert src[3].startswith("%agio fork ") and src[3].endswith(" --at 2")
            session_id = src[3].split()[2]
            wait_output(page, 3, "forked into session")
            assert sum(s.startswith("%agio fork") for s in sources(page)) == 1
            assert cell(page, 3).locator(".jp-OutputArea").inner_text().count("forked into session") == 1

            # the retry's transcript offers its attempts; pick the first one again
            picker = cell(page, 4).locator(".agio-attempt-picker")
            assert picker.locator("option").all_inner_texts() == ["attempt 1 · completed",
                                                                   "attempt 2 · completed · current"]
            picker.select_option("1")
            cell(page, 4).locator("button.agio-use-attempt").click()
            wait_cells(page, 6)
            assert sources(page)[5] == f"%agio use-attempt {retry_id} 1"
            wait_output(page, 5, "attempt 1")
            assert "is current" in cell(page, 5).locator(".jp-OutputArea").inner_text()
            page.screenshot(path=str(OUT / "controls-live.png"), full_page=True)

            def saved_live(nb):
                src = [c.source for c in nb.cells]
                return (len(src) == 6 and src[5].startswith("%agio use-attempt")
                        and all(c.get("outputs") for c in nb.cells[2:]))

            cell(page, 5).locator(".jp-InputPrompt").click()
            nb = save_and_read(page, path, saved_live)
            assert MIME in out_text(nb.cells[4]) and "forked into session" in out_text(nb.cells[3])
            assert no_widgets(nb), "a widget was saved in an output"
            browser.close()

        # -- the server restarted, the notebook reopened with a new kernel ----------------------------------
        with running_lab(root, env) as (base, token):
            browser, page, errors = open_notebook(pw, base, token, "controls.ipynb")
            page.wait_for_function("document.querySelectorAll('.jp-AgioRun .agio-run .agio-controls').length >= 2",
                                   timeout=LONG)
            # the kernel needs agio loaded (and the agent): run the two setup cells
            cell(page, 0).locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
            page.keyboard.press("Shift+Enter")
            page.wait_for_function(
                "document.querySelectorAll('.jp-Notebook .jp-Cell')[1].querySelector('.jp-InputPrompt')"
                ".innerText.includes('[2]')", timeout=LONG)
            first = cell(page, 2).locator(".agio-run")
            first.locator("button.agio-retry").click()
            wait_cells(page, 7)
            assert sources(page)[3] == f"%agio retry {run_id} --from-seq 2"
            wait_transcript(page, 3, "agio Retry")
            # the new kernel's agent of the same name ran it (its counter starts again), not the default agent
            assert "answer 1" in cell(page, 3).locator(".agio-run").inner_text()
            first.locator("button.agio-fork").click()
            wait_cells(page, 8)
            assert sources(page)[3] == f"%agio fork {session_id} --at 2"
            wait_output(page, 3, "forked into session")
            assert sum(s.startswith("%agio fork") for s in sources(page)) == 2
            page.screenshot(path=str(OUT / "controls-reopened.png"), full_page=True)
            assert page.get_by_text("Error displaying widget").count() == 0
            assert not [e for e in errors if "model not found" in e.lower()], errors

            def saved_again(nb):
                src = [c.source for c in nb.cells]
                return len(src) == 8 and src[3].startswith("%agio fork") and all(c.get("outputs") for c in nb.cells[2:])

            cell(page, 3).locator(".jp-InputPrompt").click()
            nb = save_and_read(page, path, saved_again)
            assert "forked into session" in out_text(nb.cells[3]) and MIME in out_text(nb.cells[4])
            retried = [o["data"][MIME] for o in nb.cells[4].outputs if MIME in o.get("data", {})]
            assert retried and retried[-1]["run"]["status"] == "completed" and retried[-1]["run"]["kind"] == "retry"
            assert no_widgets(nb)
            browser.close()


def test_agio_cells_are_highlighted_as_markdown(lab_env):
    root, env = lab_env
    nbformat.write(kernel_notebook(["%%agio\nWhat's the weather in {city}?", "x = 'it' + 's'"]),
                   root / "highlight.ipynb")
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw, running_lab(root, env) as (base, token):
        assert loaded_extension_entry(base, token) == source_extension_entry()
        browser, page, _ = open_notebook(pw, base, token, "highlight.ipynb")
        # run the Python cell: the kernel's language info arrives and resets every cell's mode; ours stays
        cell(page, 1).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[1]"
                               ".querySelector('.jp-InputPrompt').innerText.includes('[1]')", timeout=LONG)
        colors = """([i, needle]) => {
            const line = [...document.querySelectorAll('.jp-Notebook .jp-Cell')[i].querySelectorAll('.cm-line')]
                .find(l => l.textContent.includes(needle));
            return line ? [...line.querySelectorAll('span')]
                .map(s => [s.textContent, getComputedStyle(s).color]) : null;
        }"""
        page.wait_for_function(f"({colors})([1, \"'it'\"]).some(([t]) => t === \"'it'\")", timeout=LONG)
        string_color = next(c for t, c in page.evaluate(colors, [1, "'it'"]) if t == "'it'")
        assert cell(page, 0).get_attribute("data-agio-highlight") == "text/x-markdown"
        assert cell(page, 1).get_attribute("data-agio-highlight") is None
        spans = page.evaluate(colors, [0, "What's"])
        assert spans is not None and all(c != string_color for _, c in spans), spans
        # typed into a new cell, the mode follows the text
        page.keyboard.press("Escape")
        page.keyboard.press("b")
        wait_cells(page, 3)
        cell(page, 2).locator(".cm-content").click()
        page.keyboard.type("%%agio\nIt's typed here")
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[2]"
                               ".getAttribute('data-agio-highlight') === 'text/x-markdown'", timeout=LONG)
        spans = page.evaluate(colors, [2, "It's"])
        assert spans is not None and all(c != string_color for _, c in spans), spans
        page.screenshot(path=str(OUT / "agio-cell-highlighting.png"))
        browser.close()
