"""The pause view as one widget model, drawn by the agio JupyterLab extension (``pause_dom.ts``).

A pause shown with standard ipywidgets is some ten models (text, editors, buttons, boxes) the browser
builds one by one before the view appears; this is one. A click comes back as one custom message
with the button's name and every editor's text.
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as widgets
from traitlets import Dict, List, Unicode

from .. import __version__

MODULE = "agio-notebook"  # the extension's npm package, which registers the widget under its version
VERSION = "^" + __version__  # the same release (see frontend.heard)


class PauseWidget(widgets.DOMWidget):
    _model_name = Unicode("AgioPauseModel").tag(sync=True)
    _model_module = Unicode(MODULE).tag(sync=True)
    _model_module_version = Unicode(VERSION).tag(sync=True)
    _view_name = Unicode("AgioPauseView").tag(sync=True)
    _view_module = Unicode(MODULE).tag(sync=True)
    _view_module_version = Unicode(VERSION).tag(sync=True)

    kind = Unicode().tag(sync=True)
    html = Unicode().tag(sync=True)
    editors = List(Dict()).tag(sync=True)  # [{"key", "label", "value", "rows"}]
    buttons = List(List()).tag(sync=True)  # [[name, style, icon]]

    def __init__(self, on_message: Callable[[Any], None], **state: Any):
        self._on_message = on_message
        super().__init__(**state)

    def open(self) -> None:
        """Listen before the comm opens: a click may come (on the kernel's comm thread) at once."""
        if self.comm is None:
            self.on_msg(lambda _, content, __: self._on_message(content))
        super().open()
