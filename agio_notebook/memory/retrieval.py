"""Retrieval: the skills and experiences relevant to a query, and the text injected into the prompt.

Hybrid by default when the local embedding model is installed (``local_model.py``); BM25 alone
otherwise, or with ``embeddings=False``. A configured endpoint (:class:`Embeddings`) wins over the
local model. Hybrid takes the candidates of both retrievers (BM25's top ``4k`` and the nearest ``4k``
vectors) and ranks them by ``ALPHA * cosine + (1 - ALPHA) * coverage``, where coverage is the
IDF-weighted share of the query's words a record holds (0..1, ``LexicalIndex.coverage``). Both terms
have a fixed scale, unlike BM25's raw scores, so a record that merely shares one word with the query
does not outrank one that means the same thing; on the tests' recall set this fusion found more
paraphrases than reciprocal-rank fusion or a convex mix of max-normalised BM25 (``docs/memory.md``).
Each hit records which retriever found it and its scores.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .embeddings import Embeddings, warn_once
from .local_model import INSTALL_HINT, EmbeddingsError, LocalEmbeddings, require_local
from .records import Experience, Record, Skill, to_doc
from .store import MemoryStore, scopes_for

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.7  # the cosine's weight; hit@3 on paraphrases was flat from 0.6 to 0.8 on the recall set
CANDIDATES = 4  # each retriever proposes CANDIDATES * k records
MEMORY_HEADER = "## Memory"
_warned_missing: set[int] = set()


@dataclass
class MemoryConfig:
    """How an agent uses memory (``Agent(memory=MemoryConfig(...))``); every field is read by the engine.

    enabled      retrieve before a run's first model call.
    skills       top-k skills injected; ``experiences`` likewise.
    scope        whose records: the agent's name by default; global records are always included.
    embeddings   None: hybrid with the local model when installed, else BM25; "local": the local model
                 (one line if it is missing); False: BM25 only; an :class:`Embeddings` endpoint: hybrid
                 through it (it wins over the local model).
    min_score    hybrid only: leave out hits whose fused score is below this (0: the top k, but for records
                 whose meaning points away from the query; a negative value keeps those too).
    extractor    what turns feedback into a proposed experience: None = the offline template,
                 "agent" = the agent's own model, or any Model (e.g. a FunctionModel).
    auto_accept  proposed experiences enter memory without review.
    store        the MemoryStore to read (None: the memory of the store the run writes to).
    """

    enabled: bool = True
    skills: int = 3
    experiences: int = 3
    scope: str | None = None
    embeddings: Embeddings | LocalEmbeddings | str | bool | None = None
    min_score: float = 0.0
    extractor: Any = None
    auto_accept: bool = False
    store: MemoryStore | None = None

    def __post_init__(self) -> None:
        if self.skills < 0 or self.experiences < 0:
            raise ValueError("skills and experiences (top-k) must be >= 0")
        check_embeddings(self.embeddings)


def check_embeddings(embeddings: Any) -> None:
    if not (embeddings is None or embeddings is False or embeddings == "local"
            or isinstance(embeddings, (Embeddings, LocalEmbeddings))):
        raise EmbeddingsError(f"embeddings must be None (the local model when installed), 'local', False (BM25 "
                              f"only) or an Embeddings endpoint, got {embeddings!r:.60}")


@dataclass
class Hit:
    """Why a record came back: which retriever found it and its scores (None: not computed)."""

    found_by: tuple[str, ...]
    bm25: float | None = None
    cosine: float | None = None
    coverage: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"found_by": list(self.found_by), "scores": {"bm25": self.bm25, "cosine": self.cosine,
                                                           "coverage": self.coverage}}


@dataclass
class Retrieval:
    query: str
    scope: str | None
    mode: str  # "bm25" | "hybrid"
    skills: list[tuple[Skill, float]] = field(default_factory=list)
    experiences: list[tuple[Experience, float]] = field(default_factory=list)
    hits: dict[str, Hit] = field(default_factory=dict)
    embeddings: str | None = None  # the model (and endpoint) behind the cosines

    @property
    def records(self) -> list[Record]:
        return [r for r, _ in self.skills] + [r for r, _ in self.experiences]

    def items(self) -> list[dict[str, Any]]:
        """What a ``memory_read`` step records per record: the record, its kind, its (fused) score, and
        which retriever found it with each retriever's score."""
        return ([{"kind": "skill", "score": score, **to_doc(s), **self._why(s.id)} for s, score in self.skills]
                + [{"kind": "experience", "score": score, **to_doc(e), **self._why(e.id)}
                   for e, score in self.experiences])

    def _why(self, record_id: str) -> dict[str, Any]:
        hit = self.hits.get(record_id)
        return hit.to_dict() if hit is not None else {}

    def __bool__(self) -> bool:
        return bool(self.skills or self.experiences)


def _endpoint_cosines(store: MemoryStore, table: str, query_vec: np.ndarray, scopes: tuple[str, ...],
                      embeddings: Embeddings) -> dict[str, float]:
    """Cosine of every in-scope record, from vectors the endpoint made (stored the first time needed)."""
    import numpy as np

    records = [r for r in store.records(table) if r.scope in scopes]
    if not records:
        return {}
    stored = store.vectors(embeddings.model)
    missing = [r for r in records if stored.get(r.id, {}).get("updated_at") != r.updated_at]
    for start in range(0, len(missing), 256):
        batch = missing[start:start + 256]
        vecs = embeddings.embed([r.search_text() for r in batch])
        store.put_vectors(embeddings.model, [(r, v.tolist()) for r, v in zip(batch, vecs)])
    stored = store.vectors(embeddings.model)
    matrix = np.array([stored[r.id]["vector"] for r in records], dtype=np.float32)
    if matrix.shape[1] != len(query_vec):
        raise EmbeddingsError(f"memory holds vectors of {embeddings.model} with {matrix.shape[1]} dimensions, but the "
                              f"endpoint now gives {len(query_vec)}; the records are kept: re-embed them with "
                              "memory.reembed()")
    return dict(zip((r.id for r in records), (matrix @ query_vec).tolist()))


def _dense(store: MemoryStore, model: Any, table: str, kind: str, query_vec: np.ndarray,
           scopes: tuple[str, ...], k: int) -> tuple[list[str], Any]:
    """(the nearest ``k`` ids, cosine of any id) through the local model's index or an endpoint."""
    if isinstance(model, Embeddings):
        cosines = _endpoint_cosines(store, table, query_vec, scopes, model)
        return sorted(cosines, key=lambda i: -cosines[i])[:k], cosines.get
    index = store.vector_index()
    assert index is not None
    nearest = index.search(query_vec, kind, scopes, k)

    def cosine(record_id: str) -> float | None:
        vec = index.vector(record_id)
        return None if vec is None else float(vec @ query_vec)
    return [i for i, _ in nearest], cosine


def _model_for(store: MemoryStore, embeddings: Any) -> Embeddings | LocalEmbeddings | None:
    """The model behind the cosines: an endpoint, the local model, or None (BM25 only)."""
    check_embeddings(embeddings)
    if embeddings is False:
        return None
    if isinstance(embeddings, Embeddings):
        return embeddings
    if embeddings is not None:  # asked for by name: missing is an error, not a quiet fallback
        model = require_local()
        if store.embedder is None:
            store.embedder = model
        return store.embedder
    if store.embedder is None and id(store) not in _warned_missing and store.has_vectors():
        _warned_missing.add(id(store))
        warnings.warn("agio memory: the records carry vectors of the local embedding model, which is not installed "
                      f"here; retrieval is lexical (BM25) and the vectors are kept: {INSTALL_HINT}",
                      RuntimeWarning, stacklevel=4)
    return store.embedder


def retrieve(store: MemoryStore, query: str, *, scope: str | None = None, skills: int = 3,
             experiences: int = 3, embeddings: Any = None, min_score: float = 0.0) -> Retrieval:
    """Top ``skills`` skills and ``experiences`` experiences for ``query`` in ``scope`` (plus global)."""
    store.refresh()
    scopes = scopes_for(scope)
    model = _model_for(store, embeddings)
    query_vec = None
    if model is not None and query.strip():  # an empty query has no direction to embed: nothing is near it
        try:
            query_vec = model.embed([query])[0]
        except EmbeddingsError:
            raise
        except Exception as exc:  # noqa: BLE001 - any endpoint failure: lexical, with one warning
            if not isinstance(model, Embeddings):
                raise
            warn_once(model, exc)
    out = Retrieval(query, scope, "hybrid" if query_vec is not None else "bm25")
    if query_vec is not None:
        out.embeddings = (model.label if isinstance(model, LocalEmbeddings)
                          else f"{model.model} at {model.base_url or 'the default endpoint'}")
    for table, kind, k, target in (("skills", "skill", skills, out.skills),
                                   ("experiences", "experience", experiences, out.experiences)):
        if k <= 0:
            continue
        lexical = store.index.search(query, kind, scopes, k if query_vec is None else k * CANDIDATES)
        if query_vec is None:
            ranked = [(rid, score) for rid, score in lexical[:k]]
            out.hits.update((rid, Hit(("bm25",), bm25=score)) for rid, score in ranked)
        else:
            try:
                dense, cosine = _dense(store, model, table, kind, query_vec, scopes, k * CANDIDATES)
            except EmbeddingsError:
                raise
            except Exception as exc:  # noqa: BLE001 - the endpoint failed half-way: lexical for this query
                if not isinstance(model, Embeddings):
                    raise
                warn_once(model, exc)
                out.mode, out.embeddings = "bm25", None
                ranked = lexical[:k]
                out.hits.update((rid, Hit(("bm25",), bm25=score)) for rid, score in ranked)
            else:
                ranked = _fuse(store, table, query, lexical, dense, cosine, out.hits, k, min_score)
        by_id = {r.id: r for r in store.by_ids(table, [rid for rid, _ in ranked])}
        target.extend((by_id[rid], score) for rid, score in ranked if rid in by_id)
    return out


def _fuse(store: MemoryStore, table: str, query: str, lexical: list[tuple[str, float]], dense: list[str],
          cosine: Any, hits: dict[str, Hit], k: int, min_score: float) -> list[tuple[str, float]]:
    """The candidates of both retrievers ranked by ``ALPHA * cosine + (1 - ALPHA) * coverage``."""
    bm25 = dict(lexical)
    candidates = list(dict.fromkeys([*bm25, *dense]))
    texts = {r.id: r.search_text() for r in store.by_ids(table, candidates)}
    coverage = store.index.coverage(query, texts)
    scored = []
    for rid in candidates:
        if rid not in texts:
            continue
        cos = cosine(rid)
        score = ALPHA * (cos or 0.0) + (1 - ALPHA) * coverage[rid]
        found = tuple(name for name, hit in (("bm25", rid in bm25), ("embeddings", rid in dense)) if hit)
        hits[rid] = Hit(found, bm25=bm25.get(rid), cosine=cos, coverage=coverage[rid])
        scored.append((rid, score))
    scored.sort(key=lambda h: -h[1])
    # 0 (the default) leaves out only records whose meaning points away from the query (a fused score below 0)
    return [(rid, score) for rid, score in scored[:k] if score >= min_score]


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
            lines.append(f"- [experience {e.id[:8]}] " + " ".join(_sentence(p) for p in parts))
    return "\n".join(lines)


def _sentence(text: str) -> str:
    """``text`` ending as a sentence: a full stop only where it has no end of its own (never "light?.")."""
    text = text.rstrip()
    return text if text[-1:] in ".?!…" else text + "."


def with_memory(system_prompt: str | None, block: str) -> str:
    """The system prompt with the memory block after it."""
    return f"{system_prompt}\n\n{block}" if system_prompt else block
