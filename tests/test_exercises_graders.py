"""Real graders, round trip: ``agio course export`` writes an nbgrader course and an otter master from two
exercises; nbgrader (generate_assignment, autograde, export, generate_feedback) and otter (assign, run)
grade submissions that are right, half wrong, partly right, untouched and hanging, with the points each
deserves and agio's reason, never agio's frames, in the feedback."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from agio_notebook.teach.export import _split
from agio_notebook.teach.solutions import source

BIN = Path(sys.executable).parent
EXERCISES = ("function_model", "stopping_rule")  # 5 points each
WRONG = {"function_model": "def my_model(messages, tools):\n    return '5'",
         "stopping_rule": "def searcher(messages, tools):\n    return Reply.call('search', page=1)"}
HANGS = "def my_model(messages, tools):\n    while True:\n        pass"
# passes 2 of 3 scenarios at any seed: it reads a fourth page before giving up
PARTLY = ("def searcher(messages, tools):\n    pages = [m['content'] for m in messages if m['role'] == 'tool']\n"
          "    if pages and pages[-1].startswith('FOUND:'):\n        return pages[-1][6:].strip()\n"
          "    if len(pages) >= 4:\n        return 'Not found.'\n    return Reply.call('search', page=len(pages) + 1)")


def _solution(name: str) -> str:
    return "\n".join(_split(source(name))[1])


# what each student writes, per exercise (None: the cell left as given)
SUBMISSIONS = {
    "right": {n: _solution(n) for n in EXERCISES},
    "half": {"function_model": _solution("function_model"), "stopping_rule": WRONG["stopping_rule"]},
    "partly": {"function_model": _solution("function_model"), "stopping_rule": PARTLY},
    "untouched": {"function_model": None, "stopping_rule": None},
    "hanging": {"function_model": HANGS, "stopping_rule": _solution("stopping_rule")},
}


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "AGIO_STORE": str(cwd / ".agio")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The two exercises exported once, for both graders, through the command line."""
    root = tmp_path_factory.mktemp("course")
    run([str(BIN / "agio"), "course", "export", "--nbgrader", "nb", "--otter", "ot", "--exercises",
         ",".join(EXERCISES), "--points", "5"], root)
    return root


def test_the_export_puts_the_reference_between_each_graders_markers(course: Path) -> None:
    nb = nbformat.read(course / "nb" / "source" / "agio" / "agio.ipynb", as_version=4)
    solutions = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    grades = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(solutions) == 2 and len(grades) == 2
    for cell, name in zip(solutions, EXERCISES):
        assert "### BEGIN SOLUTION" in cell.source and _solution(name) in cell.source
    assert [c.source for c in grades] == ["points('function_model', my_model, 5)", "points('stopping_rule', searcher, 5)"]
    assert all(c.metadata["nbgrader"]["points"] == 5 and c.metadata["nbgrader"]["locked"] for c in grades)
    master = nbformat.read(course / "ot" / "agio.ipynb", as_version=4)
    assert master.cells[0].cell_type == "raw" and master.cells[0].source.startswith("# ASSIGNMENT CONFIG")
    assert sum("# BEGIN SOLUTION\n" in c.source and _solution(n) in c.source for c in master.cells
               for n in EXERCISES) == 2


def _fill(cells, key, submission: dict[str, str | None]) -> None:
    names = iter(EXERCISES)
    for cell in cells:
        if key(cell):
            name = next(names)
            written = submission[name]
            if written is not None:
                placeholder = "# YOUR CODE HERE\nraise NotImplementedError()" if "YOUR CODE" in cell.source else "..."
                assert placeholder in cell.source and _solution(name) not in cell.source  # the student's copy
                cell.source = cell.source.replace(placeholder, written)


def test_nbgrader_grades_each_submission_with_the_points_it_deserves_and_says_why(course: Path) -> None:
    root = course / "nb"
    run([str(BIN / "nbgrader"), "generate_assignment", "agio", "--create", "--force"], root)
    release = root / "release" / "agio" / "agio.ipynb"
    for student, submission in SUBMISSIONS.items():
        nb = nbformat.read(release, as_version=4)
        _fill(nb.cells, lambda c: c.metadata.get("nbgrader", {}).get("solution"), submission)
        target = root / "submitted" / student / "agio" / "agio.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    run([str(BIN / "nbgrader"), "autograde", "agio", "--create", "--force"], root, timeout=600)
    run([str(BIN / "nbgrader"), "export"], root)
    with open(root / "grades.csv") as f:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    assert scores == {"right": 10.0, "half": 5.0, "partly": 8.33, "untouched": 0.0, "hanging": 5.0}
    run([str(BIN / "nbgrader"), "generate_feedback", "agio", "--force"], root)
    feedback = {s: (root / "feedback" / s / "agio" / "agio.html").read_text() for s in SUBMISSIONS}
    assert "your model never stopped" in feedback["half"]
    assert "your model read 4 page(s)" in feedback["partly"]
    assert "did not return within 3 s" in feedback["hanging"] and "Timeout" not in feedback["hanging"]
    assert "NameError" in feedback["untouched"]
    for student, html in feedback.items():
        assert "site-packages" not in html and "agio_notebook/" not in html, student
        assert "cannot be converted to a float" not in html


def test_otter_assigns_and_runs_each_submission_with_the_points_it_deserves_and_says_why(course: Path) -> None:
    root = course / "ot"
    run([str(BIN / "otter"), "assign", "agio.ipynb", "dist"], root, timeout=600)
    student = nbformat.read(root / "dist" / "student" / "agio.ipynb", as_version=4)
    assert not any(_solution(n) in c.source for c in student.cells for n in EXERCISES)  # stripped
    (autograder,) = (root / "dist" / "autograder").glob("*.zip")
    results = {}
    for name, submission in SUBMISSIONS.items():
        if name == "partly":  # otter grades an exercise whole: partial credit is nbgrader's points()
            continue
        nb = nbformat.read(root / "dist" / "student" / "agio.ipynb", as_version=4)
        _fill(nb.cells, lambda c: "otter_answer_cell" in c.metadata.get("tags", []), submission)
        work = root / "runs" / name
        work.mkdir(parents=True)
        nbformat.write(nb, work / "agio.ipynb")
        run([str(BIN / "otter"), "run", "-a", str(autograder), "-o", str(work), str(work / "agio.ipynb")], work,
            timeout=600)
        results[name] = json.loads((work / "results.json").read_text())
    scores = {name: sum(t.get("score") or 0 for t in r["tests"] if t["name"] in EXERCISES)
              for name, r in results.items()}
    assert scores == {"right": 10, "half": 5, "untouched": 0, "hanging": 5}
    outputs = {name: "\n".join(t.get("output", "") for t in r["tests"] if t["name"] in EXERCISES)
               for name, r in results.items()}
    assert "ExerciseFailed: exercise stopping_rule (seed " in outputs["half"]
    assert "your model never stopped" in outputs["half"]
    assert "did not return within 3 s" in outputs["hanging"]
    assert "asks for a model function" in outputs["untouched"] and "got None" in outputs["untouched"]
    for name, text in outputs.items():
        assert "site-packages" not in text and "agio_notebook/" not in text and "Traceback" not in text, name
    shutil.rmtree(root / "runs", ignore_errors=True)
