"""Skills, experiences, feedback and proposals as DataFrames, and ``update(df)``: edit a frame, write it back.

``update`` checks the whole frame before writing anything (columns, ids, values) and then writes
every changed row in one append, so a bad frame leaves memory exactly as it was.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pandas as pd

from ..core import AgioError, now
from .records import Experience, Feedback, Proposal, Skill, to_doc
from .store import MemoryStore

_TIMES = ("created_at", "updated_at", "reviewed_at")
_INTS = ("usage_count", "rating", "sequence")
_CLASSES = {"skills": Skill, "experiences": Experience}


def _frame(cls: type, objs: list[Any]) -> pd.DataFrame:
    names = [f.name for f in fields(cls)]
    docs = sorted((to_doc(o) for o in objs), key=lambda d: d.get("created_at") or 0)
    cols: dict[str, pd.Series] = {}
    for name in names:
        values = [d[name] for d in docs]
        if name in _TIMES:
            cols[name] = pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True)
        elif name in _INTS:
            cols[name] = pd.Series(values, dtype="Int64")
        elif name in ("tags", "experience"):
            cols[name] = pd.Series(values, dtype="object")
        else:
            cols[name] = pd.Series(values, dtype="string")
    order = ["id", *[n for n in names if n != "id"]]
    return pd.DataFrame(cols, columns=order)


def records_frame(store: MemoryStore, table: str, scope: str | None = None) -> pd.DataFrame:
    objs = [r for r in store.records(table) if scope is None or r.scope == scope]
    return _frame(_CLASSES[table], objs)


def search_frame(got: Any) -> pd.DataFrame:
    """What a retrieval found, one row per record in the order it would enter the prompt: its kind, id, name
    (skills), text, scope, its score, which retrievers found it and each one's score. ``attrs`` hold the
    query, scope, mode and embedding model."""
    items = got.items()
    scores = [i.get("scores") or {} for i in items]
    frame = pd.DataFrame({
        "kind": pd.Series([i["kind"] for i in items], dtype="string"),
        "id": pd.Series([i["id"] for i in items], dtype="string"),
        "name": pd.Series([i.get("name") for i in items], dtype="string"),
        "text": pd.Series([i.get("text") or i.get("lesson") or i.get("situation") for i in items], dtype="string"),
        "scope": pd.Series([i.get("scope") for i in items], dtype="string"),
        "score": pd.Series([i.get("score") for i in items], dtype="float64"),
        "found_by": pd.Series([", ".join(i.get("found_by") or ()) for i in items], dtype="string"),
        **{f"{k}_score": pd.Series([s.get(k) for s in scores], dtype="float64") for k in ("bm25", "cosine", "coverage")},
    })
    frame.attrs.update({"query": got.query, "scope": got.scope, "mode": got.mode, "embeddings": got.embeddings})
    return frame


def feedback_frame(store: MemoryStore, run_id: str | None = None) -> pd.DataFrame:
    return _frame(Feedback, [f for f in store.feedback_items() if run_id is None or f.run_id == run_id])


def proposals_frame(store: MemoryStore, status: str | None = None) -> pd.DataFrame:
    return _frame(Proposal, [p for p in store.proposals() if status is None or p.status == status])


def _value(name: str, value: Any) -> Any:
    if name == "tags":
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)):
            return []
        return [str(t) for t in value]
    if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)):
        return None if name in ("rating", "source_run", "source_step") else ""
    if name == "rating":
        if int(value) not in (-1, 0, 1):
            raise ValueError(f"rating must be -1, 0 or 1, got {value!r}")
        return int(value)
    return str(value)


def update(store: MemoryStore, df: pd.DataFrame) -> int:
    """Write back an edited skills or experiences frame; returns how many records changed or were added.

    Rows without an id are new records. Rows left out of the frame are kept (delete with ``delete``).
    """
    if not isinstance(df, pd.DataFrame):
        raise AgioError(f"update() takes a DataFrame from memory.skills() or memory.experiences(), "
                        f"got {type(df).__name__}")
    cols = set(df.columns)
    table = "skills" if {"name", "text"} <= cols else "experiences" if "situation" in cols else None
    if table is None:
        raise AgioError("the frame is neither a skills frame (needs name, text) nor an experiences frame "
                        f"(needs situation); its columns: {', '.join(map(str, df.columns))}")
    cls = _CLASSES[table]
    known = {f.name for f in fields(cls)}
    unknown = sorted(str(c) for c in cols - known)
    if unknown:
        raise AgioError(f"the {table} frame has columns memory does not know: {', '.join(unknown)}")
    if "id" not in cols:
        raise AgioError(f"the {table} frame has no id column; start from memory.{table}()")
    stored = {r.id: r for r in store.records(table)}
    ids = [i for i in df["id"] if isinstance(i, str) and i]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise AgioError(f"the {table} frame repeats id(s) {', '.join(dupes)}")
    missing = [i for i in ids if i not in stored]
    if missing:
        raise AgioError(f"the {table} frame has id(s) not in memory: {', '.join(missing)} "
                        f"(deleted meanwhile, or from another store); leave id empty to add a record")
    editable = [c for c in cls.EDITABLE if c in cols]
    changed: list[Any] = []
    stamp = now()
    for n, row in enumerate(df.to_dict("records")):
        try:
            values = {c: _value(c, row[c]) for c in editable}
        except (TypeError, ValueError) as exc:
            raise AgioError(f"row {n} of the {table} frame: {exc}") from None
        rid = row["id"] if isinstance(row["id"], str) and row["id"] else None
        if rid is None:
            first = "name" if table == "skills" else "situation"
            if not values.get(first):
                raise AgioError(f"row {n} of the {table} frame is new (no id) but has no {first}")
            changed.append(cls(**values))
            continue
        old = stored[rid]
        if any(getattr(old, c) != v for c, v in values.items()):
            changed.append(replace(old, **values, updated_at=stamp))
    if changed:
        store.put(table, changed)
    return len(changed)
