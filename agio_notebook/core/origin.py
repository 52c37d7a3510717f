"""Where a run comes from: the notebook and the person whose process starts it.

Read from the environment the process was started with, so the engine needs no notebook to know them:
Jupyter's server tells each kernel its notebook (``JPY_SESSION_NAME``, the notebook's path), JupyterHub
tells a user's server who it runs for (``JUPYTERHUB_USER``). The Runs panel lists and filters runs by them.
"""

from __future__ import annotations

import functools
import getpass
import os


def current_notebook() -> str | None:
    """The notebook whose kernel this is (its path, as the Jupyter server gave it), or None. A path in the home
    folder is written from ``~``: a run's record travels into saved notebooks, which name no folder of the
    machine that ran them."""
    path = os.environ.get("JPY_SESSION_NAME") or None
    home = os.path.expanduser("~")
    if path and home not in ("~", "/") and path.startswith(home.rstrip("/") + "/"):
        return "~/" + path[len(home.rstrip("/")) + 1:]
    return path


def current_user() -> str | None:
    """The JupyterHub user this process runs for, else the operating system's user name, or None."""
    hub_user = os.environ.get("JUPYTERHUB_USER")
    if hub_user:
        return hub_user
    return _os_user()


@functools.cache
def _os_user() -> str | None:
    """The operating system's user name, looked up once (a password-database lookup on every run cost more
    than the rest of reading where the run comes from)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container started with a bare --user)
        return None
