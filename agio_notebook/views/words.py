"""Counts in words: ``1 tool call``, ``2 tool calls`` (the extension's ``words.ts`` says the same)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural`` for irregular ones)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def seconds(ms: float) -> str:
    """A duration a person waited (a pause), in seconds with one decimal: ``66.1 s``."""
    return f"{ms / 1000:.1f} s"
