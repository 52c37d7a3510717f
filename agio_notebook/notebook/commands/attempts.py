"""``%agio attempts|use-attempt``: see a run's attempts, and make any of them current again."""

from __future__ import annotations

from typing import Any

from . import arg, command


@command("attempts", "a run's attempts (the run and its retries) as a DataFrame; `current` marks the one in use",
         arg("run"))
def attempts(c: Any, args: Any) -> Any:
    return c.attempts(args.run)


@command("use-attempt", "make attempt N of a run current again; the next %%agio cell continues from it",
         arg("run"), arg("number", type=int))
def use_attempt(c: Any, args: Any) -> None:
    run = c.use_attempt(args.run, args.number)
    print(f"agio: attempt {args.number} ({run.id[:8]}) is current in session {run.session_id[:8]}; "
          "the next %%agio cell continues from it")
