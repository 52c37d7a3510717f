"""Explore and compare: diff attempts, sweep a step across variants, score runs, see a session as a tree."""

from .diff import RunDiff, diff
from .evaluate import Comparison, Evaluation, EvaluationError, compare, evaluate, evaluations
from .sweep import SweepResult, sweep
from .tree import RunTree, tree

__all__ = ["Comparison", "Evaluation", "EvaluationError", "RunDiff", "RunTree", "SweepResult", "compare", "diff",
           "evaluate", "evaluations", "sweep", "tree"]
