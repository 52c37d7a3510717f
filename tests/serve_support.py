"""Serving agents in a test: a server on a background thread, stopped however the test ends."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import agio_notebook


@contextmanager
def served(agents: Any, repo: Any, protocol: str = "mcp", **options: Any) -> Iterator[Any]:
    """``serve_mcp`` or ``serve_a2a`` (``protocol``) of ``agents`` over ``repo``, stopped at the end."""
    serve = agio_notebook.serve_mcp if protocol == "mcp" else agio_notebook.serve_a2a
    server = serve(agents=agents, store=repo, **options)
    try:
        yield server
    finally:
        server.stop()
