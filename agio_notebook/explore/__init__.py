"""Explore and compare: diff attempts, sweep a step across variants, score runs, see a session as a tree."""

from .diff import RunDiff, diff
from .sweep import SweepResult, sweep

__all__ = ["RunDiff", "SweepResult", "diff", "sweep"]
