"""Feedback from the notebook: the cell's words for a proposed experience (the work is in ``execution.feedback``)."""

from __future__ import annotations

from ..memory.records import Proposal


def describe(proposal: Proposal, *, commented: bool = True) -> str:
    """One short paragraph for the cell: what was proposed and how to review it (and, for feedback given
    without words, how to give them)."""
    e = proposal.experience
    head = ("experience accepted into memory (auto-accept)" if proposal.status == "accepted" else
            f"proposed experience {proposal.id}; review it with `%agio memory accept {proposal.id}` "
            f"(edit with --lesson ...) or `%agio memory reject {proposal.id}`")
    return f"agio: {head}\n  situation: {e['situation']}\n  lesson: {e['lesson']}" + (
        "" if commented else "\n  (say why, and the lesson says it: add your words at the end of "
        "the %agio feedback line and run it again)")
