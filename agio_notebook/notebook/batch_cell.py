"""A foreground ``%agio batch`` cell awaits its batch, so its Cancel button is heard.

A cell that blocks never hears a widget click on ipykernel 7; a cell that awaits does (the kernel
handles comm messages while an async cell awaits). IPython's documented input transformers turn the
cell's ``%agio batch ...`` line into ``await`` of the handle: "Run All" still waits for the batch,
and the Cancel button stops it. ``--background`` lines are left alone (they return at once).
"""

from __future__ import annotations

import re
from typing import Any

from ..scheduling import BatchHandle, PlanHandle
from . import plan_view
from .batch_monitor import display_handle
from .worker import awaits_on_asyncio

_LINE = re.compile(r"^((?:[A-Za-z_]\w*\s*=\s*)?)(get_ipython\(\)\.run_line_magic\('agio', 'batch\b(?:(?!--background).)*'\))\s*$")


def await_batch_lines(lines: list[str]) -> list[str]:
    """Input transformer: ``[x = ]%agio batch ...`` at the top level becomes ``[x = ]await ...``.

    Only where top-level ``await`` runs on asyncio (``%autoawait`` on, as in ipykernel); elsewhere
    the line stays as written and the batch runs in the background.
    """
    from IPython import get_ipython

    if not awaits_on_asyncio(get_ipython()):
        return lines
    return [(_LINE.sub(r"\1await \2", line.rstrip("\n")) + ("\n" if line.endswith("\n") else ""))
            if _LINE.match(line.rstrip("\n")) else line for line in lines]


def install(shell: Any) -> None:
    """Register the transformer and how handles display (live monitor or DAG, then a static bundle)."""
    if await_batch_lines not in shell.input_transformers_post:
        shell.input_transformers_post.append(await_batch_lines)
    formatter = shell.display_formatter.ipython_display_formatter
    formatter.for_type(BatchHandle, lambda handle: display_handle(handle, shell))
    formatter.for_type(PlanHandle, lambda handle: plan_view.show(handle, shell))
