"""Damage in a store file: how it is reported, and how readable records are salvaged from it.

Every read path reports what it could not read with a :class:`StoreDamageWarning` naming the file,
then goes on with everything that is readable (the other lines of the file, the other sessions).
A compacted file whose snapshot line is cut off still yields every document before the cut.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Doc = dict[str, Any]


class StoreDamageWarning(UserWarning):
    """Part of a store file could not be read; the message names the file and what was skipped."""


@dataclass(frozen=True)
class Damage:
    """One unreadable part of one file (``line`` is 1-based, ``None`` for the file as a whole)."""

    path: Path
    what: str
    line: int | None = None

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"store file {self.path}{where}: {self.what}"


def report(damage: Damage, stacklevel: int = 3) -> None:
    warnings.warn(str(damage), StoreDamageWarning, stacklevel=stacklevel)


_WS = " \t\r\n"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    i = _skip(text, i)
    if i >= len(text) or text[i] != char:
        raise ValueError(f"expected {char!r} at {i}")
    return i + 1


def salvage_snapshot(data: bytes) -> dict[str, dict[str, Doc]]:
    """Every complete document of a snapshot line that may be cut off: ``{table: {doc_id: doc}}``.

    Walks ``{"agio_journal": 1, "snapshot": {table: {doc_id: doc, ...}, ...}}`` one document at a
    time and stops at the first one that does not parse (where the line was cut).
    """
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    out: dict[str, dict[str, Doc]] = {}
    start = text.find('"snapshot"')
    if start < 0:
        return out
    try:
        i = _expect(text, start + len('"snapshot"'), ":")
        i = _expect(text, i, "{")
        while True:
            i = _skip(text, i)
            if text[i] == "}":
                return out
            table, i = decoder.raw_decode(text, i)
            i = _expect(text, i, ":")
            i = _expect(text, i, "{")
            docs = out.setdefault(table, {})
            while True:
                i = _skip(text, i)
                if text[i] == "}":
                    i += 1
                    break
                doc_id, i = decoder.raw_decode(text, i)
                i = _skip(text, _expect(text, i, ":"))
                doc, i = decoder.raw_decode(text, i)
                if not isinstance(doc, dict):
                    return out
                docs[str(doc_id)] = doc
                i = _skip(text, i)
                if text[i] == ",":
                    i += 1
            i = _skip(text, i)
            if text[i] == ",":
                i += 1
    except (ValueError, IndexError):  # JSONDecodeError is a ValueError: the cut
        return out
