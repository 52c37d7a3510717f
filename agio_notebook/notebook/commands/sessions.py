"""``%agio retry|fork|use|replay|config``: move between attempts and sessions, and set things up."""

from __future__ import annotations

import sys
from typing import Any

from ..controller import MissingDepsError
from . import arg, command


@command("retry", "retry a run from a step with the agent that made it (or --agent VARIABLE); the earlier "
                  "attempt stays, superseded",
         arg("run"), arg("--from-seq", type=int, default=None), arg("--background", action="store_true"),
         arg("--reuse", action="store_true", help="answer requests recorded before from the record"),
         arg("--agent", default=None, metavar="VARIABLE", help="the notebook variable holding the Agent to use"),
         arg("--deps", default=None, metavar="NAME", help="the notebook variable holding the retry's dependencies"))
def retry(c: Any, args: Any) -> Any:
    agent = c.agent_variable(args.agent) if args.agent is not None else None
    deps = c.notebook_variable(args.deps, "--deps") if args.deps is not None else None
    try:
        return c.retry(args.run, args.from_seq, agent=agent, background=args.background, reuse=args.reuse, deps=deps)
    except MissingDepsError as exc:  # the deps of a run this kernel did not start: a line; the notebook goes on
        print(f"agio: the retry did not start: {exc}", file=sys.stderr)
        return None


class PrintedId(str):
    """An id the cell has already printed: ``new = %agio fork …`` keeps it, and no ``Out[n]`` repeats it."""

    def _ipython_display_(self) -> None:
        """Shown once already, by the line above."""


@command("fork", "copy steps 1..N of a session into a new session and continue there; --run R forks the "
                 "conversation as attempt R wrote it, even after a retry replaced it",
         arg("session", nargs="?", default=None), arg("--at", type=int, required=True),
         arg("--run", default=None, help="a run (attempt) of the session whose steps to fork"))
def fork(c: Any, args: Any) -> PrintedId:
    new = c.fork(args.session, args.at, attempt=args.run)
    print(f"agio: forked into session {new[:8]}; the next %%agio cell continues there")
    return PrintedId(new)


@command("use", "continue an existing session", arg("session"))
def use(c: Any, args: Any) -> None:
    c.use(args.session)
    print(f"agio: now in session {args.session}")


@command("replay", "show a stored run's transcript", arg("run"))
def replay(c: Any, args: Any) -> None:
    from IPython.display import display

    display(c.replay(args.run), raw=True)


@command("config", "model, endpoint and store settings; the API key is read from OPENAI_API_KEY, "
                   "never stored or shown",
         arg("--model", default=None), arg("--base-url", default=None),
         arg("--store", default=None, metavar="PATH", help="this kernel's store (a directory, sqlite:/// or postgresql://)"),
         arg("--own-store", default=None, metavar="NAME",
             help="keep this notebook's runs, memory and files in a store of its own, beside the default one "
                  "(.agio.NAME); '' goes back to the default store; %%agio runs --every-store lists them all"))
def config(c: Any, args: Any) -> None:
    described = c.configure(model=args.model, base_url=args.base_url, store=args.store, own_store=args.own_store)
    if args.own_store and args.model is None and args.base_url is None:  # one line a tutorial can save as it is
        print(f"agio: this notebook keeps its runs, memory and files in a store of its own, "
              f"{c.repository.root.name} (beside the default store); %agio runs --every-store lists every store's runs")
    else:
        print(described)
