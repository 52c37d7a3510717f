"""``%agio exercise``: a course exercise's instructions, with a starter cell inserted below."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from . import arg, command


@command("exercise", "a course exercise: shows its instructions and inserts a starter cell below (without NAME: "
                     "the list; --hint: its next hint)",
         arg("name", nargs="?", default=None, help="e.g. tool_docstring"),
         arg("--hint", action="store_true", help="show the exercise's next hint instead"))
def exercise_command(c: Any, args: Any) -> Any:
    from ...teach import EXERCISES, UnknownExerciseError, exercise

    if args.name is None:
        print("\n".join(f"{e.name:22} {e.title} ({e.minutes} min)" for e in EXERCISES.values()))
        return None
    try:
        chosen = exercise(args.name)
    except UnknownExerciseError as exc:
        raise UsageError(f"%agio exercise: {exc}") from None
    if args.hint:
        return chosen.hint()
    if c.shell is not None:  # the front end inserts the starter as a new cell below this one
        c.shell.set_next_input(chosen.starter, replace=False)
    return chosen
