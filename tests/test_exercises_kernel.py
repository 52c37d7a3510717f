"""%agio exercise in a real kernel: the instructions, a starter cell inserted below, hints and the reference
on request, the list of what is done; a hanging solution checked from a cell; the graders' call."""

from __future__ import annotations

import time

import pytest

from kernel_support import of_type, offline_kernel, stream_text


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "exercises_kernel", "%load_ext agio_notebook")
    yield k
    k.close()


def _payloads(res):
    return res["reply"]["content"].get("payload") or []


def test_exercise_shows_instructions_and_inserts_the_starter_below(kernel):
    res = kernel.execute("%agio exercise tool_errors")
    assert res["reply"]["content"]["status"] == "ok"
    shown = of_type(res["messages"], "execute_result")[0]["content"]["data"]
    assert "Make a tool's errors help the model recover" in shown["text/markdown"]
    assert "check(exercise('tool_errors'), solution)" in shown["text/markdown"]
    assert "What the model here reads" in shown["text/markdown"]
    inserted = [p for p in _payloads(res) if p["source"] == "set_next_input"]
    assert len(inserted) == 1 and inserted[0]["replace"] is False
    starter = inserted[0]["text"]
    assert 'check(exercise("tool_errors"), city_weather)' in starter
    assert "I know" not in starter  # the starter is unsolved; the reference is not in it
    # the starter runs as inserted, and its check fails with a reason (the learner has work to do)
    res = kernel.execute(starter, timeout=120)
    assert res["reply"]["content"]["status"] == "ok"
    html = of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/html"]
    assert "3 of 4 scenarios failed" in html and "gives it nothing to correct the spelling with" in html
    assert "agio-run" in html and html.count("<details open>") == 1  # one failing run's transcript, open


def test_hints_come_one_at_a_time_then_the_reference(kernel):
    texts = [of_type(kernel.execute("%agio exercise stopping_rule --hint")["messages"], "execute_result")[0]
             ["content"]["data"]["text/markdown"] for _ in range(4)]
    assert "(1/3)" in texts[0] and "(2/3)" in texts[1] and "(3/3)" in texts[2]
    assert "here is the reference solution" in texts[3] and "def searcher(messages, tools):" in texts[3]
    shown = of_type(kernel.execute("%agio exercise stopping_rule --solution")["messages"], "execute_result")
    assert shown[0]["content"]["data"]["text/markdown"].startswith("```python\n")


def test_unknown_name_is_one_line_listing_the_exercises(kernel):
    res = kernel.execute("%agio exercise nope")
    content = res["reply"]["content"]
    assert content["status"] == "error" and content["ename"] == "UsageError"
    assert content["evalue"].startswith("%agio exercise: no exercise 'nope'; the exercises are: tool_docstring, ")
    assert "\n" not in content["evalue"] and not _payloads(res)


def test_without_a_name_lists_the_exercises_in_course_order_and_what_is_done(kernel):
    res = kernel.execute("from agio_notebook.exercises import check, exercise\n"
                         "from agio_notebook.teach.solutions import reference\n"
                         "check('function_model', reference('function_model')).passed and "
                         "not check('stopping_rule', lambda m, t: 'Not found.').passed", timeout=120)
    assert of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"] == "True"
    res = kernel.execute("%agio exercise")
    text = stream_text(res["messages"], "stdout")
    lines = text.splitlines()
    names = [line.split()[0] for line in lines[:-1]]
    assert names[:4] == ["tool_docstring", "function_model", "edit_tool_call", "stopping_rule"]
    assert "✓ done" in lines[1] and "tried 1×" in lines[3] and "done" not in lines[0]
    assert lines[-1].startswith("1 of 11 done") and not _payloads(res)
    frame = kernel.value("__import__('agio_notebook.exercises').exercises.progress()"
                         "[['exercise', 'passed']].values.tolist()")
    assert frame == [["tool_errors", False], ["function_model", True], ["stopping_rule", False]]


def test_a_hanging_solution_checked_from_a_cell_fails_within_its_cap(kernel):
    started = time.monotonic()
    res = kernel.execute("import time\n"
                         "def city_weather(city: str) -> str:\n"
                         "    time.sleep(600)\n"
                         "def asks(city: str) -> str:\n"
                         "    return input('which city? ')\n"
                         "r1 = check('tool_errors', city_weather)\n"
                         "r2 = check('tool_errors', asks)\n"
                         "print(r1.summary().splitlines()[0]); print(r2.summary().splitlines()[0])", timeout=60)
    took = time.monotonic() - started
    assert res["reply"]["content"]["status"] == "ok"
    out = stream_text(res["messages"], "stdout")
    assert "did not return within 3 s" in out and "called input()" in out
    assert not any(m["msg_type"] == "input_request" for m in res["messages"])
    assert took < 20, took
    res = kernel.execute("input")  # the kernel's own input() is back
    assert "raw_input" in of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"]


def test_the_graders_call_shows_the_summary_alone_and_nothing_on_a_pass(kernel):
    res = kernel.execute("from agio_notebook.exercises import grade, points\n"
                         "grade('function_model', reference('function_model'))", timeout=120)
    assert res["reply"]["content"]["status"] == "ok"
    assert not of_type(res["messages"], "stream", "execute_result", "display_data")  # silent: otter reads output
    res = kernel.execute("grade('function_model', lambda messages, tools: '5')", timeout=120)
    content = res["reply"]["content"]
    assert content["status"] == "error" and content["ename"] == "ExerciseFailed"
    shown = "\n".join(of_type(res["messages"], "error")[0]["content"]["traceback"])
    assert shown.startswith("ExerciseFailed: exercise function_model (seed ")
    assert "answered without calling add" in shown
    assert "site-packages" not in shown and "agio_notebook" not in shown and "File " not in shown
    assert all(len(line) <= 100 for line in shown.splitlines())
    res = kernel.execute("points('function_model', lambda messages, tools: '5', 10)", timeout=120)
    assert of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"] == "0.0"
    assert "answered without calling add" in stream_text(res["messages"], "stdout")
    assert not stream_text(res["messages"], "stderr")  # nbgrader takes stderr for a failure


def test_strict_check_fails_the_cell_with_assertion_error_for_autograders(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "exercises_fresh", "pass")  # a fresh kernel that never ran %load_ext
    try:
        res = k.execute("from agio_notebook.exercises import check, exercise\n"
                        "check(exercise('function_model'), lambda messages, tools: '5', strict=True)", timeout=120)
        content = res["reply"]["content"]
        assert content["status"] == "error" and content["ename"] == "AssertionError"
        assert "exercise function_model (seed " in content["evalue"] and "3 of 3 scenarios failed" in content["evalue"]
        assert "answered without calling add" in content["evalue"]
        res = k.execute("check(exercise('tool_docstring'), 'my tool')")  # the wrong kind: one line, no traceback
        assert res["reply"]["content"]["status"] == "ok"
        text = of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"]
        assert text.startswith("exercise tool_docstring (seed ") and "not run: exercise 'tool_docstring' asks" in text
    finally:
        k.close()
