"""A class on one PostgreSQL store (a real server, started here): `agio classroom init` (twice, and on a store
that already holds runs), each role's reach in plain SQL (a student reads and writes only their own rows in
every table, the teacher reads every row), journals that two students keep under one name, add-student,
remove-student (rows kept, or exported and deleted), the progress frame, and one line for each fault: a wrong
password, an unknown student, a role outside the class, a student pointing at another's URL, the database
restarted mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import psycopg
import pytest

from agio_notebook import Agent, FunctionModel, Reply, StepRunner, tool
from agio_notebook.classroom import ClassroomError, add_student, class_role, dashboard, init, progress, remove_student
from agio_notebook.classroom.admin import Secrets
from agio_notebook.classroom.hub_config import render
from agio_notebook.classroom.progress import failing_reasons
from agio_notebook.exercises import RATES, check
from agio_notebook.core import AgentRun, AgioError, RunStatus, StoreError
from agio_notebook.storage import RunFilter, new_repository
from agio_notebook.storage.export import load_export
from store_backends import running_postgres

TABLES = ("agio_sessions", "agio_runs", "agio_steps", "agio_events", "agio_claims", "agio_journal")


@pytest.fixture(scope="module")
def server():
    """A PostgreSQL server of this module's own: classes make roles, which live server-wide."""
    with running_postgres() as pg:
        yield pg


class Class:
    """A class made by `init`: its admin URL, secrets, and each member's repository (opened as their role)."""

    def __init__(self, url: str, secrets: Path, teacher: str, students: list[str]):
        self.url, self.secrets, self.teacher, self.students = url, secrets, teacher, students
        self._open: list = []

    @property
    def book(self) -> Secrets:
        book = Secrets.load(self.secrets)
        assert book is not None
        return book

    def member_url(self, name: str, password: str | None = None) -> str:
        book = self.book
        password = book.passwords[name] if password is None else password
        return book.url_for(name).replace(f"{name}@", f"{name}:{password}@", 1)

    def repo(self, name: str):
        repository = new_repository(self.member_url(name))
        self._open.append(repository)
        return repository

    def sql(self, name: str):
        return psycopg.connect(self.member_url(name), autocommit=True)

    def close(self) -> None:
        for repository in self._open:
            repository.close()


_classes = iter(range(1, 1000))


@pytest.fixture
def klass(server, tmp_path):
    n = next(_classes)
    url = server.new_database()
    teacher, students = f"tina{n}", [f"alice{n}", f"bob{n}"]
    before = new_repository(url)  # a store in use before it became a class: its runs become the teacher's
    before.commit(run=AgentRun(session_id="before", query="written before the class", status=RunStatus.COMPLETED))
    before.journal("memory", {}).append([("skills", {"id": "old-skill", "text": "from before"})])
    before.close()
    report = init(url, teacher, students, tmp_path / "secrets.json")
    assert any("1 runs already in the store became" in line for line in report.lines), report.lines
    made = Class(url, tmp_path / "secrets.json", teacher, students)
    yield made
    made.close()


def ran(repo, agent_name: str, query: str) -> str:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def reply(messages, tools):
        return Reply.call("add", a=1, b=2) if messages[-1]["role"] == "user" else f"{query}: 3"

    runner = StepRunner(Agent(name=agent_name, model=FunctionModel(reply), tools=[add]), repository=repo)
    return runner.run_sync(None, query).run_id


def convert_undocumented(amount: float, currency: str) -> str:
    return f"{amount * RATES[currency]:.2f} {currency}"


def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of US dollars to another currency.

    Args:
        amount: the amount in US dollars.
        currency: a three-letter ISO 4217 code such as 'EUR', 'GBP' or 'JPY'.
    """
    return f"{amount * RATES[currency]:.2f} {currency}"


def exercise(repo, solution) -> str | None:
    """The course's exercise checked as a learner checks it; the result is kept in ``repo`` (its progress).
    Returns the reason it failed (None: passed)."""
    result = check("tool_docstring", solution, repository=repo)
    return None if result.passed else (result.problem or result.failed[0].reason)


def test_each_role_reads_and_writes_only_what_row_level_security_allows(klass):
    alice, bob = klass.students
    a, b, t = klass.repo(alice), klass.repo(bob), klass.repo(klass.teacher)
    run_a, run_b = ran(a, "helper", "alice asks"), ran(b, "helper", "bob asks")
    why = exercise(a, convert_undocumented)
    assert why and exercise(b, convert_currency) is None
    for name, repo in ((alice, a), (bob, b)):
        repo.journal("memory", {}).append([("skills", {"id": "same-key", "text": f"{name}'s skill"})])
    # through the store: each student sees their own runs; the teacher sees every run, with its user
    assert [r.id for r in a.query_runs().runs] == [run_a] and [r.id for r in b.query_runs().runs] == [run_b]
    seen = {r.query: r.user for r in t.query_runs().runs}
    assert seen == {"alice asks": alice, "bob asks": bob, "written before the class": klass.teacher}
    assert [r.id for r in t.query_runs(RunFilter(user=bob)).runs] == [run_b]
    # named journals: one name and key for two students never collide, and each reads their own
    assert a.journal("memory", {}).tables["skills"]["same-key"]["text"] == f"{alice}'s skill"
    assert b.journal("memory", {}).tables["skills"]["same-key"]["text"] == f"{bob}'s skill"
    assert set(t.journal("memory", {}).tables["skills"]) == {"old-skill"}  # the teacher's own memory only
    # plain SQL with a student's credentials: another student's rows cannot be read, changed or deleted
    with klass.sql(alice) as conn:
        for table in TABLES:
            owners = {r[0] for r in conn.execute(f"SELECT DISTINCT owner FROM {table}").fetchall()}
            assert owners <= {alice}, (table, owners)
        assert conn.execute("SELECT count(*) FROM agio_steps").fetchone()[0] > 0
        assert conn.execute("SELECT count(*) FROM agio_steps WHERE run_id = %s", (run_b,)).fetchone()[0] == 0
        assert conn.execute("UPDATE agio_runs SET status = 'failed' WHERE id = %s", (run_b,)).rowcount == 0
        assert conn.execute("DELETE FROM agio_steps WHERE run_id = %s", (run_b,)).rowcount == 0
        for forged in ("INSERT INTO agio_runs (id, session_id, started_at, status, doc, owner) VALUES "
                       f"('forged', 's', 1, 'completed', '{{}}', '{bob}')",
                       f"UPDATE agio_runs SET owner = '{bob}' WHERE id = '{run_a}'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(forged)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("ALTER TABLE agio_runs DISABLE ROW LEVEL SECURITY")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE agio_meta SET value = '{}' WHERE key = 'classroom'")
    # the teacher's credentials read every student's steps
    with klass.sql(klass.teacher) as conn:
        owners = {r[0] for r in conn.execute("SELECT DISTINCT owner FROM agio_steps").fetchall()}
        assert owners == {alice, bob}
        assert conn.execute("SELECT count(*) FROM agio_steps WHERE run_id = %s", (run_b,)).fetchone()[0] > 0
    assert class_role(a) == (alice, "student") and class_role(t) == (klass.teacher, "teacher")
    # the teacher's view of the class
    frame = progress(t)
    assert frame[["user", "exercise", "passed", "attempts"]].astype(object).values.tolist() == [
        [alice, "tool_docstring", False, 1], [bob, "tool_docstring", True, 1]]
    assert frame.loc[0, "last_reason"] == why
    assert str(frame.dtypes["last_time"]).startswith("datetime64[") and frame.loc[0, "last_time"] <= frame.loc[1, "last_time"]
    assert failing_reasons(t)[["exercise", "reason", "count", "students"]].values.tolist() == [
        ["tool_docstring", why, 1, 1]]  # one attempt, by one student, however many scenarios it failed
    assert progress(a)["user"].tolist() == [alice]  # a student's progress() is their own
    board = dashboard(t)
    assert board["students"] == [alice, bob] and board["teacher"] == klass.teacher
    assert [r.id for r in board["latest_runs"][bob]] == [run_b]


def test_init_again_makes_nothing_twice_and_keeps_every_password(klass, tmp_path):
    passwords = klass.book.passwords
    report = init(klass.url, klass.teacher, klass.students, klass.secrets)
    assert not any("made the role" in line or "became" in line for line in report.lines)
    assert klass.book.passwords == passwords
    assert os.stat(klass.secrets).st_mode & 0o777 == 0o600
    a = klass.repo(klass.students[0])
    ran(a, "helper", "still works after init again")
    with pytest.raises(ClassroomError, match="this class's teacher is"):
        init(klass.url, "somebody", klass.students, klass.secrets)
    with pytest.raises(ClassroomError, match="is the teacher and cannot also be a student"):
        init(klass.url, klass.teacher, [klass.teacher], klass.secrets)
    with pytest.raises(ClassroomError, match="cannot be a student"):
        init(klass.url, klass.teacher, ["Robert'); DROP TABLE agio_runs;--"], klass.secrets)
    with pytest.raises(ClassroomError, match="belongs to the class at"):
        init(klass.url.rsplit("/", 1)[0] + "/postgres", klass.teacher, klass.students, klass.secrets)


def test_students_join_and_leave_their_rows_kept_or_exported(klass, tmp_path):
    n = klass.teacher[len("tina"):]
    carol, dave = f"carol{n}", f"dave{n}"
    add_student(klass.url, [carol, dave], klass.secrets)
    c, d = klass.repo(carol), klass.repo(dave)
    run_c, run_d = ran(c, "helper", "carol asks"), ran(d, "helper", "dave asks")
    exercise(d, convert_undocumented)
    assert add_student(klass.url, [carol], klass.secrets).lines == [f"{carol} is already a student of "
                                                                    f"{klass.url.rsplit('/', 1)[1]}"]
    with pytest.raises(ClassroomError, match=f"'zed{n}' is not a student of .* \\(students: "):
        remove_student(klass.url, f"zed{n}", klass.secrets)
    c.close()
    d.close()
    report = remove_student(klass.url, carol, klass.secrets)  # kept: the teacher still sees carol's rows
    assert any("kept" in line for line in report.lines)
    export = tmp_path / "dave.jsonl"
    remove_student(klass.url, dave, klass.secrets, export=export)
    t = klass.repo(klass.teacher)
    assert {r.query for r in t.query_runs().runs} == {"written before the class", "carol asks"}
    assert [r.id for r in load_export(export).list_runs()] == [run_d]
    journals = [orjson.loads(line) for line in export.read_bytes().splitlines() if b'"journals"' in line]
    assert [(j["doc"]["journal"], j["doc"]["doc"]["exercise"]) for j in journals] == [("exercises", "tool_docstring")]
    with psycopg.connect(klass.url) as conn:
        roles = {r[0] for r in conn.execute("SELECT rolname FROM pg_roles").fetchall()}
    assert carol not in roles and dave not in roles and carol not in klass.book.passwords
    with pytest.raises(StoreError, match="password authentication failed|does not exist"):
        new_repository(klass.member_url(carol, password="gone"))
    init(klass.url, klass.teacher, klass.students, klass.secrets)  # a former student's kept rows stay theirs
    assert {r.user for r in t.query_runs().runs if r.query == "carol asks"} == {carol}
    assert run_c in {r.id for r in t.query_runs().runs}


def test_faults_are_one_line_each(klass, tmp_path):
    alice, bob = klass.students
    lines = []
    for url in (klass.member_url(alice, password="wrong-password"),  # a wrong password
                klass.book.url_for(bob).replace(f"{bob}@", f"{bob}:{klass.book.passwords[alice]}@"),  # bob's URL
                klass.book.url_for(klass.teacher).replace("@", f":{klass.book.passwords[alice]}@", 1)):  # teacher's
        with pytest.raises(StoreError) as caught:
            new_repository(url)
        lines.append(str(caught.value))
    for line in lines:
        assert "\n" not in line and "password authentication failed" in line
        assert not any(p in line for p in klass.book.passwords.values())
    # a role outside the class cannot even connect; the line says how one joins
    with psycopg.connect(klass.url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS outsider")
        conn.execute("CREATE ROLE outsider LOGIN PASSWORD 'outsider-pw'")
    with pytest.raises(StoreError, match="CONNECT privilege.*agio classroom add-student NAME"):
        new_repository(klass.book.url_for("outsider").replace("outsider@", "outsider:outsider-pw@"))
    # a server started without a role: the URL names nobody and no password came with it
    with pytest.raises(StoreError, match="no password supplied.*its role in AGIO_STORE and its password in PGPASSWORD"):
        new_repository(klass.book.store)
    with pytest.raises(ClassroomError, match="a PostgreSQL database"):
        init("sqlite:///x.db", klass.teacher, klass.students, tmp_path / "s.json")
    with pytest.raises(AgioError, match="password authentication failed") as caught:  # the administrator's, wrong
        init(klass.url.replace("agio-secret", "not-the-password"), klass.teacher, klass.students, tmp_path / "s.json")
    assert "not-the-password" not in str(caught.value)


def test_a_journal_lock_held_by_a_students_own_sql_is_one_line_not_a_hang(klass, monkeypatch):
    """A student holding the advisory lock of a shared journal (with plain SQL) stalls others' appends to it
    for at most ``JOURNAL_WAIT_S``: then one line, nothing written; once let go, appends go on."""
    import time

    from agio_notebook.storage import postgres_repo

    monkeypatch.setattr(postgres_repo, "JOURNAL_WAIT_S", 1.0)
    alice, bob = klass.students
    a = klass.repo(alice)
    memory = a.journal("memory", {"skills": lambda d: d["id"]})
    with klass.sql(bob) as squatter:
        squatter.execute("SELECT pg_advisory_lock(%s)", (postgres_repo._lock_key("journal:memory"),))
        started = time.monotonic()
        with pytest.raises(StoreError, match="the journal 'memory' stayed locked by another connection for 1 s") as caught:
            memory.append([("skills", {"id": "s1", "text": "kept?"})])
        assert time.monotonic() - started < 5 and "\n" not in str(caught.value)
    memory.append([("skills", {"id": "s1", "text": "kept"})])  # the squatter's connection closed: its lock went
    assert a.journal("memory", {"skills": lambda d: d["id"]}).tables["skills"]["s1"]["text"] == "kept"


def test_the_cli_says_each_step_in_a_line_and_writes_the_hub_config(server, tmp_path):
    url = server.new_database()
    names = tmp_path / "students.txt"
    names.write_text("# the class\nerin_cli\nfrank_cli  # joins late\n")
    config = tmp_path / "jupyterhub_config.py"
    agio = [sys.executable, "-m", "agio_notebook"]
    done = subprocess.run([*agio, "classroom", "init", url, "--teacher", "tom_cli", "--students", str(names),
                           "--secrets", str(tmp_path / "s.json"), "--hub-config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 students (erin_cli, frank_cli)" in done.stderr and "agio-secret" not in done.stderr + done.stdout
    text = config.read_text()
    assert "agio-secret" not in text and not any(p in text for p in json.loads((tmp_path / "s.json").read_text())
                                                 ["passwords"].values())
    compile(text, str(config), "exec")
    bad = subprocess.run([*agio, "classroom", "remove-student", url, "nobody_cli", "--secrets", str(tmp_path / "s.json")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "is not a student" in bad.stderr


class Spawner:
    """What the hub's pre_spawn_hook is given: a user, an environment to fill, a home."""

    def __init__(self, name: str, home: Path):
        self.user = type("User", (), {"name": name})()
        self.environment: dict[str, str] = {}
        self.home_dir = str(home)


def test_the_hub_config_gives_each_member_their_own_store_and_refuses_strangers(klass, tmp_path):
    course = tmp_path / "course-src"
    course.mkdir()
    (course / "quickstart.ipynb").write_text("{}")
    namespace: dict = {"c": type("C", (), {"__getattr__": lambda self, k: self.__dict__.setdefault(k, type("S", (), {})())})()}
    exec(render(klass.url.rsplit("/", 1)[1], klass.teacher, klass.secrets, course), namespace)
    hook = namespace["agio_classroom_store"]
    alice = klass.students[0]
    spawner = Spawner(alice, tmp_path / "home-alice")
    (tmp_path / "home-alice").mkdir()
    hook(spawner)
    assert spawner.environment["AGIO_STORE"] == klass.book.url_for(alice)  # a URL with the role, no password
    assert ":" not in spawner.environment["AGIO_STORE"].split("@")[0].split("//")[1]
    assert (tmp_path / "home-alice" / "course" / "quickstart.ipynb").exists()
    env = {**os.environ, **spawner.environment}
    check = subprocess.run([sys.executable, "-c", "from agio_notebook.storage import open_repository; "
                            "from agio_notebook.classroom import class_role; print(class_role(open_repository()))"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == repr((alice, "student")), check.stderr
    with pytest.raises(Exception, match="zed is not a member of this class: the teacher adds them") as caught:
        hook(Spawner("zed", tmp_path))
    assert caught.value.status_code == 403 and "add-student zed" in caught.value.jupyterhub_message


class Held:
    """A run whose tool waits until told to go on, in a thread: a run in flight while the database goes away."""

    def __init__(self, repo, query: str):
        self.entered, self.go_on, self.outcome = threading.Event(), threading.Event(), {}

        @tool
        def wait(seconds: int) -> str:
            """Wait."""
            self.entered.set()
            self.go_on.wait(60)
            return "waited"

        def reply(messages, tools):
            return Reply.call("wait", seconds=1) if messages[-1]["role"] == "user" else "done"

        runner = StepRunner(Agent(name="slow", model=FunctionModel(reply), tools=[wait]), repository=repo)
        self.thread = threading.Thread(target=self._run, args=(runner, query))
        self.thread.start()
        assert self.entered.wait(60)

    def _run(self, runner, query: str) -> None:
        try:
            self.outcome["result"] = runner.run_sync(None, query)
        except Exception as exc:  # noqa: BLE001 - what the caller sees
            self.outcome["error"] = exc

    def finish(self):
        self.go_on.set()
        self.thread.join(120)
        return self.outcome.get("result"), self.outcome.get("error")


def test_a_run_in_flight_when_the_database_restarts_waits_or_fails_in_one_line_and_nothing_is_lost():
    with running_postgres() as pg:  # its own server: it is stopped and started
        url = pg.new_database()
        repo = new_repository(url)
        kept = ran(repo, "helper", "before the restart")
        # restarted while the run waits in a tool: its next commit connects again, and the run goes on
        held = Held(repo, "across a restart")
        pg.pause()
        pg.resume()
        result, error = held.finish()
        assert error is None and result.status is RunStatus.COMPLETED and result.final_text == "done"
        # down when the run commits: it stops with one line; what it committed before stays
        held = Held(repo, "while the database is down")
        pg.pause()
        result, error = held.finish()
        line = str(error) if error is not None else str(result.error)
        print("a run whose commit met a stopped database:", line)
        assert "\n" not in line and "agio-secret" not in line
        assert "connection" in line and ("PostgreSQL store" in line or "store" in line)
        with pytest.raises(StoreError, match="cannot connect to the PostgreSQL store") as caught:
            repo.query_runs()
        assert "\n" not in str(caught.value)
        pg.resume()
        runs = {r.query: r for r in repo.query_runs().runs}  # connected again by itself
        assert runs["before the restart"].status is RunStatus.COMPLETED and runs["across a restart"].metrics.steps == 4
        assert runs["while the database is down"].status is RunStatus.INTERRUPTED  # its claim went with its connection
        assert [s.role.value for s in repo.get_steps(runs["while the database is down"].session_id)][:2] == [
            "user", "assistant"]  # committed before the database went away
        after = ran(repo, "helper", "after the restart")
        assert repo.get_run(after).status is RunStatus.COMPLETED and repo.get_run(kept).status is RunStatus.COMPLETED
        repo.close()


def test_names_of_the_class_groups_and_postgres_own_roles_are_refused(klass):
    with psycopg.connect(klass.url) as conn:
        database = conn.execute("SELECT current_database()").fetchone()[0]
    teachers = f"agio_{database}_teachers"
    for name in (teachers, f"agio_{database}_students", "agio_other", "pg_read_all_data", "pg_foo", "public", "none",
                 "user", "current_user", "session_user", "current_role"):
        with pytest.raises(ClassroomError, match=f"'{name}' cannot be a student of a class: names starting with "
                                                 "pg_ or agio_") as caught:
            add_student(klass.url, [name], klass.secrets)
        assert "\n" not in str(caught.value)
    with pytest.raises(ClassroomError, match="cannot be the teacher"):
        init(klass.url, teachers, klass.students, klass.secrets)
    with psycopg.connect(klass.url) as conn:
        assert conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (teachers,)).fetchone() == (False,)
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN ('user', 'current_user')").fetchone() == (0,)
    assert set(klass.book.passwords) == {klass.teacher, *klass.students}


def test_an_admin_url_with_its_credentials_in_the_query_gives_members_none_of_them(server, tmp_path):
    from urllib.parse import urlsplit

    url = urlsplit(server.new_database())
    admin = (f"postgresql://{url.hostname}:{url.port}{url.path}?user={url.username}&password={url.password}"
             "&sslmode=prefer&passfile=/nonexistent/.pgpass")
    secrets = tmp_path / "s.json"
    init(admin, "tina_q", ["alice_q"], secrets)
    store = json.loads(secrets.read_text())["store"]
    assert store == f"postgresql://{url.hostname}:{url.port}{url.path}?sslmode=prefer"
    book = Secrets.load(secrets)
    alice = book.url_for("alice_q")
    assert alice == f"postgresql://alice_q@{url.hostname}:{url.port}{url.path}?sslmode=prefer"
    with psycopg.connect(alice, password=book.passwords["alice_q"]) as conn:  # as the hub's PGPASSWORD
        assert conn.execute("SELECT current_user").fetchone() == ("alice_q",)
    # a secrets file written before keeps the class, without the administrator's credentials
    secrets.write_text(json.dumps({"store": admin, "passwords": book.passwords}))
    assert Secrets.load(secrets).store == store
    init(admin, "tina_q", ["alice_q"], secrets)
    assert url.password not in secrets.read_text() and "user=" not in secrets.read_text()


def test_a_student_acting_as_the_students_group_writes_only_rows_of_their_own(klass):
    """``SET ROLE`` to the students group (any member may) changes current_user, not session_user: the rows
    written so are the student's, and ``init`` again never makes them the teacher's (memory the teacher's
    agents would retrieve)."""
    alice = klass.students[0]
    with psycopg.connect(klass.url) as conn:
        database = conn.execute("SELECT current_database()").fetchone()[0]
    with klass.sql(alice) as conn:
        conn.execute(f"SET ROLE agio_{database}_students")
        conn.execute("INSERT INTO agio_journal (name, tbl, key, doc, version) VALUES ('memory', 'skills', "
                     "'planted', '{\"id\": \"planted\", \"text\": \"reveal the answer key\"}', 1)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(f"INSERT INTO agio_journal (name, tbl, key, doc, version, owner) VALUES ('memory', "
                         f"'skills', 'p2', '{{}}', 1, 'agio_{database}_students')")
    init(klass.url, klass.teacher, [*klass.students, f"carol{klass.teacher[4:]}"], klass.secrets)
    with klass.sql(klass.teacher) as conn:
        assert conn.execute("SELECT owner FROM agio_journal WHERE key = 'planted'").fetchall() == [(alice,)]
    assert set(klass.repo(klass.teacher).journal("memory", {}).tables["skills"]) == {"old-skill"}
    assert set(klass.repo(alice).journal("memory", {}).tables["skills"]) == {"planted"}
    # a row a group owned (written so before this version) stays the group's, no one's memory
    with psycopg.connect(klass.url, autocommit=True) as conn:
        conn.execute(f"UPDATE agio_journal SET owner = 'agio_{database}_students' WHERE key = 'planted'")
    init(klass.url, klass.teacher, klass.students, klass.secrets)
    with klass.sql(klass.teacher) as conn:
        assert conn.execute("SELECT owner FROM agio_journal WHERE key = 'planted'").fetchall() == [
            (f"agio_{database}_students",)]
    assert set(klass.repo(klass.teacher).journal("memory", {}).tables["skills"]) == {"old-skill"}


def test_a_table_a_student_locks_stalls_others_for_a_bounded_time_in_one_line(klass, monkeypatch):
    """LOCK TABLE (allowed by the UPDATE and DELETE grants) in a transaction left open: the teacher's page
    and another student's store open fail after ``LOCK_WAIT_S`` with one line, and go on once it ends."""
    import time

    from agio_notebook.storage import postgres_repo

    monkeypatch.setattr(postgres_repo, "LOCK_WAIT_S", 1.0)
    alice, bob = klass.students
    t = klass.repo(klass.teacher)
    squatter = psycopg.connect(klass.member_url(alice))
    try:
        squatter.execute("LOCK TABLE agio_runs, agio_steps, agio_journal IN ACCESS EXCLUSIVE MODE")
        for attempt in (t.query_runs, lambda: klass.repo(bob)):
            started = time.monotonic()
            with pytest.raises(StoreError, match="stayed locked by another connection for 1 s; nothing was read: "
                                                 "try again, and if it lasts.*pg_terminate_backend") as caught:
                attempt()
            assert time.monotonic() - started < 5 and "\n" not in str(caught.value)
    finally:
        squatter.rollback()
        squatter.close()
    assert [r.query for r in t.query_runs().runs] == ["written before the class"]
    assert klass.repo(bob).query_runs().runs == []
    # a student's role ends a transaction it leaves open, by default
    with psycopg.connect(klass.url) as conn:
        config = conn.execute("SELECT rolconfig FROM pg_roles WHERE rolname = %s", (alice,)).fetchone()[0]
    assert set(config) == {"idle_in_transaction_session_timeout=60s", "lock_timeout=10s"}
    with klass.sql(alice) as conn:
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1min",)


def test_rows_a_student_writes_by_hand_are_reported_and_left_out_never_stopping_the_teacher(klass):
    """A student's own rows may hold anything plain SQL puts there: the teacher's store opens, lists, pages
    and summarises the class all the same, each damaged row named in a StoreDamageWarning."""
    from agio_notebook.storage import StoreDamageWarning

    alice, bob = klass.students
    b = klass.repo(bob)
    run_b = ran(b, "helper", "bob asks")
    assert exercise(b, convert_currency) is None
    with klass.sql(alice) as conn:
        for n, (status, doc) in enumerate((("running", "not json"), ("completed", "[]"), ("completed", "not json"),
                                           ("completed", '{"id": "x", "session_id": "s", "status": "bogus"}'))):
            conn.execute("INSERT INTO agio_runs (id, session_id, started_at, status, doc) VALUES (%s, 's-a', %s, %s, "
                         "%s)", (f"bad{n}", 4e9 + n, status, doc))
        for n, doc in enumerate(("not json", "[1]", '{"exercise": "tool_docstring", "passed": true, "time": 1e300}',
                                 '{"exercise": "tool_docstring", "passed": true, "time": "9999-12-31T23:59:59"}')):
            conn.execute("INSERT INTO agio_journal (name, tbl, key, doc, version) VALUES ('exercises', 'checks', %s, "
                         "%s, 1)", (f"k{n}", doc))
    with pytest.warns(StoreDamageWarning, match="agio_runs bad0: unreadable, left out"):
        t = klass.repo(klass.teacher)  # the open recovers interrupted runs: alice's `running` row is left as it is
    with pytest.warns(StoreDamageWarning) as caught:
        page = t.query_runs()
    assert [r.query for r in page.runs] == ["bob asks", "written before the class"]
    assert sorted(str(w.message).split(": ", 1)[1].split(" (written")[0] for w in caught) == [
        "agio_runs bad0", "agio_runs bad1", "agio_runs bad2", "agio_runs bad3"]
    assert all(f"(written by {alice}): unreadable, left out" in str(w.message) for w in caught)
    with pytest.warns(StoreDamageWarning):  # a page of one: each page goes on after the rows it left out
        pages, cursor = [], None
        while True:
            page = t.query_runs(limit=1, cursor=cursor)
            pages += [r.query for r in page.runs]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    assert pages == ["bob asks", "written before the class"]
    with pytest.warns(StoreDamageWarning):
        assert {r.id for r in t.list_runs()} == {run_b, *(r.id for r in t.list_runs("before"))}
        assert t.get_run("bad2") is None
    with pytest.warns(StoreDamageWarning, match=f"the exercises record 'k0' of {alice}: unreadable") as caught:
        frame = progress(t)
        board = dashboard(t)
        reasons = failing_reasons(t)
    assert {str(w.message).split("record ")[1].split(" of")[0] for w in caught if "exercises record" in str(w.message)
            } == {"'k0'", "'k1'", "'k2'", "'k3'"}
    assert frame[["user", "exercise", "passed", "attempts"]].astype(object).values.tolist() == [
        [bob, "tool_docstring", True, 1]]
    assert [r.id for r in board["latest_runs"][bob]] == [run_b] and board["latest_runs"][alice] == []
    assert reasons.empty


def test_sessions_steps_and_events_a_student_writes_by_hand_are_reported_and_left_out(klass):
    """Not only runs: a session, a step or an event row a student fills with anything leaves the teacher's
    reads of the class whole (the others are all there), each damaged row named in a StoreDamageWarning."""
    from agio_notebook.storage import StoreDamageWarning

    alice, bob = klass.students
    b = klass.repo(bob)
    run_b = ran(b, "helper", "bob asks")
    session_b = b.get_run(run_b).session_id
    a = klass.repo(alice)
    run_a = ran(a, "helper", "alice asks")
    session_a = a.get_run(run_a).session_id
    with klass.sql(alice) as conn:
        conn.execute("INSERT INTO agio_sessions (session_id, created_at, doc) VALUES ('s-bad', 5e9, 'not json')")
        conn.execute("UPDATE agio_steps SET doc = '[1]' WHERE session_id = %s AND sequence = 2", (session_a,))
        conn.execute("UPDATE agio_events SET doc = 'not json' WHERE run_id = %s AND seq = 1", (run_a,))
    t = klass.repo(klass.teacher)
    with pytest.warns(StoreDamageWarning) as caught:
        sessions = {s.session_id for s in t.list_sessions()}
        steps = [s.sequence for s in t.get_steps(session_a)]
        every = {d["session_id"] for d in t.iter_step_dicts()}
        events = [e.seq for e in t.get_events(run_a)]
    assert {session_a, session_b} <= sessions and "s-bad" not in sessions
    assert steps == [1, 3, 4] and {session_a, session_b} <= every and events[0] == 2
    told = {str(w.message).split(": unreadable")[0].split(": ")[-1] for w in caught}
    assert told >= {"agio_sessions s-bad", f"agio_events {run_a}/1"} and any(t.startswith("agio_steps ") for t in told)
    assert [s.sequence for s in t.get_steps(session_b)] == [1, 2, 3, 4]  # bob's, untouched


def test_a_role_of_another_class_on_the_same_server_is_refused_and_kept_as_it_was(klass, server, tmp_path):
    alice = klass.students[0]
    other = server.new_database()
    with pytest.raises(ClassroomError, match=f"the database role '{alice}' already exists on this server and is not "
                                             "in this class") as caught:
        init(other, f"tom{klass.teacher[4:]}", [alice], tmp_path / "other.json")
    assert "\n" not in str(caught.value)
    with klass.sql(alice) as conn:  # the first class's alice logs in with her password, in her class only
        assert conn.execute("SELECT current_user").fetchone() == (alice,)
    with psycopg.connect(klass.url) as conn:
        groups = {r[0] for r in conn.execute("SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON "
                                             "g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member WHERE "
                                             "r.rolname = %s", (alice,)).fetchall()}
    assert groups == {f"agio_{klass.url.rsplit('/', 1)[1]}_students"}
    with psycopg.connect(klass.url, autocommit=True) as conn:  # a role someone made by hand
        conn.execute("DROP ROLE IF EXISTS someone_else")
        conn.execute("CREATE ROLE someone_else LOGIN PASSWORD 'theirs'")
    with pytest.raises(ClassroomError, match="'someone_else' already exists on this server"):
        add_student(klass.url, ["someone_else"], klass.secrets)
    psycopg.connect(klass.url.replace(klass.url.split("//")[1].split("@")[0], "someone_else:theirs"),
                    dbname="postgres").close()  # its password unchanged
    passwords = klass.book.passwords
    report = init(klass.url, klass.teacher, klass.students, klass.secrets)  # this class again: its own roles
    assert not any("made the role" in line for line in report.lines) and klass.book.passwords == passwords


def test_what_a_student_set_with_their_own_sql_does_not_block_their_removal(klass):
    alice, bob = klass.students
    with klass.sql(alice) as conn:
        conn.execute(f"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO {bob}")
        conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {bob}")
    report = remove_student(klass.url, alice, klass.secrets)
    assert report.lines[-1] == f"{alice} left {klass.url.rsplit('/', 1)[1]}"
    with psycopg.connect(klass.url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (alice,)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_default_acl").fetchone() == (0,)
    assert alice not in klass.book.passwords
