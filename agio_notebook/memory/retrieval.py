"""Retrieval: the skills and experiences relevant to a query, and the text injected into the prompt.

Offline it ranks with BM25 (the FTS5 index). With :class:`Embeddings` configured it is hybrid: the
BM25 ranking and a cosine ranking over stored vectors are fused by reciprocal rank (RRF, k=60), so a
record found by either way of looking can make the top k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .embeddings import Embeddings, warn_once
from .records import Experience, Record, Skill
from .store import MemoryStore, scopes_for

if TYPE_CHECKING:
    import numpy as np

RRF_K = 60
MEMORY_HEADER = "## Memory"


@dataclass
class MemoryConfig:
    """How an agent uses memory (``Agent(memory=MemoryConfig(...))``); every field is read by the engine.

    enabled      retrieve before a run's first model call.
    skills       top-k skills injected; ``experiences`` likewise.
    scope        whose records: the agent's name by default; global records are always included.
    embeddings   hybrid retrieval through an OpenAI-compatible embeddings endpoint (else BM25 only).
    extractor    what turns feedback into a proposed experience: None = the offline template,
                 "agent" = the agent's own model, or any Model (e.g. a FunctionModel).
    auto_accept  proposed experiences enter memory without review.
    store        the MemoryStore to read (None: the memory of the store the run writes to).
    """

    enabled: bool = True
    skills: int = 3
    experiences: int = 3
    scope: str | None = None
    embeddings: Embeddings | None = None
    extractor: Any = None
    auto_accept: bool = False
    store: MemoryStore | None = None

    def __post_init__(self) -> None:
        if self.skills < 0 or self.experiences < 0:
            raise ValueError("skills and experiences (top-k) must be >= 0")


@dataclass
class Retrieval:
    query: str
    scope: str | None
    mode: str  # "bm25" | "hybrid"
    skills: list[tuple[Skill, float]] = field(default_factory=list)
    experiences: list[tuple[Experience, float]] = field(default_factory=list)

    @property
    def records(self) -> list[Record]:
        return [r for r, _ in self.skills] + [r for r, _ in self.experiences]

    def __bool__(self) -> bool:
        return bool(self.skills or self.experiences)


def _vector_ranking(store: MemoryStore, table: str, query_vec: np.ndarray, scopes: tuple[str, ...],
                    embeddings: Embeddings, k: int) -> list[str]:
    import numpy as np

    records = [r for r in store.records(table) if r.scope in scopes]
    if not records:
        return []
    stored = store.vectors(embeddings.model)
    missing = [r for r in records if stored.get(r.id, {}).get("updated_at") != r.updated_at]
    for start in range(0, len(missing), 256):
        batch = missing[start:start + 256]
        vecs = embeddings.embed([r.search_text() for r in batch])
        store.put_vectors(embeddings.model, [(r, v.tolist()) for r, v in zip(batch, vecs)])
    stored = store.vectors(embeddings.model)
    matrix = np.array([stored[r.id]["vector"] for r in records], dtype=np.float32)
    scores = matrix @ query_vec
    order = np.argsort(-scores)[:k]
    return [records[i].id for i in order]


def _fuse(*rankings: list[str]) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, rid in enumerate(ranking):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def retrieve(store: MemoryStore, query: str, *, scope: str | None = None, skills: int = 3,
             experiences: int = 3, embeddings: Embeddings | None = None) -> Retrieval:
    """Top ``skills`` skills and ``experiences`` experiences for ``query`` in ``scope`` (plus global)."""
    store.refresh()
    scopes = scopes_for(scope)
    query_vec = None
    if embeddings is not None:
        try:
            query_vec = embeddings.embed([query])[0]
        except Exception as exc:  # noqa: BLE001 - any endpoint failure: lexical, with one warning
            warn_once(embeddings, exc)
    out = Retrieval(query, scope, "hybrid" if query_vec is not None else "bm25")
    for table, kind, k, target in (("skills", "skill", skills, out.skills),
                                   ("experiences", "experience", experiences, out.experiences)):
        if k <= 0:
            continue
        lexical = store.index.search(query, kind, scopes, k if query_vec is None else k * 4)
        ranked = lexical[:k]
        if query_vec is not None:
            try:
                dense = _vector_ranking(store, table, query_vec, scopes, embeddings, k * 4)
            except Exception as exc:  # noqa: BLE001
                warn_once(embeddings, exc)
                out.mode = "bm25"
            else:
                ranked = _fuse([rid for rid, _ in lexical], dense)[:k]
        by_id = {r.id: r for r in store.by_ids(table, [rid for rid, _ in ranked])}
        target.extend((by_id[rid], score) for rid, score in ranked if rid in by_id)
    return out


def format_block(retrieval: Retrieval) -> str:
    """The memory section appended to the system prompt (format documented in docs/memory.md)."""
    lines = [MEMORY_HEADER, "Skills and past experiences retrieved for this task. Use them where they apply."]
    if retrieval.skills:
        lines += ["", "### Skills"]
        lines += [f"- {s.name} [skill {s.id[:8]}]: {s.text}" for s, _ in retrieval.skills]
    if retrieval.experiences:
        lines += ["", "### Experiences"]
        for e, _ in retrieval.experiences:
            parts = [f"Situation: {e.situation}"]
            parts += [f"{label}: {value}" for label, value in
                      (("Action", e.action), ("Outcome", e.outcome), ("Lesson", e.lesson)) if value]
            lines.append(f"- [experience {e.id[:8]}] " + " ".join(p if p.endswith(".") else p + "." for p in parts))
    return "\n".join(lines)


def with_memory(system_prompt: str | None, block: str) -> str:
    """The system prompt with the memory block after it."""
    return f"{system_prompt}\n\n{block}" if system_prompt else block
