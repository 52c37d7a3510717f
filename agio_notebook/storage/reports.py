"""What store maintenance returns: plain data every backend fills in the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .damage import Damage


@dataclass(frozen=True)
class SessionSize:
    session_id: str
    steps: int
    runs: int
    bytes: int


@dataclass
class StoreStats:
    """``stats()``: how much the store holds, and where."""

    sessions: int = 0
    runs: int = 0
    steps: int = 0
    events: int = 0
    bytes: int = 0
    runs_by_status: dict[str, int] = field(default_factory=dict)
    largest: list[SessionSize] = field(default_factory=list)  # by bytes, largest first

    def to_text(self) -> str:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.runs_by_status.items())) or "none"
        lines = [f"sessions {self.sessions}", f"runs     {self.runs} ({statuses})", f"steps    {self.steps}",
                 f"events   {self.events}", f"bytes    {self.bytes}"]
        if self.largest:
            lines.append("largest sessions:")
            lines += [f"  {s.session_id}  {s.steps} steps  {s.runs} runs  {s.bytes} bytes" for s in self.largest]
        return "\n".join(lines)


@dataclass(frozen=True)
class Repaired:
    """One file rewritten by ``repair()``: what was salvaged, and where the damaged original is kept
    (``kept_as`` None: nothing was rewritten, a loss of steps was recorded in the database)."""

    path: Path | str
    kept_as: Path | None
    records: int
    damage: tuple[Damage, ...]

    def to_text(self) -> str:
        if self.kept_as is None:
            return f"recorded in {self.path}: " + "; ".join(d.what for d in self.damage)
        return (f"repaired {Path(self.path).name}: {self.records} records kept; the damaged original is "
                f"{self.kept_as}")


@dataclass
class Pruned:
    """What ``prune()`` or a delete removed."""

    sessions: int = 0
    runs: int = 0
    steps: int = 0
    events: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(self.sessions + other.sessions, self.runs + other.runs, self.steps + other.steps,
                      self.events + other.events)

    def to_text(self) -> str:
        return f"removed {self.sessions} sessions, {self.runs} runs, {self.steps} steps, {self.events} events"
