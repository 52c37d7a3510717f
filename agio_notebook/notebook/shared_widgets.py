"""Layouts and styles shared by every view a kernel shows.

Each widget made is a message the browser must handle (a model to create, its state to resolve)
before a view that holds it can show; a layout or a style that never changes need not be made per
view. One of each kind per kernel, remade if something closed it (``Widget.close_all``).
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as widgets

_SHARED: dict[str, widgets.Widget] = {}


def shared(key: str, make: Callable[[], Any]) -> Any:
    """The kernel's one ``key`` layout or style, made by ``make`` the first time (or after a close)."""
    widget = _SHARED.get(key)
    if widget is None or widget.comm is None:
        widget = _SHARED[key] = make()
    return widget


def layout(**css: str) -> widgets.Layout:
    """The shared layout with exactly these properties."""
    return shared("layout:" + repr(sorted(css.items())), lambda: widgets.Layout(**css))


def html_style() -> Any:
    from ipywidgets.widgets.widget_string import HTMLStyle

    return shared("style:html", HTMLStyle)


def button_style() -> widgets.ButtonStyle:
    return shared("style:button", widgets.ButtonStyle)


def html(value: str = "", **kwargs: Any) -> widgets.HTML:
    """An HTML widget with the shared default layout and style: one message instead of three."""
    return widgets.HTML(value, layout=kwargs.pop("layout", None) or layout(), style=html_style(), **kwargs)
