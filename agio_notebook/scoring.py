"""Scorers: plain functions over a run (final text, steps, tool-call path); see ``explore/scoring.py``."""

from .explore.judge import ModelGraded, model_graded
from .explore.scoring import (JUDGE_PROMPT, ScoredRun, ScoreError, Scorer, called_before_answer, exact, llm_judge,
                              regex, score_run, score_runs, tool_path_is)

__all__ = ["JUDGE_PROMPT", "ModelGraded", "model_graded", "ScoreError", "ScoredRun", "Scorer", "called_before_answer", "exact", "llm_judge",
           "regex", "score_run", "score_runs", "tool_path_is"]
