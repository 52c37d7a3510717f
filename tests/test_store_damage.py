"""Every kind of damage is reported by every read path, with the file's name; every other session is
still read; `agio store verify` finds it and `agio store repair` salvages it beside the original."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, frames, tool
from agio_notebook.core import RunStatus
from agio_notebook.notebook.transcript import bundle_for_run
from agio_notebook.storage import StoreDamageWarning, TinyDBRepository, iter_events

DAMAGE = ["garbage line", "cut mid-way", "snapshot cut"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agio(*args, store):
    return subprocess.run([sys.executable, "-m", "agio_notebook", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=120)


def build(root: Path) -> dict[str, str]:
    repo = TinyDBRepository(root)
    run_ids = {}
    for session in ("good", "bad"):
        model = ScriptedModel([Reply.call("add", a=1, b=2), "three", Reply.call("add", a=3, b=4), "seven"])
        runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
        run_ids[session] = runner.run_sync(session, "first").run_id
        runner.run_sync(session, "second")
    repo.close()
    return run_ids


def damage(root: Path, kind: str) -> Path:
    path = root / "sessions" / "bad.jsonl"
    if kind == "snapshot cut":
        repo = TinyDBRepository(root)
        repo.compact()
        repo.close()
        assert path.read_bytes().count(b"\n") == 1
    data = path.read_bytes()
    if kind == "garbage line":
        lines = data.split(b"\n")
        lines.insert(len(lines) // 2, b"this line is not json {{{")
        path.write_bytes(b"\n".join(lines))
    else:  # cut mid-way: inside a record (for a compacted file, inside its one snapshot line)
        path.write_bytes(data[: int(len(data) * 0.6)])
    return path


@pytest.fixture(params=DAMAGE)
def damaged(request, tmp_path):
    root = tmp_path / "store"
    run_ids = build(root)
    full = len(TinyDBRepository(root).get_steps("good"))
    path = damage(root, request.param)
    return root, run_ids, full, path, request.param


def warned(caught, path: Path) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, StoreDamageWarning) and str(path) in str(w.message)]


def test_single_session_reads_warn_and_read_the_rest(damaged):
    root, run_ids, full, path, kind = damaged
    repo = TinyDBRepository(root)
    with pytest.warns(StoreDamageWarning, match=f"{path}"):
        bad = repo.get_steps("bad")
    assert 0 < len(bad) <= full
    if kind == "garbage line":
        assert len(bad) == full  # only the garbage is skipped
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreDamageWarning)
        assert len(repo.get_steps("good")) == full


def test_frames_over_all_sessions_warn_and_read_every_other_session(damaged):
    root, run_ids, full, path, kind = damaged
    with pytest.warns(StoreDamageWarning) as caught:
        df = frames.steps(repository=TinyDBRepository(root))
    assert warned(caught, path)
    assert (df.session_id == "good").sum() == full
    assert 0 < (df.session_id == "bad").sum() <= full
    runs = frames.runs(repository=TinyDBRepository(root))
    assert set(runs.session_id) == {"good", "bad"}


def test_replay_and_transcripts_warn(damaged):
    root, run_ids, full, path, kind = damaged
    with pytest.warns(StoreDamageWarning) as caught:
        events = list(iter_events(TinyDBRepository(root), run_ids["bad"]))
    assert warned(caught, path) and events
    with pytest.warns(StoreDamageWarning) as caught:
        bundle = bundle_for_run(TinyDBRepository(root), run_ids["bad"])
    assert warned(caught, path) and "text/plain" in bundle
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreDamageWarning)
        assert "completed" in bundle_for_run(TinyDBRepository(root), run_ids["good"])["text/plain"]


def test_cli_reports_damage_on_stderr_and_goes_on(damaged):
    root, run_ids, full, path, kind = damaged
    stats = agio("store", "stats", store=root)
    assert stats.returncode == 0
    assert f"agio: warning: store file {path}" in stats.stderr
    assert "sessions 2" in stats.stdout
    replay = agio("replay", run_ids["bad"], store=root)
    assert f"agio: warning: store file {path}" in replay.stderr
    good = agio("replay", run_ids["good"], store=root)
    assert good.returncode == 0 and good.stderr == "" and "■ completed" in good.stdout


def test_verify_then_repair_salvages_and_keeps_the_original(damaged):
    root, run_ids, full, path, kind = damaged
    original = path.read_bytes()
    with pytest.warns(StoreDamageWarning):
        readable = len(TinyDBRepository(root).get_steps("bad", include_superseded=True))
    verify = agio("store", "verify", store=root)
    assert verify.returncode == 1
    assert f"damaged: store file {path}" in verify.stdout
    # a file cut mid-way also lost steps its runs committed: a second problem, recorded by the repair
    assert f"{2 if kind == 'cut mid-way' else 1} problem(s) found" in verify.stdout
    assert ("has lost" in verify.stdout) is (kind == "cut mid-way")
    repair = agio("store", "repair", store=root)
    assert repair.returncode == 0, repair.stderr
    assert "repaired bad.jsonl" in repair.stdout and "1 file(s) repaired" in repair.stdout
    (kept,) = path.parent.glob("bad.jsonl.damaged-*")
    assert kept.read_bytes() == original  # the damaged original, untouched, beside the fresh file
    assert agio("store", "verify", store=root).returncode == 0
    repo = TinyDBRepository(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreDamageWarning)
        assert len(repo.get_steps("bad", include_superseded=True)) == readable  # every readable record
        assert len(repo.get_steps("good")) == full
    # the repaired session takes new runs again
    runner = StepRunner(Agent(model=ScriptedModel(["after repair"])), repository=repo)
    assert runner.run_sync("bad", "again").status is RunStatus.COMPLETED
    assert repo.verify() == []


def test_python_verify_names_the_file_and_a_healthy_store_is_clean(tmp_path):
    root = tmp_path / "store"
    build(root)
    repo = TinyDBRepository(root)
    assert repo.verify() == []
    path = damage(root, "garbage line")
    problems = TinyDBRepository(root).verify()
    assert len(problems) == 1 and problems[0].path == path and "unreadable record" in problems[0].what
