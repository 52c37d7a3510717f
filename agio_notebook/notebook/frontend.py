"""Whether this kernel's views are shown by JupyterLab with the agio extension.

When agio loads in a kernel it says hello on an ``agio.frontend`` comm; the extension answers with its
version and the widgets it has. A view that needs one of them (the one-model pause view) is used only
after an answer from an extension of this version. Anywhere else (VS Code, the classic Notebook, a
JupyterLab without the extension) nobody answers, and the views keep to standard ipywidgets.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import __version__
from .worker import clicks_reach_a_busy_cell

TARGET = "agio.frontend"
ANSWER_WITHIN = 2.0  # seconds after the hello; an answer later than that is still kept for later views
_widgets: set[str] = set()
_asked_at: float | None = None  # when the hello went out (monotonic); None: not asked, or answered
_waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()  # views awaiting the answer


def say_hello() -> None:
    """Open the hello comm, in a kernel (elsewhere there is no frontend to ask)."""
    global _asked_at
    try:
        from IPython import get_ipython
        from comm import create_comm

        if getattr(get_ipython(), "kernel", None) is None:
            return
        _widgets.clear()  # the answer to this hello decides anew (another frontend may have attached)
        _asked_at = time.monotonic()
        # the answer takes the browser's round trip: the handler below is in place long before
        channel = create_comm(target_name=TARGET, data={"kernel": __version__})
    except Exception:  # noqa: BLE001 - no comm, no answer: the standard views it is
        _asked_at = None
        return

    def answered(msg: dict[str, Any]) -> None:
        heard(msg.get("content", {}).get("data"))
        channel.close()

    channel.on_msg(answered)


def _same_release(version: Any) -> bool:
    """The extension's widgets match this kernel's (same major and minor: the ``^0.1.0`` range)."""
    return isinstance(version, str) and version.split(".")[:2] == __version__.split(".")[:2]


def heard(answer: Any) -> None:
    """Keep the widgets an extension of this release says it has; any other answer is ignored."""
    global _asked_at
    if not isinstance(answer, dict) or not _same_release(answer.get("extension")):
        return
    names = answer.get("widgets")
    if isinstance(names, list):
        _widgets.update(n for n in names if isinstance(n, str))
        _asked_at = None
        for loop, answered in list(_waiting):  # heard on the kernel's comm thread, awaited on the cell's loop
            loop.call_soon_threadsafe(lambda done=answered: done.done() or done.set_result(None))


def has_widget(name: str) -> bool:
    return name in _widgets


def answer_may_come(limit: float = ANSWER_WITHIN) -> bool:
    """An answer is still expected: asked less than ``limit`` s ago, and a busy cell hears it (ipykernel 7)."""
    return _asked_at is not None and time.monotonic() - _asked_at < limit and clicks_reach_a_busy_cell()


async def answer(limit: float = ANSWER_WITHIN) -> None:
    """Wait for the extension's answer while it can still be on its way.

    A notebook run whole (Run All) sends every cell before the browser has answered the hello of
    the first; a view made in that moment would not know yet. This wakes as the answer is heard
    (the cell's first pause waits for nothing else), and waits only until ``limit`` seconds after
    the hello, so where nobody answers (VS Code) a view made later does not wait.
    """
    asked = _asked_at
    if asked is None or not answer_may_come(limit):
        return
    loop = asyncio.get_running_loop()
    waiter = (loop, loop.create_future())
    _waiting.add(waiter)
    try:
        if _asked_at is not None:  # (not answered while the waiter was being added)
            await asyncio.wait_for(waiter[1], max(0.0, limit - (time.monotonic() - asked)))
    except asyncio.TimeoutError:
        pass  # nobody answered in time: the standard views
    finally:
        _waiting.discard(waiter)
