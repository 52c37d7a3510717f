"""The tutorials form a course: an index with order, goals and times; each tutorial starts with what the
learner will be able to do, keeps its runs in a store of its own, and ends with its exercise unsolved (a
starter whose check shows its table, never strict=True; the reference only on request) and a closing sentence
on what it showed about agents; the catalog's order is the course's; the index says how the stores and the
offline models work; the README lists the course."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from agio_notebook.teach import EXERCISES, TUTORIALS
from agio_notebook.teach.export import _split
from agio_notebook.teach.solutions import solutions, source

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS_ON_DISK = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb") if p.stem != "course")
PLANNED = "planned"  # the exercise column of a tutorial listed before its exercise exists
ROW = re.compile(r"^\| \[(\w+)\]\((\w+)\.ipynb\) \| (.+?) \| (.+?) \| (\d+) min \|$", re.M)


def _course_rows() -> list[re.Match[str]]:
    index = nbformat.read(NOTEBOOKS / "course.ipynb", as_version=4).cells[0].source
    return list(ROW.finditer(index))


def _with_exercise() -> list[str]:
    """The course's tutorials, less the planned entries (a tutorial whose exercise is still to come)."""
    return [r.group(2) for r in _course_rows() if r.group(4) != PLANNED]


def test_the_index_lists_every_tutorial_once_with_what_it_teaches_and_its_time() -> None:
    rows = _course_rows()
    listed = [r.group(2) for r in rows]
    missing = sorted(set(TUTORIALS_ON_DISK) - set(listed))
    assert not missing, f"tutorials missing from the course index (add one row each to course.ipynb): {missing}"
    assert sorted(listed) == TUTORIALS_ON_DISK and len(set(listed)) == len(listed)
    for r in rows:
        assert r.group(1) == r.group(2) and (NOTEBOOKS / f"{r.group(2)}.ipynb").exists()
        assert len(r.group(3)) > 20 and int(r.group(5)) > 0
        assert r.group(4) == PLANNED or any(f"`{name}`" in r.group(4) for name in EXERCISES), r.group(0)
    assert len(_with_exercise()) >= 10


def test_the_catalog_follows_the_course() -> None:
    """Each exercise's tutorial is in the course, and the exercises come in the tutorials' order."""
    order = [r.group(2) for r in _course_rows()]
    assert set(TUTORIALS.values()) <= set(order)
    assert list(EXERCISES) == sorted(EXERCISES, key=lambda name: order.index(TUTORIALS[name]))


@pytest.mark.parametrize("name", _with_exercise())
def test_each_tutorial_starts_with_its_goals_and_ends_with_its_exercise_unsolved(name: str) -> None:
    cells = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
    assert any(c.cell_type == "markdown" and "What you will be able to do" in c.source for c in cells[:2]), name
    code = [c for c in cells if c.cell_type == "code"]
    assert code[0].source.splitlines() == ["%load_ext agio_notebook", f"%agio config --own-store {name}"]
    last = code[-1].source
    called = re.search(r'check\((?:exercise\()?"(\w+)"\)?, (\w+)\)\s*$', last)
    assert called and called.group(1) in EXERCISES, f"{name} must end with its exercise's check(...): {last!r}"
    assert not any("strict=True" in c.source for c in code), "strict=True is for graders, not tutorials"
    exercise_name, entry = called.groups()
    assert entry == solutions(exercise_name).ENTRY
    whole = "\n".join(c.source for c in code)
    given = {line.strip() for line in EXERCISES[exercise_name].starter.splitlines()}  # the starter hands these out
    body = [line.strip() for line in _split(source(exercise_name))[1] if line.strip() and line.strip() not in given
            and not line.strip().startswith(("def ", "async def ", '"""', "return Reply.call"))]
    shown = [line for line in body if line in whole]
    assert len(shown) < max(2, len(body) // 2), f"{name} shows the reference solution of {exercise_name}: {shown}"
    assert cells[-1].cell_type == "markdown" and "Your turn" in cells[-1].source
    assert f'exercise("{called.group(1)}").solution()' in cells[-1].source  # the reference, on request only
    assert "**What this showed about agents:**" in cells[-1].source
    row = next(r for r in _course_rows() if r.group(2) == name)
    assert f"`{exercise_name}`" in row.group(4)  # the index names the exercise the tutorial ends with


@pytest.mark.parametrize("name", _with_exercise())
def test_each_tutorial_says_what_its_offline_models_read_where_they_appear(name: str) -> None:
    text = "\n".join(c.source for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
                     if c.cell_type == "markdown")
    assert re.search(r"\breads?\b", text) and re.search(r"real model", text, re.I), name


def test_the_index_says_how_stores_offline_models_and_a_real_endpoint_work() -> None:
    text = "\n".join(c.source for c in nbformat.read(NOTEBOOKS / "course.ipynb", as_version=4).cells)
    for needed in ("--own-store", "%agio runs --every-store", "read keywords, not sense", "OPENAI_API_KEY",
                   "OPENAI_BASE_URL", "starts unsolved", ".solution()"):
        assert needed in text, needed


def test_the_course_folder_shows_the_tutorials_only() -> None:
    """JupyterLab's file browser opens on notebooks/ (scripts/lab.sh): no test support or server files there."""
    shown = sorted(p.name for p in NOTEBOOKS.iterdir() if not p.name.startswith("."))
    assert shown == sorted([*(f"{r.group(2)}.ipynb" for r in _course_rows()), "course.ipynb"]), shown


def test_the_readme_tutorial_list_is_the_course() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The course", 1)[1].split("\n## ", 1)[0]
    order = [r.group(2) for r in _course_rows()]
    found = re.findall(r"\[`(\w+)\.ipynb`\]", section)
    assert found == order


@pytest.mark.parametrize("name", TUTORIALS_ON_DISK)
def test_saved_outputs_name_no_path_of_the_machine_that_ran_them(name: str) -> None:
    text = (NOTEBOOKS / f"{name}.ipynb").read_text()
    found = re.findall(r"(?:/tmp/|/root/|/home/|/work/)[^\s\"\\]*", text)
    assert not found, f"{name} shows machine paths in its outputs: {found[:3]}"
