"""%agio exercise in a real JupyterLab (Debian's chromium): the instructions show, the starter cell appears
below the magic's cell, and running it shows the check's table with the failing runs' transcripts."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output
from playwright.sync_api import Page, expect, sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"
LONG = 90_000  # ms: generous, the machine is shared


def sources(page: Page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(
        c => c.querySelector('.cm-content') ? c.querySelector('.cm-content').innerText : '')""")


def test_exercise_inserts_its_starter_below_and_the_starter_checks(lab_env):
    root, env = lab_env
    spec = {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}
    nb = new_notebook(cells=[new_code_cell("%load_ext agio_notebook"), new_code_cell("%agio exercise tool_errors"),
                             new_code_cell("print('last')")], metadata={"kernelspec": spec})
    nbformat.write(nb, root / "exercise.ipynb")
    # a notebook saved elsewhere (not signed here, so untrusted) whose output is a failing check's table
    from agio_notebook import Reply
    from agio_notebook.exercises import check, exercise

    def never_stops(messages, tools):
        return Reply.call("search", page=sum(m["role"] == "tool" for m in messages) + 1)

    failed = check(exercise("stopping_rule"), never_stops, seed=5, record=False)
    saved = new_code_cell("check(exercise('stopping_rule'), searcher)", execution_count=1, outputs=[new_output(
        "execute_result", {"text/html": failed._repr_html_(), "text/plain": failed.summary()}, execution_count=1)])
    nbformat.write(new_notebook(cells=[saved], metadata={"kernelspec": spec}), root / "saved.ipynb")
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw, running_lab(root, env) as (base, token):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            open_with_kernel(page, base, token, "exercise.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
            page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=LONG)
            run_all(page)
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 4", timeout=LONG)
            page.wait_for_function("document.body.innerText.includes('last')", timeout=LONG)
            src = sources(page)
            assert len(src) == 4 and src[0] == "%load_ext agio_notebook" and src[1] == "%agio exercise tool_errors"
            assert 'check(exercise("tool_errors"), city_weather)' in src[2]  # right below the magic's cell
            assert src[3] == "print('last')"
            # the cell's prompt may be drawn before its output: wait for the output itself
            expect(page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")).to_contain_text(
                "Make a tool's errors help the model recover", timeout=LONG)

            starter = page.locator(".jp-Notebook .jp-Cell").nth(2)
            starter.locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
            starter.locator(".agio-exercise").wait_for(timeout=LONG)
            table = starter.locator(".agio-exercise")
            assert "3 of 4 scenarios failed" in table.inner_text() and "(seed " in table.inner_text()
            assert table.locator('tr[data-passed="false"]').count() == 3
            assert table.locator("details[open] .agio-run").count() == 1  # the first failing run's, open
            assert table.locator("details .agio-run").count() == 3  # the others a click away
            assert "gives it nothing to correct the spelling with" in table.inner_text()
            assert "(unseen variant)" in table.inner_text()
            page.screenshot(path=str(OUT / "exercise-starter.png"), full_page=True)

            # reopened untrusted: the sanitised table still shows each scenario, why, and the transcripts
            page.goto(f"{base}/lab/tree/saved.ipynb?token={token}")
            output = page.locator(".jp-Cell", has_text="searcher)").locator(".jp-OutputArea")
            table = output.locator("table")
            table.wait_for(timeout=LONG)
            text = output.inner_text()
            assert "exercise stopping_rule (seed 5): 3 of 3 scenarios failed" in text
            assert "your model never stopped" in text and "give up after 3 pages" in text
            assert table.locator("summary", has_text="transcript of").count() == 3
            assert table.locator("details[open]").count() == 1  # one failing run's transcript shown, open
            page.screenshot(path=str(OUT / "exercise-saved-untrusted.png"), full_page=True)
        finally:
            browser.close()
