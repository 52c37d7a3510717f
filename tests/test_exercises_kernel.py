"""%agio exercise in a real kernel: the instructions, a starter cell inserted below, hints, bad names."""

from __future__ import annotations

import pytest

from kernel_support import of_type, offline_kernel


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
    inserted = [p for p in _payloads(res) if p["source"] == "set_next_input"]
    assert len(inserted) == 1 and inserted[0]["replace"] is False
    starter = inserted[0]["text"]
    assert 'check(exercise("tool_errors"), city_weather)' in starter
    # the starter runs as inserted, and its check fails with a reason (the learner has work to do)
    res = kernel.execute(starter, timeout=120)
    assert res["reply"]["content"]["status"] == "ok"
    html = of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/html"]
    assert "2 of 3 scenarios failed" in html and "gives it nothing to correct the spelling with" in html
    assert "agio-run" in html  # the failing run's transcript, inline


def test_hints_come_one_at_a_time(kernel):
    first = of_type(kernel.execute("%agio exercise stopping_rule --hint")["messages"], "execute_result")
    second = of_type(kernel.execute("%agio exercise stopping_rule --hint")["messages"], "execute_result")
    assert "(1/3)" in first[0]["content"]["data"]["text/markdown"]
    assert "(2/3)" in second[0]["content"]["data"]["text/markdown"]


def test_unknown_name_is_one_line_listing_the_exercises(kernel):
    res = kernel.execute("%agio exercise nope")
    content = res["reply"]["content"]
    assert content["status"] == "error" and content["ename"] == "UsageError"
    assert content["evalue"].startswith("%agio exercise: no exercise 'nope'; the exercises are: tool_docstring, ")
    assert "\n" not in content["evalue"] and not _payloads(res)


def test_without_a_name_lists_the_exercises(kernel):
    res = kernel.execute("%agio exercise")
    text = "".join(m["content"]["text"] for m in of_type(res["messages"], "stream"))
    assert "fork_compare_choose" in text and "Write a scorer" in text and not _payloads(res)


def test_strict_check_fails_the_cell_with_assertion_error_for_autograders(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "exercises_fresh", "pass")  # a fresh kernel that never ran %load_ext
    try:
        res = k.execute("from agio_notebook.exercises import check, exercise\n"
                        "check(exercise('function_model'), lambda messages, tools: '5', strict=True)", timeout=120)
        content = res["reply"]["content"]
        assert content["status"] == "error" and content["ename"] == "AssertionError"
        assert "exercise function_model: 2 of 2 scenarios failed" in content["evalue"]
        assert "answered without calling add" in content["evalue"]
        res = k.execute("check(exercise('tool_docstring'), 'my tool')")
        assert res["reply"]["content"]["ename"] == "WrongKindError"
    finally:
        k.close()
