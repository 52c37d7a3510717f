"""The three store backends for parameterised tests: TinyDB files, a SQLite file, and a real PostgreSQL
server (Debian's `postgresql`, installed by scripts/setup.sh) started in a temporary directory on a
loopback port.  Every store test that takes the ``store_url`` fixture runs once per backend."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from agio_notebook.toolkits.workspace import reachable_temp_dir
from lab_support import free_port

BACKENDS = ("tinydb", "sqlite", "postgres")


def _pg_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert found, "PostgreSQL is missing: scripts/setup.sh installs Debian's postgresql"
    return found[-1].parent


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root (CI's user): run its programs as the `postgres` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


class PostgresServer:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.data = workdir / "data"
        self._names = itertools.count(1)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://agio:agio-secret@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        bin_dir = _pg_bin()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "postgres", "postgres")
        pwfile = self.workdir / "pw"
        pwfile.write_text("agio-secret\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres", "postgres")
        subprocess.run(_as_postgres([str(bin_dir / "initdb"), "-D", str(self.data), "-U", "agio", "-A",
                                     "scram-sha-256", f"--pwfile={pwfile}", "--no-sync"]),
                       check=True, capture_output=True)
        self._launch()

    def _launch(self) -> None:
        subprocess.run(_as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-l", str(self.workdir / "log"),
                                     "-o", f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 "
                                           "-c fsync=on", "-w", "-t", "120", "start"]),
                       check=True, capture_output=True)

    def pause(self) -> None:
        """Stop the server as an administrator would (its sessions are ended); ``resume`` starts it again on
        the same port and data."""
        subprocess.run(_as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                       check=True, capture_output=True)

    def resume(self) -> None:
        self._launch()

    def new_database(self) -> str:
        """A fresh, empty database on this server; returns its URL."""
        import psycopg

        name = f"agio_test_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(_as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                       capture_output=True)


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    # not under pytest's tmp_path, nor under a private TMPDIR: the server runs as `postgres` when the
    # tests run as root, and must be able to walk to its data directory
    workdir = Path(tempfile.mkdtemp(prefix="agio-pg-", dir=reachable_temp_dir()))
    server = PostgresServer(workdir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def store_url(backend: str, tmp_path: Path, postgres: PostgresServer | None) -> str:
    """A new, empty store of ``backend``, named as AGIO_STORE would name it."""
    if backend == "tinydb":
        return str(tmp_path / "store")
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'agio.db'}"
    assert postgres is not None
    return postgres.new_database()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)
