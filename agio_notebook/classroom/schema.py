"""Owners and row-level security on a classroom's PostgreSQL store: done once, by the class's administrator.

Every table that holds someone's work (sessions, runs, steps, events, session claims, and the named
journals: memory, feedback, executions, exercise progress) gets an ``owner`` column whose default is the
role that logged in to write the row (``session_user``), and two policies:

- the students group: ``USING (owner = session_user) WITH CHECK (owner = session_user)`` — a student
  reads, changes and deletes only rows of their own, and cannot write a row in anyone else's name;
- the teachers group: every row.

``session_user``, not ``current_user``: any member may ``SET ROLE`` to the students group, which changes
``current_user`` to the group but never ``session_user``; a row written so is still the student's own.

PostgreSQL enforces them for every client, so plain SQL with a student's credentials cannot read another
student's steps. Each statement here does nothing where it is already done, so ``classroom init`` can run
again; rows that belong to nobody in the class (an existing store's, written before it was a class, or
the administrator's) become the teacher's. Rows owned by a class member, a former one or one of the class's
group roles are never adopted: what a student wrote stays theirs, never the teacher's. Named journals are
keyed by owner too (two students' journals of one name never collide), and each role's own journals are the
ones its processes read (``PostgresRepository.journal_scope``).
"""

from __future__ import annotations

from typing import Any

from .roles import META_KEY, Roster

# every table holding someone's work; agio_meta (the schema's version, the roster) is read-only to the class
DATA_TABLES = ("agio_sessions", "agio_runs", "agio_steps", "agio_events", "agio_claims", "agio_journal")
# a student's connections, by default: a transaction left open (say in psql, holding a table's lock) ends
# after a minute, and a statement waits for a lock 10 s. A student may SET other values for their own
# connections; what bounds everyone else's wait is the store's own lock_timeout (``postgres_repo.LOCK_WAIT_S``)
STUDENT_IDLE = "60s"
STUDENT_LOCK_WAIT = "10s"


def _sql() -> Any:
    from psycopg import sql

    return sql


def ensure_group(cur: Any, name: str) -> None:
    sql = _sql()
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
    if cur.fetchone() is None:
        cur.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(name)))


def ensure_login(cur: Any, name: str, password: str | None, group: str, other_group: str) -> bool:
    """A login role ``name`` in ``group`` (and not in ``other_group``); sets ``password`` when given.
    Returns whether the role was made now."""
    from .roles import ClassroomError

    sql = _sql()
    role = sql.Identifier(name)
    cur.execute("SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = %s", (name,))
    found = cur.fetchone()
    if found is not None and any(found):
        raise ClassroomError(f"the database role {name!r} already exists with more rights than a class member "
                             "(superuser, createrole or bypassrls): choose another name")
    if found is not None:  # roles are the server's: one of another class, or of someone else, is not ours to take
        cur.execute("SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON "
                    "r.oid = m.member WHERE g.rolname IN (%s, %s) AND r.rolname = %s", (group, other_group, name))
        if cur.fetchone() is None:
            raise ClassroomError(f"the database role {name!r} already exists on this server and is not in this class "
                                 "(another class's student, or someone else's role): choose another name")
    if found is None:
        cur.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(password)))
    elif password is not None:
        cur.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(password)))
    cur.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), role))
    cur.execute("SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON "
                "r.oid = m.member WHERE g.rolname = %s AND r.rolname = %s", (other_group, name))
    if cur.fetchone() is not None:
        cur.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(other_group), role))
    return found is None


def drop_login(cur: Any, name: str) -> None:
    """Close the role's connections and drop it (its rows stay, under its name, unless deleted first).
    Whatever the role made or set with its own SQL in the class's database (objects, default privileges,
    grants) goes first, objects to the administrator, so nothing a student did can block their removal."""
    sql = _sql()
    role = sql.Identifier(name)
    cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s AND pid <> pg_backend_pid()",
                (name,))
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
    if cur.fetchone() is None:
        return
    cur.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(role))
    cur.execute(sql.SQL("DROP OWNED BY {}").format(role))
    cur.execute(sql.SQL("DROP ROLE {}").format(role))


def apply(cur: Any, roster: Roster) -> dict[str, int]:
    """Owners, keys, grants and policies for the class; rows of nobody in the class become the teacher's.
    Returns how many rows of each table changed hands."""
    sql = _sql()
    students, teachers = sql.Identifier(roster.students_group), sql.Identifier(roster.teachers_group)
    for table in DATA_TABLES:
        cur.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT session_user")
                    .format(sql.Identifier(table)))
        cur.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN owner SET DEFAULT session_user").format(sql.Identifier(table)))
        cur.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (owner)")
                    .format(sql.Identifier(f"{table}_owner_only"), sql.Identifier(table)))
    cur.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'agio_journal_pkey'")
    key = cur.fetchone()
    if key is None or "owner" not in key[0]:
        cur.execute("ALTER TABLE agio_journal DROP CONSTRAINT IF EXISTS agio_journal_pkey, "
                    "ADD CONSTRAINT agio_journal_pkey PRIMARY KEY (owner, name, tbl, key)")
    moved = {}
    keep = [roster.teacher, *roster.students, *roster.former]
    groups = [roster.students_group, roster.teachers_group]
    for table in DATA_TABLES:  # never a row of a class's group or of anyone in it (what a student wrote)
        cur.execute(sql.SQL("UPDATE {} SET owner = %s WHERE owner <> ALL(%s) AND owner NOT IN (SELECT r.rolname "
                            "FROM pg_roles r WHERE r.rolname = ANY(%s) OR EXISTS (SELECT 1 FROM pg_auth_members m "
                            "JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid AND g.rolname = ANY(%s)))")
                    .format(sql.Identifier(table)), (roster.teacher, keep, groups, groups))
        moved[table] = max(cur.rowcount, 0)
    for name in roster.students:  # a transaction a student's own SQL leaves open (and its locks) ends by itself
        for setting, value in (("idle_in_transaction_session_timeout", STUDENT_IDLE), ("lock_timeout", STUDENT_LOCK_WAIT)):
            cur.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(sql.Identifier(name), sql.Identifier(setting),
                                                                   sql.Literal(value)))
    cur.execute("SELECT current_database()")
    database = sql.Identifier(cur.fetchone()[0])
    cur.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(database))
    for group in (students, teachers):
        cur.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, group))
        cur.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(group))
        cur.execute(sql.SQL("GRANT SELECT ON agio_meta TO {}").format(group))
        cur.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, DATA_TABLES)), group))
    for table in DATA_TABLES:
        name = sql.Identifier(table)
        cur.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(name))
        for policy, group, rule in (("agio_student", students, sql.SQL("owner = session_user")),
                                    ("agio_teacher", teachers, sql.SQL("true"))):
            cur.execute(sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(sql.Identifier(policy), name))
            cur.execute(sql.SQL("CREATE POLICY {} ON {} FOR ALL TO {} USING ({}) WITH CHECK ({})").format(
                sql.Identifier(policy), name, group, rule, rule))
    cur.execute("INSERT INTO agio_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
                "excluded.value", (META_KEY, roster.to_json()))
    return moved


def delete_rows(cur: Any, name: str) -> dict[str, int]:
    """Every row ``name`` owns, deleted (after an export); how many of each table."""
    sql = _sql()
    gone = {}
    for table in DATA_TABLES:
        cur.execute(sql.SQL("DELETE FROM {} WHERE owner = %s").format(sql.Identifier(table)), (name,))
        gone[table] = max(cur.rowcount, 0)
    return gone
