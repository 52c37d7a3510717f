"""Every tutorial done as a learner does it, in a real JupyterLab (Debian's chromium) with a real kernel:
Run All, then every control under every transcript clicked (Retry from step, Fork at step, both feedback
buttons, then Use attempt once a retry made one), then the exercise done wrongly and then rightly.

Each click must work on the first try: its cell is inserted and runs without an error, a retry ends with a
transcript, and nothing else in the notebook breaks. The exercise's table must say why the wrong answer fails
and pass the right one (written differently from the reference). The quickstart is then restarted and run
again from the top with the inserted cells in it: the cells that read ``_`` below a run still work.

One JupyterLab and one browser for the module; a page per tutorial; waits on conditions, never on time.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Page, sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, KERNEL_IDLE, close_session, open_with_kernel, run_all, running_lab
from tutorial_answers import RIGHT, WRONG

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"
TUTORIALS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb") if p.stem != "course")
LONG = 180_000  # ms: a whole tutorial on a loaded machine
WITHOUT_TRANSCRIPTS = ("did_my_change_help", "evaluate_a_prompt")  # their runs are batches and evaluations: tables
pytestmark = pytest.mark.timeout(900)

# every code cell has run: a number in its prompt, none waiting ([*]) or never run ([ ])
ALL_DONE = """(n) => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
    .map(p => p.textContent || '');
  return prompts.length >= n && prompts.every(p => /\\[\\d+\\]/.test(p));
}"""
# what went wrong in the notebook: error outputs and stderr that says Error or Traceback
ERRORS = """() => [...document.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
  .map(o => o.innerText).filter(t => /Error|Traceback/.test(t)).map(t => t.slice(0, 600))"""
# the transcripts of runs the notebook made, at the top of an output (not nested, not inside an exercise's table)
RUN_IDS = """() => [...document.querySelectorAll('.jp-AgioRun > .agio-run')]
  .filter(r => r.querySelector(':scope > .agio-controls')).map(r => r.dataset.agioRun)"""


@pytest.fixture(scope="module")
def lab(kernelspec_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("learner_lab")
    for name in TUTORIALS:
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}
        nbformat.write(nb, root / f"{name}.ipynb")
    env = {**os.environ, "AGIO_STORE": str(root / ".agio")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    OUT.mkdir(exist_ok=True)
    with running_lab(root, env) as served, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield served, root, browser
        browser.close()


def code_cells(page: Page) -> int:
    return page.locator(".jp-Notebook .jp-CodeCell").count()


def wait_done(page: Page, cells: int) -> None:
    page.wait_for_function(ALL_DONE, arg=cells, timeout=LONG)


def no_errors(page: Page, when: str) -> None:
    found = page.evaluate(ERRORS)
    assert not found, f"{when}: " + " | ".join(found)


def run(page: Page, run_id: str):
    return page.locator(f'.jp-AgioRun > .agio-run[data-agio-run="{run_id}"]').first


def click_every_control(page: Page, name: str) -> None:
    """Retry, Fork and both feedback buttons under every transcript Run All left, at once (the cells queue in
    click order); then Use attempt under each transcript a retry gave a second attempt."""
    cells = code_cells(page)
    run_ids = page.evaluate(RUN_IDS)
    assert run_ids or name in WITHOUT_TRANSCRIPTS, "no transcript with controls"
    clicks = 0
    for run_id in run_ids:
        for button in ("button.agio-retry", "button.agio-fork", "button.agio-thumb-up", "button.agio-thumb-down"):
            found = run(page, run_id).locator(f":scope > .agio-controls {button}, :scope > .agio-feedback {button}")
            if found.count():
                found.first.click()
                clicks += 1
                page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= n",
                                       arg=cells + clicks, timeout=LONG)
    wait_done(page, cells + clicks)
    no_errors(page, f"{name}: after Retry, Fork and feedback")
    retries = page.locator(".jp-AgioRun > .agio-run").filter(
        has=page.locator(":scope > .agio-header b", has_text="agio Retry"))
    statuses = retries.locator(":scope > .agio-header .agio-status").all_inner_texts()
    assert all(s in ("completed", "max_steps") for s in statuses), statuses
    used = 0
    for run_id in run_ids:
        use = run(page, run_id).locator(":scope > .agio-controls button.agio-use-attempt")
        if use.count():
            use.first.click()
            used += 1
            page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= n",
                                   arg=cells + clicks + used, timeout=LONG)
    wait_done(page, cells + clicks + used)
    no_errors(page, f"{name}: after Use attempt")
    text = page.locator(".jp-Notebook").inner_text()
    assert "already loaded" not in text and "ran out of replies" not in text


def answer(page: Page, code: str) -> str:
    """Replace the exercise's cell (the last code cell) with ``code``, run it, and return its table's rows'
    pass marks once they are shown."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").last
    before = cell.locator(".jp-InputArea-prompt").inner_text()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code.strip())
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        """([before]) => { const cells = document.querySelectorAll('.jp-Notebook .jp-CodeCell');
             const cell = cells[cells.length - 1];
             const prompt = cell.querySelector('.jp-InputArea-prompt').textContent;
             return prompt !== before && /\\[\\d+\\]/.test(prompt) && cell.querySelector('.agio-exercise'); }""",
        arg=[before], timeout=LONG)
    return cell.locator(".jp-OutputArea").inner_text()


@pytest.mark.parametrize("name", TUTORIALS)
def test_a_learner_runs_the_tutorial_clicks_every_control_and_does_the_exercise(lab, name):
    (base, token), root, browser = lab
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    session = open_with_kernel(page, base, token, f"{name}.ipynb", workspace=f"learner-{name}")
    try:
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=LONG)
        page.wait_for_function(KERNEL_IDLE, timeout=LONG)
        code = [c.source for c in nbformat.read(root / f"{name}.ipynb", as_version=4).cells if c.cell_type == "code"]
        page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= n",
                               arg=len(code), timeout=LONG)  # a loaded machine draws the cells one by one
        cells = code_cells(page)
        assert cells == len(code)
        run_all(page, agio_cells=sum(c.startswith("%%agio") for c in code), timeout=LONG)
        wait_done(page, cells)
        no_errors(page, f"{name}: Run All")
        click_every_control(page, name)
        exercise = re.search(r'check\(exercise\("(\w+)"\)', code[-1]).group(1)
        wrong, because = WRONG[exercise]
        table = answer(page, wrong)
        assert cell_marks(page) and not all(cell_marks(page)), table
        assert because.lower() in table.lower(), table
        table = answer(page, RIGHT[exercise])
        assert cell_marks(page) and all(cell_marks(page)), table
        no_errors(page, f"{name}: the exercise")
        if name == "quickstart":
            restart_and_run_all(page)
        assert not errors, errors
    finally:
        page.screenshot(path=str(OUT / f"learner-{name}.png"), full_page=True)
        page.close()
        close_session(base, token, session)


def cell_marks(page: Page) -> list[bool]:
    """Each row of the last exercise table: passed or not (a long table folds its passed rows into one)."""
    table = page.locator(".jp-Notebook .jp-CodeCell").last
    rows = table.locator(".agio-exercise-row")
    folded = table.locator(".agio-exercise-passing").count()
    return [r == "true" for r in rows.evaluate_all("rs => rs.map(r => r.dataset.passed)")] + [True] * folded


def restart_and_run_all(page: Page) -> None:
    """Kernel > Restart Kernel and Run All Cells, with every inserted cell in place: the cells below a run
    that read ``_`` still get that run's handle, and the inserted commands run again in click order."""
    cells = code_cells(page)
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel and Run All Cells…").first.click()
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    # done when every cell ran once since the restart: the counts are 1..n again
    page.wait_for_function("""(n) => { const counts = [...document.querySelectorAll(
        '.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')].map(p => (/\\[(\\d+)\\]/.exec(p.textContent) || [])[1]);
        return counts.length === n && counts.every(c => c) && Math.max(...counts.map(Number)) === n; }""",
                           arg=cells, timeout=LONG)
    no_errors(page, "quickstart: restarted and run again with the inserted cells")
    outputs = page.locator(".jp-Notebook .jp-CodeCell").filter(has_text="forecast = _")
    assert "Paris: light rain, 14 °C. Tokyo: clear, 21 °C." in outputs.first.locator(".jp-OutputArea").inner_text()
