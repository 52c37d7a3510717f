"""What a finished run offers next, outside the JupyterLab extension: its attempts as data, and
Retry, Fork and attempt selection as the equivalent ``%agio`` commands.

The extension renders these as buttons that insert and run the command in a new cell; viewers
without it (GitHub, nbviewer, VS Code, nbconvert) show the commands themselves, whole.
"""

from __future__ import annotations

from html import escape
from typing import Any


from ..execution.attempts import Attempt
from .compact import ID_CHARS
from .view_model import RunView


def attempt_dicts(attempts: list[Attempt] | None) -> list[dict[str, Any]]:
    """The attempts as they travel in the transcript bundle."""
    return [{"number": a.number, "run_id": a.run_id, "status": a.run.status.value, "current": a.current,
             "steps": a.steps} for a in attempts or ()]


def control_points(view: RunView) -> tuple[list[int], list[int]]:
    """(where a retry may start, where a fork may stop), by the rules of ``plan_retry`` and
    ``fork_session``: a retry starts at an assistant step after complete steps; a fork never stops
    inside a tool batch."""
    retries: list[int] = []
    forks: list[int] = []
    pending, complete = 0, True
    for step in sorted(view.steps, key=lambda s: s.sequence):
        if step.role == "assistant":
            if complete:
                retries.append(step.sequence)
            pending += len(step.tool_cards)
        elif step.role == "tool":
            pending = max(pending - 1, 0)
        complete = pending == 0
        if complete:
            forks.append(step.sequence)
    return retries, forks


def answer_step(view: RunView, retries: list[int]) -> int | None:
    """The answer (the last assistant step without tool calls) a retry regenerates by default."""
    answers = [s.sequence for s in view.steps if s.sequence in retries and not s.tool_cards]
    return (answers or retries or [None])[-1]


def command_lines(view: RunView, attempts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(what, command) pairs for a finished run; none while it runs. The fork names this run, so it
    copies the steps this transcript shows even after a retry replaced them."""
    if not view.done or not view.run_id or not view.session_id:
        return []
    retries, forks = control_points(view)
    run, session = view.run_id[:ID_CHARS], view.session_id[:ID_CHARS]  # as the transcript shows them
    lines = []
    if any(a["run_id"] == view.run_id and not a["current"] for a in attempts):
        lines.append(("note", "this attempt is superseded; the fork below copies its steps"))
    seq = answer_step(view, retries)
    if seq is not None:
        lines.append(("retry", f"%agio retry {run} --from-seq {seq}"))
    if forks:
        lines.append(("fork", f"%agio fork {session} --at {forks[-1]} --run {run}"))
    if len(attempts) > 1:
        lines.append(("attempts", f"%agio attempts {run}"))
        lines.append(("use an attempt", f"%agio use-attempt {run} N"))
    return lines


def commands_html(lines: list[tuple[str, str]]) -> str:
    if not lines:
        return ""
    rows = "".join(f'<div>{escape(what)}: <code style="word-break:break-all">{escape(cmd)}</code></div>'
                   for what, cmd in lines)
    return (f'<div class="agio-commands" style="font-size:11px;color:#57606a;margin-top:4px">'
            f'{rows}<div>(any step: change the number)</div></div>')


def commands_text(lines: list[tuple[str, str]]) -> str:
    return "\n".join(f"{what}: {cmd}" for what, cmd in lines)
