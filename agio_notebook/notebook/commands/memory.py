"""``%agio feedback|memory|trace``: feedback on runs, the agent's memory as data, the trace graph."""

from __future__ import annotations

from typing import Any

from ... import memory
from ...core import AgioError
from ...storage.ids import resolve_run_id
from . import arg, command


@command("feedback", "rate a run (+1 or -1, or up/down) with an optional comment, or correct it (-1 --correction "
                     "'the right answer'); an experience is proposed from it for you to accept or reject",
         arg("run"), arg("rating"), arg("comment", nargs="*"), arg("--step", type=int, default=None),
         arg("--correction", default=None, help="the right answer; the proposed experience teaches it"),
         arg("--no-propose", action="store_true"))
def feedback(c: Any, args: Any) -> Any:
    from ..feedback import describe

    item, proposal = c.feedback(args.run, args.rating, " ".join(args.comment), step=args.step,
                                propose=not args.no_propose, correction=args.correction)
    where = f" step #{item.sequence}" if item.sequence is not None else ""
    print(f"agio: feedback {'+1' if item.rating > 0 else '-1'} stored on run {item.run_id[:8]}{where}")
    if proposal is not None:
        print(describe(proposal, commented=bool(args.comment) or args.correction is not None))
    return None


_VERBS = ("skills", "experiences", "proposals", "feedback", "search", "add-skill", "add-experience", "accept",
          "reject", "delete")


@command("memory", "the agent's memory: skills | experiences | proposals | feedback (frames), search QUERY, "
                   "add-skill NAME TEXT, add-experience SITUATION (both take --tags a,b), accept ID, reject ID, delete ID",
         arg("verb", choices=_VERBS), arg("words", nargs="*"), arg("--scope", default=None),
         arg("--tags", default=None), arg("--situation", default=None), arg("--what-was-done", default=None),
         arg("--outcome", default=None), arg("--lesson", default=None))
def memory_command(c: Any, args: Any) -> Any:
    repo, verb, text = c.repository, args.verb, " ".join(args.words)
    if verb in ("skills", "experiences"):
        return getattr(memory, verb)(args.scope, repository=repo)
    if verb == "proposals":
        return memory.proposals(repository=repo)
    if verb == "feedback":
        run = resolve_run_id(repo, args.words[0]) if args.words else None
        return memory.feedback(run, repository=repo)
    if verb == "search":
        return memory.search(_need(text, "a query"), scope=args.scope, repository=repo)
    tags = [t.strip() for t in (args.tags or "").split(",") if t.strip()]
    if verb == "add-skill":
        if len(args.words) < 2:
            raise AgioError("memory add-skill needs a NAME and its TEXT")
        skill = memory.add_skill(args.words[0], " ".join(args.words[1:]), scope=args.scope or "global", tags=tags,
                                 repository=repo)
        print(f"agio: skill {skill.id} added ({skill.scope})")
        return None
    if verb == "add-experience":
        exp = memory.add_experience(_need(args.situation or text, "a SITUATION"), args.what_was_done or "",
                                    args.outcome or "", args.lesson or "", scope=args.scope or "global",
                                    tags=tags, repository=repo)
        print(f"agio: experience {exp.id} added ({exp.scope})")
        return None
    target = _need(text, "an id")
    if verb == "accept":
        edits = {k: v for k, v in (("situation", args.situation), ("action", args.what_was_done),
                                   ("outcome", args.outcome), ("lesson", args.lesson), ("scope", args.scope))
                 if v is not None}
        exp = memory.accept(target, repository=repo, **edits)
        print(f"agio: experience {exp.id} is in memory ({exp.scope}): {exp.lesson}")
    elif verb == "reject":
        proposal = memory.reject(target, repository=repo)
        print(f"agio: proposal {proposal.id[:8]} rejected; memory unchanged")
    else:
        memory.delete(target, repository=repo)
        print(f"agio: {target[:8]} deleted from memory")
    return None


@command("trace", "a run's trace graph: steps and their parents, drawn", arg("run"))
def trace(c: Any, args: Any) -> Any:
    from ...memory.trace import trace as build

    return build(args.run, repository=c.repository)


def _need(value: str, what: str) -> str:
    if not value.strip():
        raise AgioError(f"this memory command needs {what}")
    return value
