"""Serving leaves the host process's logging as it was.

The MCP SDK's ``MCPServer`` calls ``logging.basicConfig(level="INFO", ...)`` when it is built: in a
process whose root logger has no handler (a notebook kernel, a script), the root moves to INFO with a
handler of the SDK's, and every library then logs at INFO, httpx included, whose request lines carry
URLs with ``?api_key=…`` in them. :func:`keep_host_logging` puts the root logger back as it found it.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def keep_host_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
