"""Whether this kernel's views are shown by JupyterLab with the agio extension.

When agio loads in a kernel it says hello on an ``agio.frontend`` comm; the extension answers with the
widgets it has. A view that needs one of them (the one-model pause view) is used only after that
answer. Anywhere else (VS Code, the classic Notebook, a JupyterLab without the extension) nobody
answers, and the views keep to standard ipywidgets.
"""

from __future__ import annotations

from typing import Any

TARGET = "agio.frontend"
_widgets: set[str] = set()


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


def heard(answer: Any) -> None:
    """Keep what the extension said it has (an answer of any other shape is ignored)."""
    names = answer.get("widgets") if isinstance(answer, dict) else None
    if isinstance(names, list):
        _widgets.update(n for n in names if isinstance(n, str))


def has_widget(name: str) -> bool:
    return name in _widgets
