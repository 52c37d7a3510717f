"""The Runs panel's question to a store of 100,000 runs: a page of the newest runs, filtered by the store.

For each backend (TinyDB files, SQLite, PostgreSQL on loopback, started here as in the tests) the store is
filled with N runs (1,000 sessions, 10 agents, 20 notebooks, 1% failed, a rare word in 0.5% of the
queries), then one page of 50 is asked through ``Repository.query_runs``: unfiltered, the next page (a
cursor), by agent, by status (failed), by notebook, by text (the rare word), median of 20 after a first
ask. Beside it the way it was done before: every run read (``list_runs``), filtered and sorted in Python.
"open + 1st page" times a new repository on the filled store: on TinyDB once without its run query snapshot
on disk (it reads the whole run index, and writes one, ``storage/run_index_file.py``), then with it.

Last, what the Runs panel waits for: the first page over HTTP from a real Jupyter server that has just started
(goal: <= 200 ms). The page is asked the moment the server answers (``/api/status``): "first ask" is that
ask's time, "warm" the median of 20 after it. Each server is started twice: on the store as filled (the first
server ever to read it), then again after another process has written 500 more runs and closed the store (a
TinyDB store compacted first: its run index is another file then, the snapshot carried along). "new process"
is what a request that came before the server's worker had opened the store would wait for at most: a new
Python process importing the storage, opening the store and asking the page (timed inside it). With ``--against DIR`` (another checkout of the project, e.g. the
commit before a change) its servers are started too, on copies of the store, in turn with this tree's,
``--rounds`` times; the table gives the median of each and the ratio.

    .venv/bin/python bench/runs_panel_bench.py [--runs 100000] [--backends tinydb sqlite postgres] \
        [--against DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agio_notebook.core import AgentRun, RunStatus
from agio_notebook.storage import RunFilter, new_repository

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

PAGE = 50
ASKS = 20
LATER = 500  # runs another process writes between the two starts of a server


def make_runs(n: int, start: int = 0) -> list[AgentRun]:
    runs = []
    for i in range(start, start + n):
        query = f"question {i} about {'zanzibar' if i % 200 == 7 else 'the weather'}"
        runs.append(AgentRun(session_id=f"session-{i % 1000}", query=query, agent_name=f"agent{i % 10}",
                             status=RunStatus.FAILED if i % 100 == 3 else RunStatus.COMPLETED,
                             notebook=f"lesson{i % 20}.ipynb", final_text=f"answer {i}", started_at=1.7e9 + i,
                             ended_at=1.7e9 + i + 0.5))
    return runs


def fill(repo, runs: list[AgentRun]) -> None:
    group = getattr(repo, "commit_group", None)
    for start in range(0, len(runs), 1000):
        chunk = [{"run": r} for r in runs[start:start + 1000]]
        if group is not None:
            group(chunk)
        else:
            for commit in chunk:
                repo.commit(**commit)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def median_ms(fn) -> float:
    fn()  # warm: caches, the index, the statement
    return statistics.median(timed(fn) for _ in range(ASKS))


def in_python(repo, where: RunFilter) -> list[AgentRun]:
    """Before the query: every run read, then filtered and sorted here."""
    runs = [r for r in repo.list_runs() if where.matches(r.to_dict())]
    runs.sort(key=lambda r: (r.started_at, r.id), reverse=True)
    return runs[:PAGE]


CASES = [("newest", RunFilter()), ("by agent", RunFilter(agent="agent3")), ("failed", RunFilter(status="failed")),
         ("by notebook", RunFilter(notebook="lesson7.ipynb")), ("text 'zanzibar'", RunFilter(text="zanzibar"))]


def load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


# -- the panel's first page from a Jupyter server that has just started -----------------------------------
def served(tree: Path, target: str, workdir: Path) -> tuple[float, float, float]:
    """A Jupyter server running ``tree``'s code on the store: (s from its start to answering, ms of the panel's
    first page asked at that moment, ms median of ASKS after it)."""
    import urllib.request

    from lab_support import running_lab

    root = workdir / f"served-{time.monotonic_ns()}"
    root.mkdir()
    env = {**os.environ, "AGIO_STORE": target, "PYTHONPATH": str(tree)}
    here = os.getcwd()
    os.chdir(tree)  # the server's ``python -m`` puts its working directory first on its path
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.callback(os.chdir, here)
        base, token = stack.enter_context(running_lab(root, env))
        ready = time.perf_counter() - started
        url = f"{base}/agio/api/runs?limit={PAGE}&token={token}"
        first = timed(lambda: urllib.request.urlopen(url).read())
        warm = median_ms(lambda: urllib.request.urlopen(url).read())
    shutil.rmtree(root, ignore_errors=True)
    return ready, first, warm


NEW_PROCESS = """
import sys, time
t0 = time.perf_counter()
from agio_notebook.storage import new_repository
repo = new_repository(sys.argv[1])
repo.query_runs(limit=50)
print((time.perf_counter() - t0) * 1000)
"""


def new_process(tree: Path, target: str) -> float:
    """ms for a new process running ``tree``'s code to import the storage, open the store and ask the page."""
    done = subprocess.run([sys.executable, "-c", NEW_PROCESS, target], check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    return float(done.stdout.split()[-1])


def write_later(tree: Path, target: str, start: int) -> None:
    """Another process (``tree``'s code) writes LATER runs and closes the store (a TinyDB one compacted first)."""
    code = (f"import sys; sys.path.insert(0, {str(HERE / 'bench')!r})\n"
            "from runs_panel_bench import fill, make_runs\n"
            "from agio_notebook.storage import new_repository\n"
            f"repo = new_repository({target!r}); fill(repo, make_runs({LATER}, {start}))\n"
            "from agio_notebook.storage import TinyDBRepository\n"
            "if isinstance(repo, TinyDBRepository): repo.compact()\n"
            "repo.close()\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)


def copy_store(backend: str, target: str, dest: Path, server) -> str:
    """A copy of a filled store, for one tree's servers (PostgreSQL: a database made from it as a template)."""
    if backend == "postgres":
        import psycopg

        source = target.rsplit("/", 1)[1]
        name = f"{source}_{dest.name}"
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {source}")
        return server.url(name)
    if backend == "sqlite":
        path = Path(target[len("sqlite:///"):])
        dest.mkdir()
        for part in path.parent.glob(path.name + "*"):
            shutil.copy2(part, dest / part.name)
        return f"sqlite:///{dest / path.name}"
    shutil.copytree(target, dest)
    return str(dest)


def servers(backend: str, target: str, workdir: Path, trees: dict[str, Path], rounds: int, runs: int,
            server) -> None:
    """Each tree's servers, in turn, ``rounds`` times: this tree's on the store itself, another's on a copy made
    for each round (a copied TinyDB store reads its whole run index once, its snapshot being another file's)."""
    figures: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for r in range(rounds):
        for label, tree in trees.items():
            copy = target if tree == HERE else copy_store(backend, target, workdir / f"copy{r}", server)
            figures.setdefault((label, "first server"), []).append(served(tree, copy, workdir))
            write_later(tree, copy, runs + r * LATER)
            figures.setdefault((label, f"restarted, {LATER} runs since"), []).append(
                (*served(tree, copy, workdir), new_process(tree, copy)))
        print(f"  ({backend}: round {r + 1} of {rounds} done, {load()})", flush=True)
    medians = {key: [statistics.median(f[i] for f in got) for i in range(len(got[0]))] for key, got in figures.items()}
    for (label, case), (ready, first, warm, *fresh) in medians.items():
        ratio = ""
        if label != "this tree":
            mine = medians.get(("this tree", case))
            ratio = f"{first / mine[1]:.1f}x" + (f", {fresh[0] / mine[3]:.1f}x" if fresh else "") if mine else ""
        process = f"{fresh[0]:11.0f}" if fresh else " " * 11
        print(f"{backend:<9} {label + ': ' + case:<44} {first:11.0f} {warm:9.1f} {ready:9.1f} {process}   {ratio}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--backends", nargs="+", default=["tinydb", "sqlite", "postgres"])
    ap.add_argument("--against", type=Path, help="another checkout of the project, its servers timed in turn")
    ap.add_argument("--rounds", type=int, default=3, help="starts of each server, in turn")
    ap.add_argument("--servers-only", action="store_true", help="only the Jupyter servers' first pages")
    args = ap.parse_args()
    trees = {"this tree": HERE, **({f"against {args.against.name}": args.against.resolve()} if args.against else {})}
    runs = make_runs(args.runs)
    print(f"{load()} at the start")
    print(f"{args.runs:,} runs, pages of {PAGE}, median of {ASKS} asks (ms)\n")
    for backend in args.backends:
        workdir = Path(tempfile.mkdtemp(prefix="agio_runsbench_"))
        with contextlib.ExitStack() as stack:
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            server = None
            if backend == "postgres":
                from store_backends import running_postgres

                server = stack.enter_context(running_postgres())
                target = server.new_database()
            elif backend == "sqlite":
                target = f"sqlite:///{workdir}/agio.db"
            else:
                target = str(workdir / "store")
            repo = new_repository(target)
            t0 = time.perf_counter()
            fill(repo, runs)
            filled = time.perf_counter() - t0
            repo.close()
            if not args.servers_only:
                in_process(backend, target, filled)
            print(f"{'backend':<9} {'Jupyter server':<44} {'first ask':>11} {'warm':>9} {'ready (s)':>9} "
                  f"{'new process':>11}   ratio   ({load()})")
            servers(backend, target, workdir, trees, args.rounds, args.runs, server)
            print()


def in_process(backend: str, target: str, filled: float) -> None:
    print(f"{'backend':<9} {'page':<17} {'query_runs':>11} {'in Python':>10} {'ratio':>7}   ({load()})")
    snapshot = Path(target) / "index.runs.sqlite"
    if backend == "tinydb":
        snapshot.unlink()  # (the filling process's close made one)
    fresh = new_repository(target)
    cold = timed(lambda: fresh.query_runs(limit=PAGE))
    fresh.close()
    fresh = new_repository(target)
    again = timed(lambda: fresh.query_runs(limit=PAGE))
    fresh.close()
    repo = new_repository(target)
    for name, where in CASES:
        page = repo.query_runs(where, limit=PAGE)
        assert [r.id for r in page.runs] == [r.id for r in in_python(repo, where)], (backend, name)
        fast = median_ms(lambda: repo.query_runs(where, limit=PAGE))
        slow = median_ms(lambda: in_python(repo, where)) if name in ("newest", "text 'zanzibar'") else None
        ratio = f"{slow / fast:6.0f}x" if slow else ""
        print(f"{backend:<9} {name:<17} {fast:11.2f} {slow if slow else '':>10.6} {ratio:>7}", flush=True)
    second = repo.query_runs(limit=PAGE).next_cursor
    print(f"{backend:<9} {'next page':<17} {median_ms(lambda: repo.query_runs(limit=PAGE, cursor=second)):11.2f}")
    repo.close()
    print(f"{backend:<9} {'open + 1st page':<17} {cold:11.1f}   (filled in {filled:.1f} s); again: {again:.1f}"
          + (" (without, then with the snapshot on disk)" if backend == "tinydb" else ""), flush=True)


if __name__ == "__main__":
    main()
