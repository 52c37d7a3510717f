"""Setting up and changing a class: ``agio classroom init``, ``add-student`` and ``remove-student``.

Run with an administrator's URL of the class's database (a role that may create roles and owns the
store's tables, such as the database's owner). Each person gets a login role with a password of its own;
the passwords go to a secrets file (mode 0600) that only the hub reads, at each spawn, to give a user's
server its store (``hub_config.py``): the URL names the user's role, the password travels in the server's
environment (``PGPASSWORD``), so it never sits in a notebook, a message or the store.

Every step can be run again: ``init`` twice makes nothing twice and keeps every password; on a store that
already holds runs, those runs become the teacher's.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..core import scrub
from ..core.redact import redact_url, url_secrets
from ..storage.export import export_jsonl
from .roles import ClassroomError, Roster, check_name, read_roster
from . import schema


@dataclass
class Secrets:
    """The secrets file: the store's URL without a user, and each member's database password."""

    store: str
    passwords: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Secrets | None:
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            # a file written by an earlier version may hold the administrator's credentials in its query
            return cls(member_store(str(data["store"])), dict(data.get("passwords", {})))
        except (ValueError, KeyError, TypeError, ClassroomError) as exc:
            raise ClassroomError(f"the classroom secrets file {path} is unreadable ({exc}); move it away to make "
                                 "new passwords") from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"store": self.store, "passwords": self.passwords}, out, indent=1)
        os.replace(tmp, path)

    def url_for(self, name: str) -> str:
        """The store's URL as ``name`` connects (no password: that comes from ``PGPASSWORD``)."""
        parts = urlsplit(self.store)
        return urlunsplit(parts._replace(netloc=f"{quote(name)}@{parts.netloc}"))


@dataclass
class Report:
    """What a classroom command did, as the lines it prints."""

    lines: list[str] = field(default_factory=list)


# connection options a member's URL may carry from the administrator's: where the server is and how to reach
# it safely. Anything else (user, password, passfile, service, sslkey, sslcert, sslpassword...) names or proves
# the administrator, and is never written to the secrets file nor given to a student.
_MEMBER_OPTIONS = frozenset({
    "host", "hostaddr", "port", "dbname", "sslmode", "sslrootcert", "sslcrl", "sslcrldir", "sslnegotiation",
    "sslcompression", "sslsni", "requiressl", "ssl_min_protocol_version", "ssl_max_protocol_version", "gssencmode",
    "channel_binding", "require_auth", "requirepeer", "krbsrvname", "gsslib", "connect_timeout", "client_encoding",
    "application_name", "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "target_session_attrs", "load_balance_hosts"})


def member_store(admin_url: str) -> str:
    """The admin URL as every member connects, as themselves: its host(s), port(s), database and harmless
    options, never its user, password or any other credential (in the authority or the query)."""
    parts = urlsplit(admin_url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
        raise ClassroomError(f"a classroom's store is a PostgreSQL database: postgresql://ADMIN:PASSWORD@HOST:PORT/"
                             f"DATABASE, got {redact_url(admin_url)!r}")
    host = parts.netloc.rsplit("@", 1)[-1]
    options = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in _MEMBER_OPTIONS]
    return urlunsplit(parts._replace(netloc=host, query=urlencode(options), fragment=""))


def _connect(admin_url: str) -> Any:
    """A connection as the administrator (one transaction for everything a command changes)."""
    from ..storage.postgres_repo import PostgresRepository

    PostgresRepository(admin_url).close()  # the store's tables, made or brought up to date by their owner
    import psycopg

    try:
        return psycopg.connect(admin_url)
    except psycopg.Error as exc:
        raise ClassroomError(f"cannot connect to {redact_url(admin_url)}: "
                             f"{scrub(' '.join(str(exc).split()), url_secrets(admin_url))}") from None


def _run(admin_url: str, work: Any) -> Any:
    """``work(cursor)`` in one transaction as the administrator; a database refusal is one line."""
    import psycopg

    conn = _connect(admin_url)
    try:
        with conn.cursor() as cur:
            result = work(cur)
        conn.commit()
        return result
    except psycopg.Error as exc:
        conn.rollback()
        detail = scrub(" ".join(str(exc).split()), url_secrets(admin_url))
        hint = " (the administrator's role must own the store's tables and may create roles)" \
            if isinstance(exc, psycopg.errors.InsufficientPrivilege) else ""
        raise ClassroomError(f"the classroom could not be changed: {detail}{hint}") from None
    finally:
        conn.close()


def _roster_now(cur: Any) -> Roster | None:
    cur.execute("SELECT value FROM agio_meta WHERE key = 'classroom'")
    row = cur.fetchone()
    return Roster.from_json(row[0]) if row else None


def init(admin_url: str, teacher: str, students: list[str], secrets_path: str | os.PathLike[str]) -> Report:
    """Roles, owners and policies for a class (again: nothing twice, every password kept)."""
    teacher = check_name(teacher, "the teacher")
    students = [check_name(s, "a student") for s in students]
    if teacher in students:
        raise ClassroomError(f"{teacher!r} is the teacher and cannot also be a student")
    path = Path(secrets_path).absolute()
    store = member_store(admin_url)
    kept = Secrets.load(path)
    if kept is not None and kept.store != store:
        raise ClassroomError(f"the secrets file {path} belongs to the class at {kept.store}, not {store}: name another "
                             "file with --secrets")
    book = kept or Secrets(store)
    report = Report()

    def work(cur: Any) -> Roster:
        cur.execute("SELECT current_database()")
        database = cur.fetchone()[0]
        existing = _roster_now(cur)
        if existing is not None and existing.teacher != teacher:
            raise ClassroomError(f"this class's teacher is {existing.teacher!r}; init keeps it (a class has one "
                                 "teacher): run it with --teacher " + existing.teacher)
        roster = existing or Roster(database, teacher)
        new = [s for s in students if s not in roster.students]
        roster.students += new
        roster.former = [f for f in roster.former if f not in roster.students]
        schema.ensure_group(cur, roster.teachers_group)
        schema.ensure_group(cur, roster.students_group)
        for name, group, other in ((teacher, roster.teachers_group, roster.students_group),
                                   *((s, roster.students_group, roster.teachers_group) for s in roster.students)):
            password = book.passwords.get(name)
            made_now = schema.ensure_login(cur, name, password or _new_password(book, name), group, other)
            if made_now:
                report.lines.append(f"made the role {name}")
        moved = schema.apply(cur, roster)
        runs = moved.get("agio_runs", 0)
        if runs:
            report.lines.append(f"{runs} runs already in the store became {teacher}'s (with their sessions and steps)")
        report.lines.append(f"class {roster.database}: teacher {teacher}, {len(roster.students)} students "
                            f"({', '.join(roster.students)}); row-level security on "
                            f"{len(schema.DATA_TABLES)} tables")
        return roster

    _run(admin_url, work)
    book.save(path)
    report.lines.append(f"passwords in {path} (mode 0600; only the hub reads it)")
    return report


def _new_password(book: Secrets, name: str) -> str:
    book.passwords[name] = secrets.token_urlsafe(18)
    return book.passwords[name]


def _class(cur: Any) -> Roster:
    roster = _roster_now(cur)
    if roster is None:
        raise ClassroomError("this store is not a class yet: run `agio classroom init URL --teacher NAME --students "
                             "NAMES` first")
    return roster


def add_student(admin_url: str, names: list[str], secrets_path: str | os.PathLike[str]) -> Report:
    path = Path(secrets_path).absolute()
    book = Secrets.load(path) or Secrets(member_store(admin_url))
    names = [check_name(n, "a student") for n in names]
    report = Report()

    def work(cur: Any) -> None:
        roster = _class(cur)
        for name in names:
            if name == roster.teacher:
                raise ClassroomError(f"{name!r} is the teacher and cannot also be a student")
            if name in roster.students:
                report.lines.append(f"{name} is already a student of {roster.database}")
            made = schema.ensure_login(cur, name, book.passwords.get(name) or _new_password(book, name),
                                       roster.students_group, roster.teachers_group)
            if name not in roster.students:
                roster.students.append(name)
                roster.former = [f for f in roster.former if f != name]
                report.lines.append(f"{name} joined {roster.database}" + (" (a new role)" if made else ""))
        schema.apply(cur, roster)

    _run(admin_url, work)
    book.save(path)
    return report


def remove_student(admin_url: str, name: str, secrets_path: str | os.PathLike[str],
                   export: str | os.PathLike[str] | None = None) -> Report:
    """The student's role goes; their rows stay (the teacher still sees them), or with ``export`` are
    written to that JSON Lines file and then deleted from the store."""
    path = Path(secrets_path).absolute()
    book = Secrets.load(path) or Secrets(member_store(admin_url))
    name = check_name(name, "a student")
    report = Report()

    def find(cur: Any) -> Roster:
        roster = _class(cur)
        if name not in roster.students:
            listed = ", ".join(roster.students) or "none"
            raise ClassroomError(f"{name!r} is not a student of {roster.database} (students: {listed})")
        if export is not None and not book.passwords.get(name):  # the export reads as the student
            schema.ensure_login(cur, name, _new_password(book, name), roster.students_group, roster.teachers_group)
        return roster

    _run(admin_url, find)
    if export is not None:
        records = _export_rows(book, name, Path(export))
        report.lines.append(f"wrote {records} records of {name} to {export}")

    def work(cur: Any) -> None:
        roster = _class(cur)
        if export is not None:
            gone = schema.delete_rows(cur, name)
            report.lines.append(f"deleted {name}'s rows from the store ({gone['agio_runs']} runs, "
                                f"{gone['agio_steps']} steps)")
        else:
            roster.former = [*(f for f in roster.former if f != name), name]
            report.lines.append(f"kept {name}'s rows (the teacher still sees them)")
        roster.students = [s for s in roster.students if s != name]
        schema.drop_login(cur, name)
        schema.apply(cur, roster)
        report.lines.append(f"{name} left {roster.database}")

    _run(admin_url, work)
    book.passwords.pop(name, None)
    book.save(path)
    return report


def _export_rows(book: Secrets, name: str, target: Path) -> int:
    """Everything ``name`` owns, read as ``name`` (row-level security picks exactly their rows), as JSON
    Lines: the store's export (sessions, runs, steps, events) and their named journals."""
    import orjson

    from ..storage.postgres_repo import PostgresRepository

    password = book.passwords[name]
    parts = urlsplit(book.url_for(name))
    url = urlunsplit(parts._replace(netloc=f"{quote(name)}:{quote(password, safe='')}@{parts.netloc.split('@', 1)[1]}"))
    repo = PostgresRepository(url)
    try:
        count = export_jsonl(repo, target)
        rows = repo.fetch("SELECT name, tbl, key, doc FROM agio_journal WHERE doc IS NOT NULL ORDER BY name, version")
    finally:
        repo.close()
    with target.open("ab") as out:
        for journal, table, key, doc in rows:
            out.write(orjson.dumps({"table": "journals", "doc": {"journal": journal, "table": table, "key": key,
                                                                  "doc": orjson.loads(doc)}}) + b"\n")
    return count + len(rows)


def roster(admin_or_member_url: str) -> Roster | None:
    """The class recorded in a store (any member's URL reads it)."""
    from ..storage.postgres_repo import PostgresRepository

    repo = PostgresRepository(admin_or_member_url)
    try:
        return read_roster(repo)
    finally:
        repo.close()

