"""Explore and compare: diff attempts, sweep a step across variants, score runs, see a session as a tree."""

from .diff import RunDiff, diff
from .sweep import SweepResult, sweep
from .tree import RunTree, tree

__all__ = ["RunDiff", "RunTree", "SweepResult", "diff", "sweep", "tree"]
