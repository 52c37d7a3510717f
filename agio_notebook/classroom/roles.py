"""Who is who in a classroom: a teacher, students, and the database roles they log in with.

A class lives in one PostgreSQL database. Each person has a login role of their own (named as their
JupyterHub user), a member of the class's students group or its teachers group; the store's row-level
security policies name the groups (``schema.py``). The roster is kept in the store itself (``agio_meta``,
key ``classroom``), so every role can read who the class is and what part it plays.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core import AgioError
from ..storage.postgres_repo import PostgresRepository

# a PostgreSQL role name that needs no quoting and a JupyterHub user name alike (the hub lower-cases names)
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
META_KEY = "classroom"
# names PostgreSQL reserves or reads as something else than a role (``GRANT ... TO current_user``)
_RESERVED = frozenset({"public", "none", "all", "user", "current_user", "session_user", "current_role",
                       "system_user", "current_catalog", "current_schema", "postgres"})


class ClassroomError(AgioError):
    """A classroom cannot be set up or changed as asked; the message says why in one line."""


def check_name(name: Any, what: str = "a user name") -> str:
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise ClassroomError(f"{name!r} cannot be {what} of a class: lower-case letters, digits and _, starting with a "
                             "letter or _, at most 63 characters (a database role and a JupyterHub user alike)")
    name = name.strip()
    if name in _RESERVED or name.startswith(("pg_", "agio_")):
        raise ClassroomError(f"{name!r} cannot be {what} of a class: names starting with pg_ or agio_ (the class's own "
                             "group roles), and public, none, postgres, user, current_user, session_user and "
                             "current_role, are PostgreSQL's or the class's own")
    return name


def parse_students(value: str) -> list[str]:
    """``alice,bob`` or ``alice bob``, or a file with one name a line (``#`` starts a comment)."""
    path = Path(value)
    if path.is_file():
        text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    elif "/" in value or value.endswith(".txt"):
        raise ClassroomError(f"no file {value!r} (--students takes names, comma-separated, or a file of names)")
    else:
        text = value
    names = [check_name(n, "a student") for n in re.split(r"[\s,]+", text) if n]
    if not names:
        raise ClassroomError("--students names nobody")
    return list(dict.fromkeys(names))


@dataclass
class Roster:
    """The class as the store records it; ``former`` students' rows were kept when they left."""

    database: str
    teacher: str
    students: list[str] = field(default_factory=list)
    former: list[str] = field(default_factory=list)

    @property
    def teachers_group(self) -> str:
        return _group(self.database, "teachers")

    @property
    def students_group(self) -> str:
        return _group(self.database, "students")

    @property
    def members(self) -> list[str]:
        return [self.teacher, *self.students]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Roster:
        d = json.loads(text)
        return cls(d["database"], d["teacher"], list(d.get("students", [])), list(d.get("former", [])))


def _group(database: str, part: str) -> str:
    """The class's group role: one class per database, so its groups carry the database's name."""
    base = re.sub(r"[^a-z0-9_]", "_", database.lower())
    return f"agio_{base}"[:63 - len(part) - 1] + f"_{part}"


def read_roster(repository: Any) -> Roster | None:
    """The roster of a classroom store (None: not a classroom, or not PostgreSQL)."""
    if not isinstance(repository, PostgresRepository):
        return None
    rows = repository.fetch("SELECT value FROM agio_meta WHERE key = ?", (META_KEY,))
    return Roster.from_json(rows[0][0]) if rows else None


def class_role(repository: Any) -> tuple[str | None, str | None]:
    """(the role this store is read as, "teacher" | "student" | None) on PostgreSQL; (None, None) elsewhere."""
    if not isinstance(repository, PostgresRepository):
        return None, None
    user = repository.fetch("SELECT current_user")[0][0]
    roster = read_roster(repository)
    if roster is None:
        return user, None
    groups = dict(repository.fetch("SELECT rolname, pg_has_role(current_user, oid, 'MEMBER') FROM pg_roles "
                                   "WHERE rolname IN (?, ?)", (roster.teachers_group, roster.students_group)))
    if groups.get(roster.teachers_group):
        return user, "teacher"
    return user, "student" if groups.get(roster.students_group) else None
