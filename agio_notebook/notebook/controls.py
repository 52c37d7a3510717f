"""What a finished run offers next, outside the JupyterLab extension: its attempts as data, and
Retry, Fork and attempt selection as the equivalent ``%agio`` commands.

The extension renders these as buttons that insert and run the command in a new cell; viewers
without it (GitHub, nbviewer, VS Code, nbconvert) show the commands themselves, whole.
"""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from ..execution.attempts import Attempt
from .view_model import RunView


def attempt_dicts(attempts: list[Attempt] | None) -> list[dict[str, Any]]:
    """The attempts as they travel in the transcript bundle."""
    return [{"number": a.number, "run_id": a.run_id, "status": a.run.status.value, "current": a.current,
             "steps": a.steps} for a in attempts or ()]


def attempts_frame(attempts: list[Attempt]) -> pd.DataFrame:
    """One row per attempt, oldest first; ``current`` marks the one the conversation uses."""
    runs = [a.run for a in attempts]
    return pd.DataFrame({
        "attempt": pd.Series([a.number for a in attempts], dtype="Int64"),
        "current": pd.Series([a.current for a in attempts], dtype="bool"),
        "run_id": pd.Series([r.id for r in runs], dtype="string"),
        "kind": pd.Series([r.kind for r in runs], dtype="string"),
        "status": pd.Series([r.status.value for r in runs], dtype="string"),
        "from_sequence": pd.Series([r.start_sequence for r in runs], dtype="Int64"),
        "steps": pd.Series([a.steps for a in attempts], dtype="Int64"),
        "final_text": pd.Series([r.final_text for r in runs], dtype="string"),
        "error": pd.Series([r.error for r in runs], dtype="string"),
        "started_at": pd.to_datetime(pd.Series([r.started_at for r in runs], dtype="float64"), unit="s", utc=True),
    })


def command_lines(view: RunView, attempts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(what, command) pairs for a finished run; none while it runs."""
    if not view.done or not view.run_id or not view.session_id:
        return []
    answer = next((s.sequence for s in view.steps if s.role == "assistant"), None)
    seq = answer if answer is not None else (view.steps[0].sequence if view.steps else None)
    lines = []
    if seq is not None:
        # the usual retry regenerates the answer; the usual fork keeps the whole run (always a valid point)
        lines.append(("retry", f"%agio retry {view.run_id} --from-seq {seq}"))
        lines.append(("fork", f"%agio fork {view.session_id} --at {max(s.sequence for s in view.steps)}"))
    if len(attempts) > 1:
        lines.append(("attempts", f"%agio attempts {view.run_id}"))
        lines.append(("use an attempt", f"%agio use-attempt {view.run_id} N"))
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
