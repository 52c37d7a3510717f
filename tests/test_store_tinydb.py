"""The TinyDB store on real files: round trips, upserts, TinyDB compatibility, corruption, schema."""

from __future__ import annotations

import json
import os

import pytest
from tinydb import TinyDB

from agio_notebook.core import AgentRun, AgentSession, RunStatus, Step, StepEvent, StepEventType, StepRole, StoreError
from agio_notebook.storage import StoreDamageWarning, JournalStorage, TinyDBRepository


def steps_for(session_id: str, n: int, run_id: str = "r1") -> list[Step]:
    roles = [StepRole.USER, StepRole.ASSISTANT]
    return [Step(session_id=session_id, run_id=run_id, sequence=i + 1, role=roles[i % 2], content=f"m{i + 1}")
            for i in range(n)]


@pytest.fixture
def root(tmp_path):
    return tmp_path / "store"


def test_round_trip_upsert_and_reopen(root):
    repo = TinyDBRepository(root)
    session = AgentSession(title="t")
    run = AgentRun(session_id=session.session_id, query="q")
    steps = steps_for(session.session_id, 4, run.id)
    event = StepEvent(StepEventType.RUN_STARTED, run.id, session.session_id, 1, {"run": run.to_dict()})
    repo.commit(session=session, run=run, steps=steps, events=[event])
    steps[1].content = "edited"
    run.status = RunStatus.COMPLETED
    repo.commit(run=run, steps=[steps[1]])
    repo.close()

    again = TinyDBRepository(root)
    assert [s.content for s in again.get_steps(session.session_id)] == ["m1", "edited", "m3", "m4"]
    assert again.get_run(run.id).status is RunStatus.COMPLETED
    assert again.list_runs()[0].id == run.id
    assert again.get_session(session.session_id).title == "t"
    assert [e.type for e in again.get_events(run.id)] == [StepEventType.RUN_STARTED]
    assert again.get_last_step(session.session_id).content == "m4"
    assert [s.content for s in again.get_steps(session.session_id, 2, 3)] == ["edited", "m3"]


def test_superseded_are_hidden_unless_asked_and_tombstones_delete(root):
    repo = TinyDBRepository(root)
    steps = steps_for("s", 4)
    repo.commit(steps=steps)
    steps[3].superseded = True
    retry = Step(session_id="s", run_id="r2", sequence=4, role=StepRole.ASSISTANT, content="again", attempt=2)
    repo.commit(steps=[steps[3], retry])
    assert [(s.sequence, s.attempt) for s in repo.get_steps("s")][-1] == (4, 2)
    assert len(repo.get_steps("s", include_superseded=True)) == 5
    assert repo.delete_steps("s", 3) == 3
    assert [s.sequence for s in TinyDBRepository(root).get_steps("s", include_superseded=True)] == [1, 2]


def test_plain_tinydb_reads_a_session_file_and_file_is_text(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("readable", 3))
    path = repo.session_file("readable")
    text = path.read_text()
    assert '"content":"m2"' in text  # readable with a text editor
    db = TinyDB(str(path), storage=JournalStorage)
    assert sorted(d["content"] for d in db.table("steps").all()) == ["m1", "m2", "m3"]
    assert db.table("steps").get(doc_id=1)["sequence"] == 1
    db.close()
    repo.compact()  # compaction keeps doc ids and content
    db = TinyDB(str(path), storage=JournalStorage)
    assert db.table("steps").get(doc_id=3)["content"] == "m3"
    assert len(path.read_text().splitlines()) == 1
    db.close()


def test_tinydb_writes_through_our_storage_are_atomic_and_visible(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("w", 2))
    path = repo.session_file("w")
    db = TinyDB(str(path), storage=JournalStorage)
    db.table("steps").update({"content": "via tinydb"}, doc_ids=[2])
    db.close()
    assert [s.content for s in TinyDBRepository(root).get_steps("w")] == ["m1", "via tinydb"]


def test_compaction_then_more_appends(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("c", 10))
    repo.compact()
    more = Step(session_id="c", run_id="r1", sequence=11, role=StepRole.USER, content="m11")
    repo.commit(steps=[more])
    other = TinyDBRepository(root)
    assert [s.sequence for s in other.get_steps("c")] == list(range(1, 12))


def test_truncated_snapshot_is_a_clear_error_and_others_still_load(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("broken", 5))
    repo.commit(steps=steps_for("fine", 3))
    repo.compact()
    path = repo.session_file("broken")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut the snapshot line in two
    fresh = TinyDBRepository(root)
    with pytest.warns(StoreDamageWarning, match="broken.jsonl.*snapshot line is cut off"):
        salvaged = fresh.get_steps("broken")
    assert 0 < len(salvaged) < 5  # the documents before the cut
    assert [s.content for s in fresh.get_steps("fine")] == ["m1", "m2", "m3"]
    with pytest.raises(StoreError, match="broken.jsonl.*damaged.*agio store repair"):
        fresh.commit(steps=steps_for("broken", 6)[5:])  # never written to before it is repaired
    assert path.read_bytes() == data[: len(data) // 2]  # nothing was overwritten


def test_corrupt_middle_line_names_the_file(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("bad", 2))
    repo.commit(steps=steps_for("bad", 4)[2:])
    path = repo.session_file("bad")
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"t":"steps","d":{"id": oops'
    path.write_bytes(b"\n".join(lines))
    with pytest.warns(StoreDamageWarning, match="bad.jsonl.*unreadable record"):
        assert len(TinyDBRepository(root).get_steps("bad")) == 3  # the other records are read


def test_torn_tail_is_ignored_with_a_warning_and_repaired_by_next_writer(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("torn", 2))
    path = repo.session_file("torn")
    with open(path, "ab") as f:
        f.write(b'{"t":"steps","d":{"id":"half')
    reader = TinyDBRepository(root)
    with pytest.warns(UserWarning, match="incomplete record"):
        assert len(reader.get_steps("torn")) == 2
    writer = TinyDBRepository(root)
    with pytest.warns(StoreDamageWarning, match="torn.jsonl.*incomplete record.*removed"):
        # the writer cuts the torn tail under the lock, and says so
        writer.commit(steps=[Step(session_id="torn", run_id="r", sequence=3, role=StepRole.USER, content="m3")])
    assert path.read_bytes().endswith(b"\n")
    assert [s.content for s in TinyDBRepository(root).get_steps("torn")] == ["m1", "m2", "m3"]


def test_schema_version_is_stored_and_checked(root):
    TinyDBRepository(root)
    meta = json.loads((root / "meta.json").read_text())
    assert meta["schema_version"] == 1
    (root / "meta.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(StoreError, match="schema version 99"):
        TinyDBRepository(root)


def test_lost_index_entry_is_repaired_from_the_session_file(root):
    repo = TinyDBRepository(root)
    session = AgentSession()
    run = AgentRun(session_id=session.session_id)
    repo.commit(session=session, run=run, steps=steps_for(session.session_id, 2, run.id))
    os.remove(root / "index.jsonl")  # as if the process died between the two writes
    again = TinyDBRepository(root)
    assert [s.session_id for s in again.list_sessions()] == [session.session_id]
    assert [r.id for r in again.list_runs()] == [run.id]


def test_env_var_sets_the_default_location(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "from-env"))
    TinyDBRepository().commit(steps=steps_for("e", 1))
    assert (tmp_path / "from-env" / "sessions" / "e.jsonl").exists()


def test_unsafe_session_ids_get_safe_file_names(root):
    repo = TinyDBRepository(root)
    repo.commit(steps=steps_for("../../etc/passwd", 1))
    assert [p.parent for p in root.rglob("*.jsonl") if p.name.startswith("h-")] == [root / "sessions"]
    assert len(repo.get_steps("../../etc/passwd")) == 1


def test_get_events_pages_in_order_with_a_cursor(root):
    repo = TinyDBRepository(root)
    run = AgentRun(session_id="p")
    events = [StepEvent(StepEventType.METRICS, run.id, "p", seq, {"n": seq}) for seq in range(1, 26)]
    repo.commit(run=run, events=events[10:])
    repo.commit(events=events[:10])  # stored out of order: pages still come in seq order
    seen, cursor = [], 0
    while page := repo.get_events(run.id, cursor, 7):
        seen.append([e.seq for e in page])
        cursor = page[-1].seq
    assert seen == [list(range(1, 8)), list(range(8, 15)), list(range(15, 22)), list(range(22, 26))]
    assert repo.get_events("unknown-run") == []


def test_a_commit_cut_at_any_point_never_leaves_a_run_claiming_steps_it_lacks(tmp_path):
    """A kill can cut a large append at a page boundary. A run's last commit (its final answer with the
    run's end) cut anywhere leaves a store that reads clean: the run counts only steps that are there."""
    import warnings

    from agio_notebook.storage import journal as journal_module

    def fresh(root):
        repo = TinyDBRepository(root)
        run = AgentRun(session_id="s", status=RunStatus.RUNNING, id="r1", started_at=1.0)
        user = Step(session_id="s", run_id=run.id, sequence=1, role=StepRole.USER, content="q", id="u1")
        run.metrics.steps = 1
        repo.commit(session=AgentSession(session_id="s"), run=run, steps=[user])
        return repo, run

    probe, run = fresh(tmp_path / "probe")
    answer = Step(session_id="s", run_id=run.id, sequence=2, role=StepRole.ASSISTANT, content="a" * 9000)
    run.metrics.steps, run.status = 2, RunStatus.COMPLETED
    end = StepEvent(StepEventType.RUN_COMPLETED, run.id, "s", 3, {"run": run.to_dict()})
    written = []
    real_write = os.write
    journal_module.os.write = lambda fd, data: written.append(data) or real_write(fd, data)
    try:
        probe.commit(run=run, steps=[answer], events=[end])
    finally:
        journal_module.os.write = real_write
    probe.close()
    last = next(d for d in reversed(written) if b'"t":"steps"' in d)
    lines = last.splitlines(keepends=True)
    cuts = sorted({sum(len(x) for x in lines[:k]) for k in range(len(lines))} | {len(lines[0]) + 100, 4096, 8192})
    for cut in cuts:
        root = tmp_path / f"cut-{cut}"
        repo, run = fresh(root)
        path = repo.session_file("s")
        repo.close()
        with path.open("ab") as f:
            f.write(last[:cut])  # what a kill leaves of the append
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreDamageWarning)  # a record cut short is cut off, with a warning
            reopened = TinyDBRepository(root)
        assert reopened.verify() == [], cut
        (stored,) = reopened.list_runs("s")
        assert stored.metrics.steps <= len([s for s in reopened.get_steps("s") if s.run_id == stored.id]), cut
        reopened.close()
