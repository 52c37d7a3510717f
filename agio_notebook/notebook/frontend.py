"""Whether this kernel's views are shown by JupyterLab with the agio extension.

When agio loads in a kernel it says hello on an ``agio.frontend`` comm; the extension answers with the
widgets it has. A view that needs one of them (the one-model pause view) is used only after that
answer. Anywhere else (VS Code, the classic Notebook, a JupyterLab without the extension) nobody
answers, and the views keep to standard ipywidgets.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

TARGET = "agio.frontend"
ANSWER_WITHIN = 2.0  # seconds after the hello; an answer later than that is still kept for later views
_widgets: set[str] = set()
_asked_at: list[float] = []  # when the hello went out (monotonic); empty if it went nowhere


def say_hello() -> None:
    """Open the hello comm (outside a kernel it goes nowhere, and nothing is heard)."""
    try:
        from comm import create_comm

        channel = create_comm(target_name=TARGET, data={})
    except Exception:  # noqa: BLE001 - no kernel, no frontend to ask: the standard views it is
        return

    def answered(msg: dict[str, Any]) -> None:
        heard(msg.get("content", {}).get("data"))
        channel.close()

    channel.on_msg(answered)
    _asked_at[:] = [time.monotonic()]


def heard(answer: Any) -> None:
    """Keep what the extension said it has (an answer of any other shape is ignored)."""
    names = answer.get("widgets") if isinstance(answer, dict) else None
    if isinstance(names, list):
        _widgets.update(n for n in names if isinstance(n, str))


def has_widget(name: str) -> bool:
    return name in _widgets


async def answer(limit: float = ANSWER_WITHIN) -> None:
    """Wait for the extension's answer while it can still be on its way.

    A notebook run whole (Run All) sends every cell before the browser has answered the hello of
    the first; a view made in that moment would not know yet. This waits only until ``limit``
    seconds after the hello, so where nobody answers (VS Code) a view made later does not wait.
    """
    while answer_may_come(limit):
        await asyncio.sleep(0.005)


def answer_may_come(limit: float = ANSWER_WITHIN) -> bool:
    return bool(_asked_at) and not _widgets and time.monotonic() - _asked_at[0] < limit
