"""Runs, steps, tool calls, sessions and metrics as pandas DataFrames, ready for groupby and plots.

Real dtypes: UTC timestamps, durations as floats in milliseconds (``_ms`` columns), nullable ``Int64``
for counts and tokens, categoricals for role, status and kind, booleans for ``superseded``.
Superseded attempts are included (``superseded`` tells them apart), so attempts compare side by side.
Columns are documented in ``docs/frames.md``.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .core import StoreError, gave_answer, run_tree
from .storage import Repository, open_repository
from .storage.ids import resolve_filter, resolve_run_id, resolve_session_id
from .views.ids import ShortIdFrame
from .views.messages import MessagesFrame

STEP_METRICS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "ttft_ms", "model_ms", "tool_ms",
                "duration_ms")
RUN_COUNTS = ("steps", "model_calls", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens", "total_tokens",
              "cached_tokens", "reused_calls", "reused_tokens")
RUN_TIMES = ("ttft_ms", "model_ms", "tool_ms", "paused_ms", "duration_ms")
ROLES = ["user", "assistant", "tool", "system"]
STEP_STATUSES = ["ok", "error", "rejected"]
ACTION_KINDS = ["code_execution", "file_operation", "web_browsing", "tool_call"]
RUN_STATUSES = ["running", "completed", "failed", "cancelled", "max_steps", "interrupted", "budget_exceeded"]


# The helpers take a list or a column of another library (an Arrow array from the SQLite store's
# fast read): ``pd.array`` converts either without a Python object per value when it can.
def _plain(values: Any) -> Any:
    """A list or a NumPy array: an Arrow column becomes NumPy (None for a missing text value)."""
    return values.to_numpy(zero_copy_only=False) if hasattr(values, "combine_chunks") else values


def _utc(values: Any) -> pd.Series:
    return pd.to_datetime(_float(values), unit="s", utc=True)


def _int(values: Any) -> pd.Series:
    return pd.Series(pd.array(values, dtype="Int64"))


def _float(values: Any) -> pd.Series:
    return pd.Series(pd.array(values, dtype="Float64").to_numpy(dtype="float64", na_value=float("nan")))


def _bool(values: Any) -> pd.Series:
    return pd.Series(np.asarray(_plain(values), dtype=bool))


def _cat(values: Any, categories: list[str]) -> pd.Series:
    return pd.Series(pd.Categorical(_plain(values), categories=categories))


def _text(values: Any) -> pd.Series:
    return pd.Series(pd.array(values, dtype="string"))


def _filters(repo: Repository, session_id: str | None, run_id: str | None = None) -> tuple[str | None, str | None]:
    """The session and run filters, a unique prefix of 6+ characters resolved to its id."""
    return resolve_filter(resolve_session_id, repo, session_id), resolve_filter(resolve_run_id, repo, run_id)


def _step_docs(repo: Repository, session_id: str | None, run_id: str | None) -> list[dict[str, Any]]:
    session_id, run_id = _filters(repo, session_id, run_id)
    if session_id is None and run_id is not None:
        run = repo.get_run(run_id)
        session_id = run.session_id if run is not None else None
        if session_id is None:
            return []
    try:
        docs = list(repo.iter_step_dicts(session_id))
    except StoreError:
        if session_id is not None:
            raise
        docs = []
        for session in repo.list_sessions():  # skip the unreadable sessions, say which
            try:
                docs.extend(repo.iter_step_dicts(session.session_id))
            except StoreError as exc:
                warnings.warn(f"skipped an unreadable session: {exc}", stacklevel=3)
    if run_id is not None:
        docs = [d for d in docs if d.get("run_id") == run_id]
    docs.sort(key=lambda d: (d["session_id"], d["sequence"], d.get("attempt", 1)))
    return docs


def _tree_docs(repo: Repository, root_run_id: str) -> list[dict[str, Any]]:
    """The steps of run ``root_run_id`` and of every run nested in it (agents called as tools)."""
    runs = run_tree(repo.iter_run_dicts(), root_run_id)
    if not runs:
        raise StoreError(f"no run {root_run_id!r} in the store")
    ids = {r["id"] for r in runs}
    docs = [d for sid in dict.fromkeys(r["session_id"] for r in runs) for d in repo.iter_step_dicts(sid)
            if d.get("run_id") in ids]
    docs.sort(key=lambda d: (d.get("created_at") or 0.0, d["sequence"]))
    return docs


def steps(session_id: str | None = None, run_id: str | None = None, *, tree: str | None = None,
          repository: Repository | None = None) -> pd.DataFrame:
    """One row per step (all sessions unless filtered), in session and sequence order.

    ``tree=run_id``: the steps of that run and of every run nested in it, in the order they were made.
    """
    repo = repository or open_repository()
    if tree is not None:
        return _steps_frame(_step_columns(_tree_docs(repo, resolve_run_id(repo, tree))))
    session_id, run_id = _filters(repo, session_id, run_id)
    columns = getattr(repo, "step_columns", None)  # a store that keeps the frame's columns itself (SQL)
    if columns is not None and run_id is None:
        return _steps_frame(columns(session_id))
    return _steps_frame(_step_columns(_step_docs(repo, session_id, run_id)))


_STEP_FIELDS = ("session_id", "run_id", "sequence", "attempt", "superseded", "role", "status", "content",
                "tool_call_id", "name", "error", "created_at", "id")


def _step_columns(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The steps frame's columns from step documents (the shape ``Repository.step_columns`` returns)."""
    col: dict[str, list[Any]] = {key: [d.get(key) for d in docs] for key in _STEP_FIELDS}
    col["attempt"] = [d.get("attempt", 1) for d in docs]
    col["status"] = [d.get("status", "ok") for d in docs]
    calls = [d.get("tool_calls") or () for d in docs]
    col["tool_calls"] = [len(c) for c in calls]
    col["tool_names"] = [",".join(x["function"]["name"] for x in c) if c else None for c in calls]
    metrics = [d.get("metrics") or {} for d in docs]
    for key in (*STEP_METRICS, "cost"):
        col[key] = [m.get(key) for m in metrics]
    return col


def _steps_frame(c: dict[str, Any]) -> pd.DataFrame:
    col = {
        "session_id": _text(c["session_id"]),
        "run_id": _text(c["run_id"]),
        "sequence": _int(c["sequence"]),
        "attempt": _int(c["attempt"]),
        "superseded": _bool(c["superseded"]),
        "current": ~_bool(c["superseded"]),
        "role": _cat(c["role"], ROLES),
        "status": _cat(c["status"], STEP_STATUSES),
        "content": _text(c["content"]),
        "tool_calls": _int(c["tool_calls"]),
        "tool_names": _text(c["tool_names"]),
        "tool_call_id": _text(c["tool_call_id"]),
        "name": _text(c["name"]),
        "error": _text(c["error"]),
        "created_at": _utc(c["created_at"]),
    }
    for key in STEP_METRICS:
        col[key] = _float(c[key]) if key.endswith("_ms") else _int(c[key])
    # USD; NaN when unknown (no price for the model, or not a model step), never 0
    col["cost"] = _float(c["cost"])
    col["step_id"] = _text(c["id"])
    return pd.DataFrame(col)


def _run_frame(docs: Iterable[dict[str, Any]]) -> pd.DataFrame:
    docs = sorted(docs, key=lambda d: d.get("started_at") or 0.0)
    metrics = [d.get("metrics") or {} for d in docs]
    col = {
        "run_id": _text([d["id"] for d in docs]),
        "session_id": _text([d["session_id"] for d in docs]),
        "kind": _cat([d.get("kind", "run") for d in docs], ["run", "retry", "resume"]),
        "status": _cat([d.get("status") for d in docs], RUN_STATUSES),
        "attempt": _int([d.get("attempt", 1) for d in docs]),
        "retry_of": _text([d.get("retry_of") for d in docs]),
        "superseded_by": _text([d.get("superseded_by") for d in docs]),
        # the current attempt: nothing replaced it and it wrote a step (a retry that failed at once is not)
        "current": pd.Series([d.get("superseded_by") is None and d.get("start_sequence") is not None
                              for d in docs], dtype="bool"),
        "query": _text([d.get("query") for d in docs]),
        "final_text": _text([d.get("final_text") for d in docs]),
        "error": _text([d.get("error") for d in docs]),
        "agent_name": _text([d.get("agent_name") for d in docs]),
        "model_name": _text([d.get("model_name") for d in docs]),
        "start_sequence": _int([d.get("start_sequence") for d in docs]),
        "end_sequence": _int([d.get("end_sequence") for d in docs]),
        # nested runs (agents called as tools): the run and tool call that asked, and how deep (0: outermost)
        "parent_run_id": _text([d.get("parent_run_id") for d in docs]),
        "parent_step_id": _text([d.get("parent_step_id") for d in docs]),
        "parent_tool_call_id": _text([d.get("parent_tool_call_id") for d in docs]),
        "depth": _int([d.get("depth") or 0 for d in docs]),
        "root_run_id": _text([d.get("root_run_id") or d["id"] for d in docs]),
        "started_at": _utc([d.get("started_at") for d in docs]),
        "ended_at": _utc([d.get("ended_at") for d in docs]),
    }
    for key in RUN_COUNTS:
        col[key] = _int([m.get(key) for m in metrics])
    for key in RUN_TIMES:
        col[key] = _float([m.get(key) for m in metrics])
    # USD; NaN when any model call's price is unknown (or the run predates costs), never 0
    col["cost"] = _float([m.get("cost") if "cost" in m else None for m in metrics])
    for name in sorted({name for d in docs for name in d.get("scores") or ()}):
        col[f"score_{name}"] = pd.Series([(d.get("scores") or {}).get(name) for d in docs], dtype="object")
    return pd.DataFrame(col)


def runs(session_id: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    """One row per run (retries and resumes included), oldest first, with its totals."""
    repo = repository or open_repository()
    return _run_frame(repo.iter_run_dicts(_filters(repo, session_id)[0]))


def outputs(agent: str | None = None, session_id: str | None = None, *,
            repository: Repository | None = None) -> pd.DataFrame:
    """Typed agents' answers (``Agent(output_type=...)``), one row per run that gave one, oldest first:
    ``run_id``, ``session_id``, ``agent``, ``output_type``, ``ended_at``, ``current`` (False for an attempt a
    retry replaced), then one column per field of the answer (an answer that is not an object is one
    ``output`` column; a field named like one of the first six is ``output.<name>``)."""
    repo = repository or open_repository()
    docs = [d for d in repo.iter_run_dicts(_filters(repo, session_id)[0])
            if gave_answer(d) and (agent is None or d.get("agent_name") == agent)]
    docs.sort(key=lambda d: d.get("started_at") or 0.0)
    fixed = {"run_id": _text([d["id"] for d in docs]), "session_id": _text([d["session_id"] for d in docs]),
             "agent": _text([d.get("agent_name") for d in docs]),
             "output_type": _text([d.get("output_type") for d in docs]),
             "ended_at": _utc([d.get("ended_at") for d in docs]),
             "current": pd.Series([d.get("superseded_by") is None for d in docs], dtype="bool")}
    values = [d["output"] for d in docs]
    given = [v for v in values if v is not None]  # None, an Optional type's answer: no field has a value
    if given and all(isinstance(v, dict) for v in given):
        fields = pd.json_normalize([v if v is not None else {} for v in values], max_level=0)
        fields.columns = [f"output.{c}" if c in fixed else c for c in fields.columns]
    else:
        fields = pd.DataFrame({"output": pd.Series(values, dtype=object)})
    return pd.concat([pd.DataFrame(fixed), fields.reset_index(drop=True)], axis=1)


def list_attempts(repository: Repository | str, run_id: str | None = None) -> pd.DataFrame:
    """Every attempt of ``run_id``'s family (the run, its retries and theirs), oldest first, one row each;
    ``current`` marks the one the conversation uses. ``list_attempts(run_id)`` reads the current store,
    ``list_attempts(repository, run_id)`` another one; ids as shown (8 characters) work."""
    from .execution.attempts import attempts_of

    if isinstance(repository, str):
        repository, run_id = open_repository(), repository
    return attempts_frame(attempts_of(repository, resolve_run_id(repository, run_id or "")))


def attempts_frame(attempts: list[Any]) -> pd.DataFrame:
    """One row per attempt, oldest first; ``current`` marks the one the conversation uses."""
    runs = [a.run for a in attempts]
    return pd.DataFrame({
        "attempt": pd.Series([a.number for a in attempts], dtype="Int64"),
        "current": pd.Series([a.current for a in attempts], dtype="bool"),
        "run_id": pd.Series([r.id for r in runs], dtype="string"),
        "kind": pd.Series([r.kind for r in runs], dtype="string"),
        "status": pd.Series([r.status.value for r in runs], dtype="string"),
        "from_sequence": pd.Series([r.start_sequence for r in runs], dtype="Int64"),
        "steps": pd.Series([a.steps for a in attempts], dtype="Int64"),
        "final_text": pd.Series([r.final_text for r in runs], dtype="string"),
        "error": pd.Series([r.error for r in runs], dtype="string"),
        "started_at": pd.to_datetime(pd.Series([r.started_at for r in runs], dtype="float64"), unit="s", utc=True),
    })


def run_metrics(session_id: str | None = None, *, repository: Repository | None = None) -> pd.DataFrame:
    """Per-run metrics only, indexed by run id: counts, tokens and times. Displayed, the ids show cut to 8
    characters, as in every table; the index keeps them whole (``.loc[run_id]``)."""
    frame = runs(session_id, repository=repository)
    return ShortIdFrame(frame[["run_id", "status", "attempt", *RUN_COUNTS, *RUN_TIMES, "cost"]].set_index("run_id"))


def tool_calls(session_id: str | None = None, run_id: str | None = None, *, tree: str | None = None,
               repository: Repository | None = None) -> pd.DataFrame:
    """One row per tool call: the call (from the assistant step) joined with its result step.

    ``tree=run_id``: the calls of that run and of every run nested in it; ``nested_run_id`` names the
    nested run an agent tool's call started.
    """
    repo = repository or open_repository()
    session_id, run_id = _filters(repo, session_id, run_id)
    docs = (_tree_docs(repo, resolve_run_id(repo, tree)) if tree is not None
            else _step_docs(repo, session_id, None))
    # keyed by attempt too: a retry that reuses recorded answers repeats their tool call ids
    results = {(d["session_id"], d.get("tool_call_id"), d.get("attempt", 1)): d for d in docs if d["role"] == "tool"}
    rows: list[tuple[Any, ...]] = []
    for d in docs:
        if d["role"] != "assistant" or not d.get("tool_calls"):
            continue
        if run_id is not None and d.get("run_id") != run_id:
            continue
        for call in d["tool_calls"]:
            res = results.get((d["session_id"], call["id"], d.get("attempt", 1))) or {}
            rows.append((d["session_id"], d.get("run_id"), d["sequence"], res.get("sequence"), call["id"],
                         call["function"]["name"], call["function"]["arguments"],
                         res.get("status") if res else None, res.get("content"), res.get("error"),
                         (res.get("metrics") or {}).get("duration_ms"), d.get("attempt", 1),
                         bool(d.get("superseded")), ((res.get("extra") or {}).get("nested_run") or {}).get("run_id")))
    cols = list(zip(*rows)) if rows else [[] for _ in range(14)]
    return pd.DataFrame({
        "session_id": _text(list(cols[0])), "run_id": _text(list(cols[1])), "sequence": _int(list(cols[2])),
        "result_sequence": _int(list(cols[3])), "tool_call_id": _text(list(cols[4])), "name": _text(list(cols[5])),
        "arguments": _text(list(cols[6])), "status": _cat(list(cols[7]), STEP_STATUSES),
        "result": _text(list(cols[8])), "error": _text(list(cols[9])), "duration_ms": _float(list(cols[10])),
        "attempt": _int(list(cols[11])), "superseded": pd.Series(list(cols[12]), dtype="bool"),
        "nested_run_id": _text(list(cols[13])),
    })


def actions(session_id: str | None = None, run_id: str | None = None, *,
            repository: Repository | None = None) -> pd.DataFrame:
    """One row per recorded action (sandboxed code, file, web, browser), linked to the step that asked.

    Read from the tool steps' ``extra["actions"]``; ``input`` and ``output`` are JSON text, with
    ``stdout``, ``diff``, ``url``, ``http_status`` and ``screenshot`` (base64 PNG) pulled out.
    """
    import json

    repo = repository or open_repository()
    session_id, run_id = _filters(repo, session_id, run_id)
    docs = _step_docs(repo, session_id, run_id)
    rows: list[dict[str, Any]] = []
    for d in docs:
        if run_id is not None and d.get("run_id") != run_id:
            continue
        for a in (d.get("extra") or {}).get("actions") or ():
            out = a.get("output") or {}
            rows.append({**a, "session_id": d["session_id"], "run_id": d.get("run_id"),
                         "result_sequence": d["sequence"], "attempt": d.get("attempt", 1),
                         "superseded": bool(d.get("superseded")), "stdout": out.get("stdout"),
                         "diff": out.get("diff"), "url": out.get("url"), "http_status": out.get("status_code"),
                         "screenshot": out.get("screenshot"),
                         "input": json.dumps(a.get("input"), default=str),
                         "output": json.dumps(out, default=str)})
    col = lambda k: [r.get(k) for r in rows]  # noqa: E731
    return pd.DataFrame({
        "action_id": _text(col("action_id")), "session_id": _text(col("session_id")), "run_id": _text(col("run_id")),
        "step_sequence": _int(col("step_sequence")), "result_sequence": _int(col("result_sequence")),
        "tool_call_id": _text(col("tool_call_id")), "kind": _cat(col("kind"), ACTION_KINDS),
        "name": _text(col("name")), "status": _cat(col("status"), ["ok", "error"]),
        "started_at": _utc(col("started_at")), "ended_at": _utc(col("ended_at")),
        "duration_ms": _float(col("duration_ms")), "input": _text(col("input")), "output": _text(col("output")),
        "error": _text(col("error")), "stdout": _text(col("stdout")), "diff": _text(col("diff")),
        "url": _text(col("url")), "http_status": _int(col("http_status")), "screenshot": _text(col("screenshot")),
        "attempt": _int(col("attempt")), "superseded": pd.Series(col("superseded"), dtype="bool"),
    })


def sessions(*, repository: Repository | None = None) -> pd.DataFrame:
    """One row per session, with its fork origin and how many runs it has."""
    repo = repository or open_repository()
    all_sessions = repo.list_sessions()
    run_counts: dict[str, int] = {}
    last: dict[str, float] = {}
    cost: dict[str, float | None] = {}
    for d in repo.iter_run_dicts():
        run_counts[d["session_id"]] = run_counts.get(d["session_id"], 0) + 1
        run_cost = (d.get("metrics") or {}).get("cost")
        spent = cost.get(d["session_id"], 0.0)
        cost[d["session_id"]] = None if run_cost is None or spent is None else spent + run_cost
        last[d["session_id"]] = max(last.get(d["session_id"], 0.0), d.get("ended_at") or d.get("started_at") or 0.0)
    return pd.DataFrame({
        "session_id": _text([s.session_id for s in all_sessions]),
        "title": _text([s.title for s in all_sessions]),
        "forked_from": _text([s.forked_from for s in all_sessions]),
        "forked_at": _int([s.forked_at for s in all_sessions]),
        "runs": _int([run_counts.get(s.session_id, 0) for s in all_sessions]),
        "created_at": _utc([s.created_at for s in all_sessions]),
        "last_run_at": _utc([last.get(s.session_id) for s in all_sessions]),
        "cost": _float([cost.get(s.session_id, 0.0) for s in all_sessions]),
    })


def context(run_id: str, step: int, *, repository: Repository | None = None) -> pd.DataFrame:
    """What the model saw: the exact messages model call ``step`` (its step number) of ``run_id`` received,
    one row each: role, text, tokens (the message with the chat format around it; ``tokens_estimated`` when
    no tokenizer counted them), the step the message came from (NA for the system prompt) and whether it
    was edited in step mode. ``frame.attrs`` holds the whole prompt's count (``prompt_tokens``: the rows and
    the reply's priming, what a budget counts), what the model reported (``reported``) and ``differs``."""
    from .execution.seen import seen_rows, seen_total

    repository = repository or open_repository()
    rows = seen_rows(repository, run_id, step)
    frame = MessagesFrame({
        "role": _cat([r["role"] for r in rows], ROLES),
        "text": _text([r["text"] for r in rows]),
        "tokens": _int([r["tokens"] for r in rows]),
        "tokens_estimated": _bool([r["tokens_estimated"] for r in rows]),
        "step": _int([r["step"] for r in rows]),
        "edited": _bool([r["edited"] for r in rows]),
    })
    # the whole prompt as the budget counts it (the rows and the reply's priming), and the model's own count
    frame.attrs.update(seen_total(repository, run_id, step))
    return frame
