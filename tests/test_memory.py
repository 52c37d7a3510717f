"""Memory: records in the store, frames and update(df), BM25 and hybrid retrieval into the prompt,
the memory_read step and event, and retry reusing the recorded memory."""

from __future__ import annotations

import asyncio
import shutil
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from agio_notebook import Agent, FunctionModel, StepRunner, memory
from agio_notebook.core import AgioError, NotFoundError, StepEventType as E
from agio_notebook.memory import Embeddings, MemoryConfig
from agio_notebook.memory.records import Experience
from agio_notebook.memory.store import MemoryStore
from agio_notebook.storage import TinyDBRepository

from embeddings_server import EmbeddingsServer

DATA = Path(__file__).parent / "data" / "memory_retrieval_labelled.json"


@pytest.fixture
def repo(tmp_path):
    return TinyDBRepository(tmp_path / "store")


class Recorder:
    """A FunctionModel's function that keeps the system prompt of every call."""

    def __init__(self, answer="ok"):
        self.systems: list[str | None] = []
        self.answer = answer

    def __call__(self, messages, tools):
        self.systems.append(messages[0]["content"] if messages[0]["role"] == "system" else None)
        return self.answer


def make(repo, name="tutor", system="You are a tutor.", **mem):
    seen = Recorder()
    agent = Agent(model=FunctionModel(seen), name=name, system_prompt=system,
                  memory=MemoryConfig(**mem) if mem else None)
    return StepRunner(agent, repository=repo), seen


def test_memory_changes_what_the_model_sees(repo):
    skill = memory.add_skill("units", "Always give the unit of a physical quantity.", scope="tutor", repository=repo)
    exp = memory.add_experience("The user asked for the speed of light", "answered in miles per second",
                                "the user wanted km/s", "give speeds in kilometres per second", scope="tutor",
                                repository=repo)
    memory.add_skill("other agent", "Speak like a pirate about light.", scope="pirate", repository=repo)
    runner, seen = make(repo)
    result = asyncio.run(runner.run(None, "What is the speed of light, and its unit?"))
    assert seen.systems[0] == (
        "You are a tutor.\n\n## Memory\nSkills and past experiences retrieved for this task. Use them where they "
        f"apply.\n\n### Skills\n- units [skill {skill.id[:8]}]: Always give the unit of a physical quantity.\n\n"
        f"### Experiences\n- [experience {exp.id[:8]}] Situation: The user asked for the speed of light. "
        "Action: answered in miles per second. Outcome: the user wanted km/s. "
        "Lesson: give speeds in kilometres per second.")
    assert "pirate" not in seen.systems[0]  # another agent's scope
    # recorded as a memory_read step and event listing exactly what went in
    steps = repo.get_steps(result.session_id)
    mem = [s for s in steps if s.extra.get("kind") == "memory_read"]
    assert len(mem) == 1 and mem[0].content == seen.systems[0].split("\n\n", 1)[1]
    event = next(e for e in result.events if e.type is E.MEMORY_READ)
    assert [(i["kind"], i["id"]) for i in event.payload["items"]] == [("skill", skill.id), ("experience", exp.id)]
    assert event.payload["text"] == mem[0].content and event.payload["mode"] == "hybrid"  # the local model is installed
    assert event.payload["embeddings"].startswith("wordllama/l2_supercat ")
    for item in event.payload["items"]:  # which retriever found each record, and its scores
        assert set(item["found_by"]) <= {"bm25", "embeddings"} and item["found_by"]
        assert -1 <= item["scores"]["cosine"] <= 1 and 0 <= item["scores"]["coverage"] <= 1
    stored = [e.type for e in repo.get_events(result.run_id, 0, 100)]
    assert E.MEMORY_READ in stored  # durable with the step before it was announced
    # usage counts moved
    assert memory.skills("tutor", repository=repo).loc[0, "usage_count"] == 1


def test_memory_can_be_switched_off_per_agent_and_nothing_found_means_no_step(repo):
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    runner, seen = make(repo, enabled=False)
    result = asyncio.run(runner.run(None, "give the unit of speed"))
    assert seen.systems == ["You are a tutor."]
    assert not any(e.type is E.MEMORY_READ for e in result.events)
    runner, seen = make(repo)
    result = asyncio.run(runner.run(None, "zebra migration"))  # nothing relevant
    assert seen.systems == ["You are a tutor."]
    assert not any(s.extra.get("kind") for s in repo.get_steps(result.session_id))


def test_top_k_is_read_per_agent(repo):
    for n in range(5):
        memory.add_experience(f"question about light number {n}", lesson=f"lesson {n}", scope="tutor",
                              repository=repo)
    runner, seen = make(repo, experiences=2)
    asyncio.run(runner.run(None, "light"))
    assert seen.systems[0].count("[experience ") == 2


def test_retry_reuses_recorded_memory_unless_asked_afresh(repo):
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    runner, seen = make(repo)
    first = asyncio.run(runner.run(None, "what unit for speed?"))
    memory.add_skill("units v2", "Always give the unit, in SI.", scope="tutor", repository=repo)
    asyncio.run(runner.retry(first.run_id))
    assert seen.systems[1] == seen.systems[0] and "SI" not in seen.systems[1]
    # the next run in the session retrieves for itself, without the earlier block inherited
    asyncio.run(runner.run(first.session_id, "and the unit for force?"))
    assert seen.systems[2].count("## Memory") == 1 and "SI" in seen.systems[2]
    again = asyncio.run(runner.retry(first.run_id, fresh_memory=True))
    assert "SI" in seen.systems[3]
    assert sum(1 for e in again.events if e.type is E.MEMORY_READ) == 1


def test_frames_and_update_round_trip(repo):
    memory.add_skill("units", "Give units.", scope="tutor", tags=["physics"], repository=repo)
    memory.add_experience("asked for a date", lesson="call now()", rating=-1, repository=repo)
    df = memory.skills(repository=repo)
    assert list(df.columns[:4]) == ["id", "name", "text", "scope"]
    assert str(df["created_at"].dtype) == "datetime64[ns, UTC]" and str(df["usage_count"].dtype) == "Int64"
    df.loc[0, "text"] = "Give SI units."
    new = pd.DataFrame([{"id": None, "name": "dates", "text": "Use ISO dates.", "scope": "global", "tags": "time"}])
    assert memory.update(pd.concat([df, new], ignore_index=True), repository=repo) == 2
    after = memory.skills(repository=repo)
    assert sorted(after["text"]) == ["Give SI units.", "Use ISO dates."]
    assert after.set_index("name").loc["dates", "tags"] == ["time"]
    # retrieval sees the edit (the index followed it)
    found = memory.search("SI units", scope="tutor", repository=repo)  # a frame, like every listing
    assert found.iloc[0]["kind"] == "skill" and found.iloc[0]["text"] == "Give SI units."
    ex = memory.experiences(repository=repo)
    assert ex.loc[0, "rating"] == -1
    ex.loc[0, "lesson"] = "call the now() tool"
    assert memory.update(ex, repository=repo) == 1
    assert memory.experiences(repository=repo).loc[0, "lesson"] == "call the now() tool"
    assert memory.update(memory.experiences(repository=repo), repository=repo) == 0  # unchanged: no write


def test_bad_frames_get_one_line_and_change_nothing(repo, tmp_path):
    memory.add_skill("units", "Give units.", repository=repo)
    journal = Path(repo.root) / "memory.jsonl"
    before = journal.read_bytes()
    df = memory.skills(repository=repo)
    bad_column = df.assign(colour="red")
    bad_id = df.assign(id="f" * 32)
    twice = pd.concat([df, df], ignore_index=True)
    bad_rating = memory.experiences(repository=repo)
    with pytest.raises(AgioError, match="columns memory does not know: colour"):
        memory.update(bad_column, repository=repo)
    with pytest.raises(AgioError, match="not in memory: ffffffff"):
        memory.update(bad_id, repository=repo)
    with pytest.raises(AgioError, match="repeats id"):
        memory.update(twice, repository=repo)
    with pytest.raises(AgioError, match="neither a skills frame"):
        memory.update(pd.DataFrame({"x": [1]}), repository=repo)
    memory.add_experience("s", repository=repo)
    before = journal.read_bytes()
    exp = memory.experiences(repository=repo)
    exp.loc[0, "rating"] = 7
    with pytest.raises(AgioError, match="rating must be -1, 0 or 1"):
        memory.update(exp, repository=repo)
    assert journal.read_bytes() == before
    with pytest.raises(NotFoundError):
        memory.delete("nope", repository=repo)
    assert journal.read_bytes() == before


def test_edit_and_delete(repo):
    s = memory.add_skill("units", "Give units.", repository=repo)
    memory.edit(s.id, text="Give SI units.", repository=repo)
    assert memory.search("SI", repository=repo).iloc[0]["id"] == s.id
    with pytest.raises(ValueError, match="cannot edit usage_count"):
        memory.edit(s.id, usage_count=9, repository=repo)
    memory.delete(s.id, repository=repo)
    assert memory.skills(repository=repo).empty
    assert memory.search("SI units", repository=repo).empty


def test_index_is_derived_rebuilt_when_missing_and_follows_other_writers(tmp_path):
    root = tmp_path / "m"
    a = MemoryStore(root)
    a.add(Experience("renting a car abroad", lesson="check the insurance"))
    b = MemoryStore(root)  # a second kernel on the same store
    assert [e.situation for e, _ in memory.retrieval.retrieve(b, "car insurance").experiences] == \
        ["renting a car abroad"]
    a.add(Experience("booking a train ticket", lesson="book early"))
    assert memory.retrieval.retrieve(b, "train ticket").experiences  # b's index followed a's append
    a.close(), b.close()
    shutil.rmtree(root / "memory-index")
    c = MemoryStore(root)
    assert memory.retrieval.retrieve(c, "train").experiences[0][0].situation == "booking a train ticket"
    assert len(c.index.versions()) == 2  # both re-indexed from the journal


def test_retrieval_precision_at_3_on_the_labelled_set(tmp_path):
    data = json.loads(DATA.read_text())
    store = MemoryStore(tmp_path)
    for e in data["experiences"]:
        store.add(Experience(**e))
    precisions = []
    for q in data["queries"]:
        got = [e.id for e, _ in memory.retrieval.retrieve(store, q["query"], skills=0, experiences=3).experiences]
        precisions.append(len(set(got) & set(q["relevant"])) / 3)
    assert sum(precisions) / len(precisions) >= 0.8, precisions


def test_hybrid_retrieval_with_an_embeddings_endpoint(repo):
    server = EmbeddingsServer()
    try:
        emb = Embeddings(model="bag-of-concepts", base_url=server.base_url)
        memory.add_experience("Renting an automobile overseas", lesson="take photos of the vehicle first",
                              scope="travel", repository=repo)
        memory.add_experience("Booking a train ticket", lesson="book early", scope="travel", repository=repo)
        found = memory.search("car hire abroad", scope="travel", embeddings=False, repository=repo)
        assert not (found["kind"] == "experience").any()  # BM25 alone
        runner, seen = make(repo, name="travel", system=None, embeddings=emb, experiences=1)
        result = asyncio.run(runner.run(None, "car hire abroad"))
        assert "take photos of the vehicle first" in seen.systems[0]
        event = next(e for e in result.events if e.type is E.MEMORY_READ)
        assert event.payload["mode"] == "hybrid"
        # vectors live in the store; a second run embeds only the query
        vectors = [json.loads(l) for l in (Path(repo.root) / "memory.jsonl").read_text().splitlines()
                   if '"t":"vectors"' in l]
        assert len(vectors) == 2 and vectors[0]["d"]["model"] == "bag-of-concepts"
        n = len(server.requests)
        asyncio.run(runner.run(None, "car hire abroad"))
        assert len(server.requests) == n + 1 and server.requests[-1]["body"]["input"] == ["car hire abroad"]
    finally:
        server.close()


def test_embeddings_endpoint_down_falls_back_to_bm25_with_one_warning(repo):
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    down = Embeddings(model="m", base_url="http://127.0.0.1:9/v1", timeout=2)
    runner, seen = make(repo, embeddings=down)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = asyncio.run(runner.run(None, "which unit?"))
        asyncio.run(runner.run(None, "which unit again?"))
    fallbacks = [w for w in caught if "falls back to lexical" in str(w.message)]
    assert len(fallbacks) == 1
    assert "Always give the unit." in seen.systems[0] and "Always give the unit." in seen.systems[1]
    assert next(e for e in first.events if e.type is E.MEMORY_READ).payload["mode"] == "bm25"


def test_memory_on_the_sqlite_store_and_the_stored_request_still_rebuilds(tmp_path):
    from agio_notebook.execution.requests import request_of
    from agio_notebook.storage import SQLiteRepository

    repo = SQLiteRepository(tmp_path / "agio.db")
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    runner, seen = make(repo)
    result = asyncio.run(runner.run(None, "which unit for speed?"))
    assert "Always give the unit." in seen.systems[0]
    model_step = next(s for s in repo.get_steps(result.session_id) if s.role.value == "assistant")
    request = request_of(repo, model_step)  # the memory_read step is not a message; the system prompt has it
    assert request["messages"][0]["content"] == seen.systems[0]
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    # the records are rows of the SQL store: a fresh process (a new repository object) sees them
    again = SQLiteRepository(tmp_path / "agio.db")
    assert memory.skills(repository=again).loc[0, "text"] == "Always give the unit."
    assert (tmp_path / "agio.db.memory-index").is_dir()


def test_memory_on_the_in_memory_store():
    from agio_notebook.storage import InMemoryRepository

    repo = InMemoryRepository()
    runner, seen = make(repo)
    asyncio.run(runner.run(None, "which unit?"))
    assert seen.systems == ["You are a tutor."]  # nothing stored: no memory opened, nothing injected
    memory.add_skill("units", "Always give the unit.", scope="tutor", repository=repo)
    asyncio.run(runner.run(None, "which unit?"))
    assert "Always give the unit." in seen.systems[1]


def test_two_processes_share_memory_and_its_index(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "m"
    here = MemoryStore(root)
    here.add(Experience("renting a car abroad", lesson="check the insurance"))
    assert memory.retrieval.retrieve(here, "car").experiences  # this process wrote the index
    code = ("import sys; from agio_notebook.memory.store import MemoryStore; "
            "from agio_notebook.memory.records import Experience; from agio_notebook.memory.retrieval import retrieve; "
            "s = MemoryStore(sys.argv[1]); s.add(Experience('booking a train ticket', lesson='book early')); "
            "print(len(retrieve(s, 'train car').experiences)); s.close()")
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # the other process indexed what it found and what it added
    got = memory.retrieval.retrieve(here, "train ticket", embeddings=False).experiences
    assert [e.situation for e, _ in got] == ["booking a train ticket"]  # and this one follows its append
    got = memory.retrieval.retrieve(here, "train ticket").experiences  # so do the vectors
    assert [e.situation for e, _ in got][0] == "booking a train ticket" and len(got) == 2


def test_the_memory_block_ends_each_part_as_a_sentence_once():
    from agio_notebook.memory.records import Experience
    from agio_notebook.memory.retrieval import Retrieval, format_block

    exp = Experience(situation="How fast is light?", action="Answered from memory", outcome="Wrong!",
                     lesson="Look it up.", scope="tutor")
    block = format_block(Retrieval("q", "tutor", "bm25", experiences=[(exp, 1.0)]))
    assert "Situation: How fast is light? Action: Answered from memory. Outcome: Wrong! Lesson: Look it up." in block
    assert "?." not in block and "!." not in block and ".." not in block


def test_a_policy_says_it_was_a_policy_not_a_person():
    import asyncio

    from agio_notebook.execution.approval import ApprovalRequest, policy_approver

    decision = asyncio.run(policy_approver(False)(ApprovalRequest("c1", "pay", {})))
    assert not decision.approved and decision.reason == "refused by a policy that approves no call"
    assert asyncio.run(policy_approver(False, "not on weekends")(ApprovalRequest("c1", "pay", {}))).reason == "not on weekends"
