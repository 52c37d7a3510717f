"""``%agio exercise``: the course's exercises and what you have done; one exercise's instructions, with a
starter cell inserted below; its hints; its reference solution on request."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from . import arg, command


@command("exercise", "a course exercise: shows its instructions and inserts a starter cell below (without NAME: "
                     "the exercises in course order and what you have done; --hint: its next hint; --solution: its "
                     "reference solution)",
         arg("name", nargs="?", default=None, help="e.g. tool_docstring"),
         arg("--hint", action="store_true", help="show the exercise's next hint instead"),
         arg("--solution", action="store_true", help="show the exercise's reference solution instead"))
def exercise_command(c: Any, args: Any) -> Any:
    from ...teach import EXERCISES, UnknownExerciseError, exercise
    from ...teach.progress import done

    if args.name is None:
        kept = done(c.repository)
        lines = []
        for e in EXERCISES.values():
            checks, passed = kept.get(e.name, (0, False))
            state = "✓ done" if passed else (f"tried {checks}×" if checks else "")
            lines.append(f"{e.name:20} {state:10} {e.title} ({e.minutes} min)")
        finished = sum(1 for e in EXERCISES if kept.get(e, (0, False))[1])
        print("\n".join([*lines, f"{finished} of {len(EXERCISES)} done; `agio_notebook.exercises.progress()` has "
                                  "every check"]))
        return None
    try:
        chosen = exercise(args.name)
    except UnknownExerciseError as exc:
        raise UsageError(f"%agio exercise: {exc}") from None
    if args.hint:
        return chosen.hint()
    if args.solution:
        return chosen.solution()
    if c.shell is not None:  # the front end inserts the starter as a new cell below this one
        c.shell.set_next_input(chosen.starter, replace=False)
    return chosen
