"""Ready assignments for real graders, from chosen exercises: ``agio course export --nbgrader DIR`` and
``--otter DIR``.

The solutions are the exercises' reference cells, put between the grader's own markers, so the
grader strips them from what students get (nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``,
otter's ``# BEGIN SOLUTION`` / ``# END SOLUTION``); the import lines stay for the student. Each exercise
is graded by one locked cell: ``points(...)`` for nbgrader (partial credit: the share of scenarios
passed), ``grade(...)`` in an exception-based otter test (silent when right, the summary alone when not).
A check runs in a few seconds, and one whose solution hangs ends after the solution's cap, well inside
nbgrader's 30 s limit per cell.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from ..core import AgioError
from .catalog import EXERCISES, exercise
from .exercise import Exercise
from .solutions import solutions, source

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
_IMPORT = re.compile(r"^(from \S+ import .+|import .+)$")


class ExportError(AgioError):
    """An assignment cannot be written (an unknown exercise, a directory in the way); one line."""


def _split(code: str) -> tuple[list[str], list[str]]:
    """The reference cell as (its import lines, the rest)."""
    lines = code.strip("\n").splitlines()
    imports = [line for line in lines if _IMPORT.match(line)]
    body = [line for line in lines if not _IMPORT.match(line)]
    while body and not body[0].strip():
        body.pop(0)
    return imports, body


def _chosen(names: Sequence[str] | None) -> list[Exercise]:
    if not names:
        return list(EXERCISES.values())
    try:
        return [exercise(n) for n in names]
    except LookupError as exc:
        raise ExportError(str(exc)) from None


def _entry(ex: Exercise) -> str:
    return solutions(ex.name).ENTRY


def _task(ex: Exercise) -> str:
    return (f"### {ex.title} (`{ex.name}`)\n\n{ex.instructions.strip()}\n\nWrite **{ex.asks_for}** in the next cell, "
            f"named `{_entry(ex)}`. You can check it as you go with `check({ex.name!r}, {_entry(ex)})`: each check "
            "draws new values, as the grader does.")


def _nbgrader_meta(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                   points: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
                            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def nbgrader_notebook(chosen: Sequence[Exercise], points: float) -> nbformat.NotebookNode:
    cells = [new_markdown_cell(
        "# agio exercises\n\nWrite each solution in the cell below its exercise. Each is graded offline in a few "
        "scenarios with values drawn afresh, so a solution must do the work, not repeat an example's answer. The "
        "grade cells give partial credit: the share of scenarios passed.", metadata=_nbgrader_meta("intro", locked=True)),
        new_code_cell("from agio_notebook.exercises import check, points", metadata=_nbgrader_meta("setup", locked=True))]
    for ex in chosen:
        imports, body = _split(source(ex.name))
        cells.append(new_markdown_cell(_task(ex), metadata=_nbgrader_meta(f"{ex.name}-task", locked=True)))
        cells.append(new_code_cell("\n".join([*imports, "", "### BEGIN SOLUTION", *body, "### END SOLUTION"]).strip(),
                                   metadata=_nbgrader_meta(f"{ex.name}-solution", solution=True)))
        cells.append(new_code_cell(f"points({ex.name!r}, {_entry(ex)}, {points:g})",
                                   metadata=_nbgrader_meta(f"{ex.name}-grade", grade=True, locked=True, points=points)))
    return new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})


def export_nbgrader(directory: str | Path, names: Sequence[str] | None = None, *, points: float = 5.0,
                    assignment: str = "agio") -> Path:
    """An nbgrader course directory: ``nbgrader_config.py`` and ``source/ASSIGNMENT/ASSIGNMENT.ipynb``. Then
    ``nbgrader generate_assignment ASSIGNMENT`` in that directory makes the students' version."""
    chosen = _chosen(names)
    root = Path(directory)
    target = root / "source" / assignment / f"{assignment}.ipynb"
    config = root / "nbgrader_config.py"
    with _writing(root):
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_notebook(chosen, points), target)
        if config.exists():
            return target
        config.write_text("c = get_config()  # noqa: F821 - nbgrader's\n"
                          "c.CourseDirectory.course_id = \"agio\"\n"
                          "# nbgrader stops a cell after 30 s (ExecutePreprocessor.timeout); an agio check takes a few\n"
                          "# seconds, and a hanging solution is stopped after its cap (3 s), so the default is enough.\n")
    return target


def otter_notebook(chosen: Sequence[Exercise], points: float, assignment: str) -> nbformat.NotebookNode:
    config = "\n".join(["# ASSIGNMENT CONFIG", f"name: {assignment}", "init_cell: true", "check_all_cell: false",
                        "export_cell: false", "run_tests: true", "generate: true", "tests:", "  files: false",
                        "  ok_format: false"])
    cells = [new_raw_cell(config), new_markdown_cell(
        "# agio exercises\n\nWrite each solution in the cell below its exercise. Each is graded offline in a few "
        "scenarios with values drawn afresh, so a solution must do the work, not repeat an example's answer."),
        new_code_cell("from agio_notebook.exercises import check")]
    for ex in chosen:
        imports, body = _split(source(ex.name))
        entry = _entry(ex)
        cells += [new_raw_cell(f"# BEGIN QUESTION\nname: {ex.name}\npoints: {points:g}"),
                  new_markdown_cell(_task(ex)),
                  new_raw_cell("# BEGIN SOLUTION"),
                  new_code_cell("\n".join([*imports, "", "# BEGIN SOLUTION", *body, "# END SOLUTION"]).strip()),
                  new_raw_cell("# END SOLUTION"),
                  new_raw_cell("# BEGIN TESTS"),
                  new_code_cell(f'""" # BEGIN TEST CONFIG\npoints: {points:g}\n""" # END TEST CONFIG\n'
                                f"def test_{ex.name}({entry}):\n"
                                f"    from agio_notebook.exercises import grade\n"
                                f"    grade({ex.name!r}, {entry})\n\n"
                                f"test_{ex.name}({entry})"),
                  new_raw_cell("# END TESTS"),
                  new_raw_cell("# END QUESTION")]
    return new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})


def export_otter(directory: str | Path, names: Sequence[str] | None = None, *, points: float = 5.0,
                 assignment: str = "agio") -> Path:
    """An otter-grader master notebook ``DIR/ASSIGNMENT.ipynb``. Then ``otter assign ASSIGNMENT.ipynb dist``
    makes the student notebook and ``dist/autograder/autograder.zip``; ``otter run -a ... SUBMISSION``
    grades one submission here, without Docker."""
    chosen = _chosen(names)
    root = Path(directory)
    target = root / f"{assignment}.ipynb"
    with _writing(root):
        root.mkdir(parents=True, exist_ok=True)
        nbformat.write(otter_notebook(chosen, points, assignment), target)
    return target


@contextmanager
def _writing(root: Path) -> Iterator[None]:
    """A directory that cannot be written is one line."""
    try:
        yield
    except OSError as exc:
        raise ExportError(f"cannot write the assignment in {root}: {exc.strerror or exc}") from None
