"""Messages as a person reads them: a frame of chat messages (``agio_notebook.context``) that displays each
text whole, its line breaks as line breaks, not as ``\\n`` cut at 50 characters as pandas shows them."""

from __future__ import annotations

from html import escape

import pandas as pd

from .html import text_html


def _cell(value: object) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and value != value) else str(value)


class MessagesFrame(pd.DataFrame):
    """A DataFrame (columns, dtypes and all) whose ``text`` column is shown whole and as written;
    anything computed from it is a plain DataFrame again."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _repr_html_(self) -> str:
        head = "".join(f'<th style="text-align:left">{escape(str(c))}</th>' for c in self.columns)
        rows = "".join(
            "<tr>" + "".join(
                f'<td style="text-align:left;vertical-align:top{";white-space:pre-wrap" if c == "text" else ""}">'
                f"{escape(_cell(v))}</td>" for c, v in zip(self.columns, row)) + "</tr>"
            for row in self.itertuples(index=False))
        return text_html(f'<table class="dataframe agio-messages"><thead><tr>{head}</tr></thead>'
                         f"<tbody>{rows}</tbody></table>")

    def __repr__(self) -> str:
        others = [c for c in self.columns if c != "text"]
        lines = []
        for i, row in enumerate(self.itertuples(index=False)):
            values = dict(zip(self.columns, row))
            lines.append(f"[{i}] " + " · ".join(f"{c} {_cell(values[c])}" for c in others if _cell(values[c])))
            lines.extend(f"    {line}" for line in _cell(values.get("text")).splitlines() or [""])
        return "\n".join(lines)
