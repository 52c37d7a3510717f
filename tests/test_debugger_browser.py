"""Step mode in a real JupyterLab (Debian's chromium): step through a run with a tool, edit a message and
a tool's arguments in the pause view, go on with a click and with a key, check the transcript and the
stored steps; then reopen the saved notebook (new server, no kernel run) and see the pauses and edits.
Also measures pause-to-view and click-to-resume (reported by bench/debugger_bench.py)."""

from __future__ import annotations

import json
import re
import os
import time
from pathlib import Path

import nbformat
from playwright.sync_api import sync_playwright

from agio_notebook.storage import open_repository
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, loaded_extension_entry, run_all, running_lab, source_extension_entry
from test_transcript_controls_browser import LONG, MIME, WIDGET, kernel_notebook, save_and_read

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"

CELLS = [
    "%load_ext agio_notebook",
    '''from agio_notebook import Agent, ScriptedModel, Reply, tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

adder = Agent(model=ScriptedModel([Reply.call("add", a=2, b=3), "the sum is ready"]), tools=[add], name="adder")''',
    "%%agio adder --new-session --step\nWhat is 2 + 3?",
]

# in the page: when each pause view's title was first painted (Element Timing), after the kernel paused,
# and after the kernel made the view (the title carries both times; the view of a pause made before
# the extension's answer to the kernel's hello was heard is made once it is)
WATCH_PAUSES = """() => {
  window.__pauseToView = [];
  window.__madeToView = [];
  new PerformanceObserver(list => {
    for (const entry of list.getEntries()) {
      if (entry.identifier === 'agio-pause' && entry.element) {
        const painted = performance.timeOrigin + (entry.renderTime || entry.loadTime);
        window.__pauseToView.push(painted - Number(entry.element.dataset.agioPausedAt));
        window.__madeToView.push(painted - Number(entry.element.dataset.agioMadeAt));
      }
    }
  }).observe({ type: 'element', buffered: true });
}"""

# clicks a pause view's Continue and measures the time until that view is gone
RESUME = """async ([kind]) => {
  const view = document.querySelector('.agio-pause.agio-pause-' + kind);
  const t0 = performance.now();
  view.querySelector('.agio-pause-continue').click();
  while (performance.now() - t0 < 60000) {
    if (!view.isConnected) return performance.now() - t0;
    await new Promise(r => requestAnimationFrame(r));
  }
  return -1;
}"""


# measures from the key press (seen first, in the capture phase) until the pause view is gone
TIME_KEY = """(kind) => {
  const view = document.querySelector('.agio-pause.agio-pause-' + kind);
  window.__keyToResume = null;
  let t0 = null;
  document.addEventListener('keydown', () => { t0 = performance.now(); }, { capture: true, once: true });
  const poll = () => {
    if (t0 !== null && !view.isConnected) { window.__keyToResume = performance.now() - t0; return; }
    requestAnimationFrame(poll);
  };
  poll();
}"""


def type_json(page, selector: str, value) -> None:
    box = page.locator(f".agio-pause {selector} textarea")
    box.fill(json.dumps(value))
    box.press("Tab")  # leave the editor: the value is synced, and keys go to the view again


def test_step_edit_continue_then_reopen_the_saved_notebook(lab_env):
    root, env = lab_env
    path = root / "step.ipynb"
    nbformat.write(kernel_notebook(CELLS), path)
    OUT.mkdir(exist_ok=True)
    resume_ms: list[float] = []
    with sync_playwright() as pw:
        with running_lab(root, env) as (base, token):
            assert loaded_extension_entry(base, token) == source_extension_entry()
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            open_with_kernel(page, base, token, "step.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
            page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=LONG)
            page.evaluate(WATCH_PAUSES)
            run_all(page, agio_cells=1)

            # 1. before the model call: the request laid out; edit the user's message
            page.wait_for_selector(".agio-pause.agio-pause-model", timeout=LONG)
            # once painted, the view takes the focus, so its keys work without a click
            page.wait_for_function("document.activeElement?.matches('.agio-pause-model .agio-pause-continue')",
                                   timeout=LONG)
            request = page.locator(".agio-pause-model .agio-pause-request")
            assert "What is 2 + 3?" in request.inner_text() and "tokens" in request.inner_text()
            assert "add" in page.locator(".agio-pause-model").inner_text()
            # the extension answered the kernel's hello: the view is its one-model widget, not ipywidgets
            assert page.locator(".agio-pause-model.agio-pause-frame").count() == 1
            assert page.locator(".agio-pause-model .widget-button").count() == 4
            page.screenshot(path=str(OUT / "debugger-paused-model.png"), full_page=True)
            type_json(page, ".agio-pause-edit-messages", [{"role": "user", "content": "What is 20 + 30?"}])
            resume_ms.append(page.evaluate(RESUME, ["model"]))

            # 2. before the tool call: arguments failing the schema are one line; then good ones
            page.wait_for_selector(".agio-pause.agio-pause-tool", timeout=LONG)
            # the tool has not run: its card says paused (not running), and Edit says what it does
            page.wait_for_selector(".agio-tool-card.agio-tool-paused", timeout=LONG)
            assert page.locator(".agio-tool-card.agio-tool-running").count() == 0
            assert page.locator(".agio-pause-tool .agio-pause-edit").inner_text().strip() == "Apply edits"
            type_json(page, ".agio-pause-edit-arguments", {"a": "two", "b": 3})
            page.locator(".agio-pause-tool .agio-pause-edit").click()
            page.wait_for_function("[...document.querySelectorAll('.agio-pause-note')]"
                                   ".some(n => n.textContent.startsWith('add rejects these arguments'))", timeout=LONG)
            type_json(page, ".agio-pause-edit-arguments", {"a": 20, "b": 30})
            # someone types in a cell meanwhile: the next pause must not take their keys
            page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content").click()
            resume_ms.append(page.evaluate(RESUME, ["tool"]))

            # 3. before the second model call: go on with the key
            page.wait_for_selector(".agio-pause.agio-pause-model", timeout=LONG)
            page.wait_for_function("window.__pauseToView.length >= 3", timeout=LONG)  # painted
            # the view decides about the focus once painted (debugger.ts, afterPainted): wait for that
            page.wait_for_selector(".agio-pause-model[data-agio-focus]", state="attached", timeout=LONG)
            assert page.locator(".agio-pause-model").get_attribute("data-agio-focus") == "left"
            assert page.evaluate("!!document.activeElement.closest('.cm-editor')"), "the pause took the editor's focus"
            # with focus in the view (here on its Step button), a real key press reaches it: `c` continues
            page.locator(".agio-pause-model .agio-pause-step").focus()
            page.evaluate(TIME_KEY, "model")
            page.keyboard.press("c")
            page.wait_for_function("window.__keyToResume !== null", timeout=LONG)
            resume_ms.append(page.evaluate("window.__keyToResume"))

            page.wait_for_function("""() => { const r = document.querySelector('.jp-AgioRun .agio-run');
                return r && r.querySelector('.agio-status').textContent === 'completed'; }""", timeout=LONG)
            run = page.locator(".jp-AgioRun .agio-run").first
            check_transcript(run)
            run.locator("details.agio-seen").first.locator("summary").click()
            page.screenshot(path=str(OUT / "debugger-transcript.png"), full_page=True)
            pause_to_view = page.evaluate("window.__pauseToView")
            made_to_view = page.evaluate("window.__madeToView")
            assert page.get_by_text("Error displaying widget").count() == 0

            # the stored steps keep what was proposed and what was sent
            run_id = run.get_attribute("data-agio-run")
            repo = open_repository(str(root / "store"))
            stored = repo.get_run(run_id)
            steps = repo.get_steps(stored.session_id)
            assert [s.role.value for s in steps] == ["user", "assistant", "tool", "assistant"]
            assert steps[1].extra["request"]["edited"]["fields"] == ["messages"]
            assert steps[1].extra["request"]["messages"]["inline"][-1]["content"] == "What is 20 + 30?"
            assert steps[2].content.startswith("50")
            assert steps[2].extra["edited"]["arguments"] == {"proposed": '{"a": 2, "b": 3}', "sent": '{"a": 20, "b": 30}'}
            assert stored.metrics.paused_ms > 0

            page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-InputPrompt").click()
            nb = save_and_read(page, path, lambda nb: any(MIME in o.get("data", {}) for o in nb.cells[2].get("outputs", [])))
            assert all(WIDGET not in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
            browser.close()

        # reopened with a new server; no cell is run
        with running_lab(root, env) as (base, token):
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            page.goto(f"{base}/lab/tree/step.ipynb?token={token}")
            page.wait_for_selector(".jp-AgioRun .agio-run", timeout=LONG)
            check_transcript(page.locator(".jp-AgioRun .agio-run").first)
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(OUT / "debugger-reopened.png"), full_page=True)
            # run again, in this server's fresh kernel: the extension answers its hello there too
            run_all(page, agio_cells=1)
            page.wait_for_selector(".agio-pause-model.agio-pause-frame", timeout=LONG)
            page.locator(".agio-pause-model .agio-pause-abort").click()
            page.wait_for_function("""() => { const r = document.querySelector('.jp-AgioRun .agio-run');
                return r && r.querySelector('.agio-status').textContent === 'cancelled'; }""", timeout=LONG)
            browser.close()

    record_timings(pause_to_view, made_to_view, resume_ms)
    print(f"pause to view: {pause_to_view} ms (view made to view: {made_to_view} ms); click to resume: {resume_ms} ms")
    assert len(pause_to_view) == 3 and all(ms > 0 for ms in resume_ms)


def record_timings(pause_to_view: list[float], made_to_view: list[float], resume_ms: list[float],
                   keep: int = 20) -> None:
    """Add this run's times to test-output/debugger_timings.json (the last ``keep`` runs), which
    bench/debugger_bench.py reports, with the machine's load and the extension build measured."""
    path = OUT / "debugger_timings.json"
    try:
        runs = json.loads(path.read_text()).get("runs", [])
    except (OSError, ValueError, AttributeError):
        runs = []
    runs.append({"pause_to_view_ms": pause_to_view, "made_to_view_ms": made_to_view, "click_to_resume_ms": resume_ms,
                 "measured_at": time.time(), "load_1m": os.getloadavg()[0], "extension": source_extension_entry(),
                 "view": "painted"})  # pause to view: until the title was painted (earlier runs: inserted)
    path.write_text(json.dumps({"runs": runs[-keep:]}))


def check_transcript(run) -> None:
    """The pauses, the edits and What the model saw, as the extension draws them."""
    marks = run.locator(".agio-pause-mark").all_inner_texts()
    assert len(marks) == 3, marks
    assert marks[0].strip().startswith("paused before the model call (step 2) → continue") and "edited messages" in marks[0]
    assert marks[1].strip().startswith("paused before tool call add (step 3) → continue") and "edited arguments" in marks[1]
    # the pause sign is drawn like the other icons (an SVG), never a character an emoji font must supply
    assert run.locator(".agio-pause-mark svg.agio-icon-pause").count() == 3 and "\u23f8" not in "".join(marks)
    assert all(re.search(r", \d+\.\d s", m) for m in marks[:2]), marks  # paused time in seconds, as the footer
    assert run.locator(".agio-edited").count() == 2
    assert run.locator(".agio-edited-args").inner_text() == '{"a": 20, "b": 30}'
    seen = run.locator("details.agio-seen")
    assert seen.count() == 2
    first = seen.first
    assert "1 message ·" in first.locator("summary").inner_text()
    assert first.locator(".agio-seen-text").first.text_content() == "What is 20 + 30?"
    assert first.locator(".agio-seen-edited").count() == 1
    assert seen.nth(1).locator(".agio-seen-step").all_text_contents() == ["#1", "#2", "#3"]
