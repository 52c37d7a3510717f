"""The JupyterHub configuration of a class: each user's server gets its store, as that user's role.

The hub calls ``pre_spawn_hook`` before it starts a user's server. The hook reads the class's secrets
file (each time, so a student added since the hub started gets a store at their next spawn) and puts
two variables in the server's environment: ``AGIO_STORE`` (the class's database, as the user's role:
no password) and ``PGPASSWORD`` (that role's password, which the PostgreSQL client reads). Kernels inherit
both, so ``%%agio`` cells and the Runs panel use the class store with nothing in the notebook. A user the
class does not know is refused at the spawn with one line saying how to be added. Who may log in is the
authenticator's business (the text says which one a teacher still has to choose).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core import AgioError

_TEMPLATE = '''# JupyterHub configuration for the agio classroom {database!r} (written by `agio classroom init`).
# Each user's server gets AGIO_STORE (the class's database, as that user's own role) and PGPASSWORD
# (that role's password) in its environment, read from the secrets file at each spawn: a student added
# later (`agio classroom add-student`) gets a store at their next spawn, and no password sits in a notebook.
import json as _json
import pathlib as _pathlib
import shutil as _shutil
from urllib.parse import quote as _quote, urlsplit as _urlsplit, urlunsplit as _urlunsplit

from tornado.web import HTTPError as _HTTPError

AGIO_CLASSROOM_SECRETS = _pathlib.Path({secrets!r})
AGIO_COURSE = {course!r}  # copied into each user's home at their first spawn (None: no course)


def agio_classroom_store(spawner):
    name = spawner.user.name
    secrets = _json.loads(AGIO_CLASSROOM_SECRETS.read_text())
    password = secrets["passwords"].get(name)
    if password is None:
        line = f"{{name}} is not a member of this class: the teacher adds them with `agio classroom add-student {{name}}`"
        refused = _HTTPError(403, line)  # the hub passes an HTTPError through to the page (it hides other errors)
        refused.jupyterhub_message = line
        raise refused
    parts = _urlsplit(secrets["store"])
    spawner.environment["AGIO_STORE"] = _urlunsplit(parts._replace(netloc=f"{{_quote(name)}}@{{parts.netloc}}"))
    spawner.environment["PGPASSWORD"] = password
    home = getattr(spawner, "home_dir", None)
    if AGIO_COURSE and home and not _pathlib.Path(home, "course").exists():
        _shutil.copytree(AGIO_COURSE, _pathlib.Path(home, "course"))


c.Spawner.pre_spawn_hook = agio_classroom_store
c.Authenticator.admin_users = {{{teacher!r}}}
# Who may log in is the authenticator's to say; who gets a store, the class's (the hook above).
c.Authenticator.allow_all = True
# Choose an authenticator for a real class (OAuth, LDAP, PAM...); for a trial on one machine:
#   c.JupyterHub.authenticator_class = "shared-password"
#   c.SharedPasswordAuthenticator.user_password = "..."      # 8 characters or more
#   c.SharedPasswordAuthenticator.admin_password = "..."     # 32 characters or more, for the teacher
#   c.JupyterHub.spawner_class = "simple"                    # every user as the hub's own system user
'''


_TRIAL = '''
# A trial on this machine (`--trial-password`): everyone logs in with one password, each user's server runs
# as this system user with a home of its own. Not for a real class: anyone with the password can log in as
# anyone (the database still keeps each role to its own rows).
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {password!r}
c.Authenticator.admin_users = set()  # the teacher logs in like everyone; the dashboard comes with their role
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r}
c.Spawner.default_url = "/lab"
c.Spawner.args = {args!r}
'''


def render(database: str, teacher: str, secrets: str | os.PathLike[str], course: str | os.PathLike[str] | None = None,
           *, trial_password: str | None = None, homes: str | os.PathLike[str] = "homes") -> str:
    """The configuration text (Python, for ``jupyterhub -f``); values are written as Python literals.
    ``trial_password``: also choose a shared-password login and servers on this machine, users' homes in
    ``homes`` (a trial, as ``scripts/classroom.sh`` runs one)."""
    text = _TEMPLATE.format(database=database, teacher=teacher, secrets=str(Path(secrets).absolute()),
                            course=str(Path(course).absolute()) if course is not None else None)
    if trial_password is None:
        return text
    if len(trial_password) < 8:
        raise AgioError("--trial-password needs 8 characters or more (JupyterHub's shared-password login)")
    args = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return text + _TRIAL.format(password=trial_password, homes=str(Path(homes).absolute() / "{username}"), args=args)
