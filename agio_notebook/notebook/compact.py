"""Compact views of the frames for ``%agio runs|steps|tool_calls|sessions``: what fits a notebook.

The frames in :mod:`agio_notebook.frames` keep every column with real dtypes, for analysis. A person
glancing at a table in a cell reads a few columns first: short ids, one line of each text, counts and
times. These views are for reading only (ids shortened, times as text); ``--all`` shows the full frame.
"""

from __future__ import annotations

import re

import pandas as pd

from ..views.ids import ID_CHARS
TEXT_CHARS = 40

COLUMNS: dict[str, list[str]] = {
    "runs": ["store", "run_id", "session_id", "kind", "status", "attempt", "query", "final_text", "steps",
             "tool_calls", "total_tokens", "duration_ms", "started_at"],  # store: with --every-store only
    "steps": ["run_id", "sequence", "attempt", "superseded", "role", "status", "content", "tool_names",
              "total_tokens", "duration_ms"],
    "tool_calls": ["run_id", "sequence", "name", "arguments", "status", "result", "error", "duration_ms"],
    "sessions": ["session_id", "title", "forked_from", "forked_at", "runs", "last_run_at"],
}
_IDS = {"run_id", "session_id", "forked_from"}


def one_line(value: object, limit: int = TEXT_CHARS) -> object:
    """Whitespace (newlines included) collapsed, cut to ``limit`` characters with an ellipsis."""
    if not isinstance(value, str):
        return value
    text = " ".join(value.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def compact(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """``frame`` (from ``frames.<kind>``) cut down to the columns a person reads first, shown one line a row."""
    out = frame[[c for c in COLUMNS[kind] if c in frame.columns]].copy()
    for name in out.columns:
        column = out[name]
        if name in _IDS:
            out[name] = column.map(lambda v: v[:ID_CHARS] if isinstance(v, str) else v).astype("string")
        elif pd.api.types.is_datetime64_any_dtype(column):
            out[name] = column.dt.strftime("%Y-%m-%d %H:%M:%S").astype("string")  # whole: date and time (UTC)
        elif name.endswith("_ms"):
            out[name] = column.round().astype("Int64")
        elif pd.api.types.is_string_dtype(column):
            out[name] = column.map(one_line).astype("string")
    return OneLineFrame(out)


_NOWRAP = re.compile(r"<(td|th)([ >])")
_NOWRAP_CELL = r'<\1 style="white-space:nowrap"\2'


class OneLineFrame(pd.DataFrame):
    """A compact table displayed as it is meant to be read: every row on one line, every column shown (a
    wide table scrolls sideways instead of wrapping its cells); anything computed from it is a plain
    DataFrame again."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_columns", None, "display.width", None, "display.expand_frame_repr", False):
            table = super()._repr_html_()
        if not table:
            return table
        # inline styles: they survive JupyterLab's sanitiser (an untrusted notebook drops <style>)
        return f'<div class="agio-table" style="overflow-x:auto">{_NOWRAP.sub(_NOWRAP_CELL, table)}</div>'

    def __repr__(self) -> str:
        with pd.option_context("display.max_columns", None, "display.width", None, "display.expand_frame_repr", False):
            return super().__repr__()


class WideFrame(pd.DataFrame):
    """A DataFrame that shows every column when displayed (pandas elides them past
    ``display.max_columns``); anything computed from it is a plain DataFrame again."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_columns", None, "display.width", None, "display.expand_frame_repr", False):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_columns", None, "display.width", None, "display.expand_frame_repr", False):
            return super().__repr__()
