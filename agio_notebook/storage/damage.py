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
from typing import Any, Iterable, Mapping

Doc = dict[str, Any]


class StoreDamageWarning(UserWarning):
    """Part of a store file could not be read; the message names the file and what was skipped."""


@dataclass(frozen=True)
class Damage:
    """One unreadable part of one file (``line`` is 1-based, ``None`` for the file as a whole)."""

    path: Path | str  # a file, or a database's (password-free) URL
    what: str
    line: int | None = None
    lost: tuple[tuple[str, int, int], ...] = ()  # lost steps: (run id, committed, left) per run

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"store file {self.path}{where}: {self.what}"


# damage is reported on every read that meets it, not once per place in the code that read it
warnings.filterwarnings("always", category=StoreDamageWarning)


def report(damage: Damage, stacklevel: int = 3) -> None:
    warnings.warn(str(damage), StoreDamageWarning, stacklevel=stacklevel)


def lost_steps(where: Path | str, session_id: str, runs: Iterable[Doc], held: Mapping[Any, int],
               acknowledged: Mapping[str, int] | None = None) -> Damage | None:
    """Steps a session's runs committed that its file (or table) no longer holds (``held``: steps found
    per run id), as one damage record.

    A run's record counts the steps it stored (``metrics.steps``; ``runs`` may hold a run's record twice,
    from an index and from the session, and the larger count holds); superseded runs are left out
    (pruning removes their steps). Every read of the session meets the loss again, so it is never forgotten once
    a torn tail has been cut; only a repair acknowledges it (``acknowledged``: run id -> the steps left when
    ``agio store repair`` recorded the loss), until more go missing."""
    committed: dict[str, int] = {}
    replaced: set[str] = set()
    for run in runs:  # a run may come twice (an index and a session file): the larger count holds
        committed[run["id"]] = max(committed.get(run["id"], 0), (run.get("metrics") or {}).get("steps") or 0)
        if run.get("superseded_by"):
            replaced.add(run["id"])
    known = acknowledged or {}
    short = [(rid, n, held.get(rid, 0)) for rid, n in committed.items()
             if rid not in replaced and held.get(rid, 0) < n and known.get(rid) != held.get(rid, 0)]
    if not short:
        return None
    missing = sum(c - h for _, c, h in short)
    detail = "; ".join(f"run {rid[:8]} committed {c}, {h} left" for rid, c, h in short[:3])
    return Damage(where, f"session {session_id} has lost {missing} committed step{'s' if missing != 1 else ''} "
                         f"({detail}{'; ...' if len(short) > 3 else ''}); restore it from a backup, or "
                         "`agio store repair` to record the loss and read on", lost=tuple(short))


def acknowledgements(damage: Damage, stamp: str) -> list[Doc]:
    """What a repair records of lost steps (the ``lost`` records a session keeps), one per short run."""
    return [{"id": rid, "committed": committed, "left": left, "repaired_at": stamp}
            for rid, committed, left in damage.lost]


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
