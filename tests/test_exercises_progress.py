"""A learner's progress: every check kept in the store's named journal, on each backend; progress() as a frame;
migrated with the store; a store that cannot be written never fails a check."""

from __future__ import annotations

import pandas as pd
import pytest

from agio_notebook.exercises import check, progress
from agio_notebook.storage import new_repository
from agio_notebook.teach.progress import solution_hash
from agio_notebook.teach.solutions import reference


def wrong_model(messages, tools):
    return "5"


def test_each_check_is_kept_in_the_stores_journal_and_read_back_as_a_frame(store_url) -> None:
    repository = new_repository(store_url)
    try:
        right = check("function_model", reference("function_model"), seed=12, repository=repository)
        wrong = check("function_model", wrong_model, seed=13, repository=repository)
        problem = check("tool_docstring", "not a tool", seed=14, repository=repository)
        assert right.passed and not wrong.passed and problem.problem
        again = new_repository(store_url)  # another process's view of the same store
        try:
            frame = progress(again)
        finally:
            again.close()
    finally:
        repository.close()
    assert list(frame["exercise"]) == ["function_model", "function_model", "tool_docstring"]
    assert list(frame["seed"]) == [12, 13, 14] and list(frame["passed"]) == [True, False, False]
    assert list(frame["score"]) == [1.0, 0.0, 0.0] and list(frame["failed"]) == [0, 3, 0]
    assert frame["reasons"][0] == [] and "answered without calling add" in frame["reasons"][1][0]
    assert frame["reasons"][2] == [problem.problem]
    assert str(frame["time"].dtype) == "datetime64[ns, UTC]" and frame["time"].is_monotonic_increasing
    assert frame["solution"][0] == solution_hash(reference("function_model")) != frame["solution"][1]
    assert all(len(h) == 12 for h in frame["solution"])


def test_progress_defaults_to_the_default_store_and_check_can_leave_it_out(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))
    check("function_model", wrong_model)
    check("function_model", wrong_model, record=False)
    frame = progress()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 1 and frame["seed"][0] > 0


def test_a_store_that_cannot_be_written_is_a_warning_not_a_failed_check(tmp_path) -> None:
    class ReadOnly:
        def journal(self, name, keys):
            raise OSError("read-only file system")

    with pytest.warns(UserWarning, match="not kept in your progress: read-only file system"):
        result = check("function_model", reference("function_model"), repository=ReadOnly())  # type: ignore[arg-type]
    assert result.passed


def test_the_hash_tells_solutions_apart_without_keeping_them() -> None:
    from agio_notebook import Agent
    from agio_notebook.exercises import calculator, literal_model

    a = Agent(model=literal_model(), tools=[calculator], system_prompt="Use the calculator.")
    b = Agent(model=literal_model(), tools=[calculator], system_prompt="Use the calculator!")
    assert solution_hash(a) != solution_hash(b) and solution_hash("x") != solution_hash("y")
    assert solution_hash(wrong_model) == solution_hash(wrong_model)
