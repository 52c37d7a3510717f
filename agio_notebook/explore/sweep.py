"""sweep(): regenerate one step of a conversation across agents, models, prompts and settings.

The source session is forked just before step ``at`` once per variant and repeat, and each fork
continues from there: with the step's user message (or a prompt variant in its place) when ``at`` is
a user step, or by asking the model again when it is a model step. The runs are one batch of the
scheduling executor (its concurrency cap, fair queue, records and cost budget); each run is scored
once the batch ends. The results frame has a row per run, and the summary a row per variant with
means and 95% intervals that fit their measure: Wilson for a 0/1 score, a percentile bootstrap for
other scores and for tokens, latency and cost (it never leaves the range of the values).
"""

from __future__ import annotations

import asyncio
import copy
import warnings
import itertools
import math
from dataclasses import dataclass, field, fields, replace
from html import escape
from typing import Any, Mapping, Sequence

import pandas as pd

from ..agent import Agent
from ..core import (AgentRun, AgioError, ExecutionConfig, InvalidOperationError, NotFoundError, RunStatus,
                    StepRole, new_id)
from ..execution.retry import check_continuation_point, check_sequence_exists, step_number
from ..models.pricing import check_priced, format_cost
from ..models.settings import KNOWN_SETTINGS, check_settings, merge_settings
from ..storage import open_repository
from ..storage.base import Repository
from ..views import text_html
from ..storage.ids import resolve_run_or_session
from ..scheduling import BatchHandle, ExecStatus, ExecutionRequest, default_executor
from .runner import run_coroutine
from .scoring import ScoredRun, ScoreError, Scorer, score_run, scorer_name, stored_scores

AXES = ("agent", "model", "prompt", "settings")
_CONFIG_FIELDS = {f.name for f in fields(ExecutionConfig)}
METRICS = ("total_tokens", "latency_ms", "cost")
MIME_TYPE = "application/vnd.agio.sweep+json"
WILSON, BOOTSTRAP = "Wilson", "bootstrap"


class SweepError(AgioError, ValueError):
    """A sweep that cannot start: one clear line saying why."""


@dataclass
class Variant:
    labels: dict[str, str]
    agent: Agent
    config: ExecutionConfig | None = None
    prompt: str | None = None


@dataclass
class Job:
    index: int
    variant: Variant
    repeat: int
    run: AgentRun | None = None
    scores: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why no run record exists (budget spent, or the run could not start)
    skipped_status: str = "budget_exceeded"


def _label(value: Any) -> str:
    if isinstance(value, Agent):
        return f"{value.name}/{value.model_name}"
    if isinstance(value, str):
        return value if len(value) <= 40 else value[:39] + "…"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(getattr(value, "name", None) or type(value).__name__)


def _axis(values: Sequence[Any] | Mapping[str, Any] | None) -> list[tuple[str, Any]] | None:
    """``[(label, value)]``: a dict's keys are its labels; repeated labels get ``#2``, ``#3``."""
    if values is None:
        return None
    pairs = list(values.items()) if isinstance(values, Mapping) else [(_label(v), v) for v in values]
    if not pairs:
        raise SweepError("a sweep axis was given with no values")
    seen: dict[str, int] = {}
    out = []
    for label, value in pairs:
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label}#{seen[label]}", value))
    return out


def _apply_settings(agent: Agent, config: ExecutionConfig | None, settings: Mapping[str, Any]
                    ) -> tuple[Agent, ExecutionConfig | None]:
    """Model settings (``temperature``, ``max_tokens``, ...) go with every model call of the variant;
    other ExecutionConfig fields (``max_steps``, ``max_cost``, ...) to its runs' config."""
    model_keys = {k: v for k, v in settings.items() if k in KNOWN_SETTINGS}
    run_keys = {k: v for k, v in settings.items() if k not in KNOWN_SETTINGS}
    unknown = sorted(set(run_keys) - _CONFIG_FIELDS)
    if unknown:
        raise SweepError(f"setting(s) {', '.join(map(repr, unknown))} are neither model settings "
                         f"({', '.join(sorted(KNOWN_SETTINGS))}) nor ExecutionConfig fields")
    if run_keys:
        config = replace(config or agent.config or ExecutionConfig(), **run_keys)
    if model_keys:
        agent = copy.copy(agent)
        agent.model_settings = merge_settings(agent.model_settings, check_settings(model_keys, "settings"))
    return agent, config


def variants(agent: Agent | None, agents: Any = None, models: Any = None, prompts: Any = None,
             settings: Any = None) -> list[Variant]:
    """The cross product of the given axes, each variant labelled per axis."""
    axes = {"agent": _axis(agents), "model": _axis(models), "prompt": _axis(prompts), "settings": _axis(settings)}
    if agent is None and axes["agent"] is None:
        raise SweepError("sweep needs agent= (the agent to vary) or agents=[...]")
    given = [name for name in AXES if axes[name] is not None]
    out = []
    for combo in itertools.product(*(axes[name] for name in given)):
        chosen = dict(zip(given, combo))
        base = chosen["agent"][1] if "agent" in chosen else agent
        if not isinstance(base, Agent):
            raise SweepError(f"agents must be Agent objects, got {type(base).__name__}")
        config = None
        if "model" in chosen:
            base = base.with_model(chosen["model"][1])
        if "settings" in chosen:
            if not isinstance(chosen["settings"][1], Mapping):
                raise SweepError("settings must be dicts, e.g. settings=[{'temperature': 0}, {'temperature': 1}]")
            base, config = _apply_settings(base, config, chosen["settings"][1])
        prompt = chosen["prompt"][1] if "prompt" in chosen else None
        if prompt is not None and not isinstance(prompt, str):
            raise SweepError(f"prompts must be strings, got {type(prompt).__name__}")
        out.append(Variant({name: label for name, (label, _) in chosen.items()}, base, config, prompt))
    return out


def _clean(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def wilson(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(rate, low, high) of 0/1 values with Wilson's score interval: always inside [0, 1]."""
    clean = _clean(values)
    n = len(clean)
    if n == 0:
        return math.nan, math.nan, math.nan
    p = sum(clean) / n
    if n < 2:
        return p, math.nan, math.nan
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + confidence / 2))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)


def bootstrap(values: Sequence[float], confidence: float = 0.95, resamples: int = 2000
              ) -> tuple[float, float, float]:
    """(mean, low, high) by a percentile bootstrap of the mean (seeded: the same values, the same interval).

    The bounds are means of resampled values, so they stay within the values' range: a score on a
    bounded scale gets an interval on that scale.
    """
    clean = _clean(values)
    n = len(clean)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(clean) / n
    if n < 2:
        return mean, math.nan, math.nan
    import numpy as np

    data = np.asarray(clean)
    means = data[np.random.default_rng(0).integers(0, n, (resamples, n))].mean(axis=1)
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return mean, float(low), float(high)


def interval_method(column: str, values: Sequence[Any]) -> str:
    """Which interval fits a summary column: Wilson for a 0/1 score, else a bootstrap (it stays within the
    values' range: never a negative latency or a score off its scale)."""
    clean = _clean(values)
    binary = column not in METRICS and clean and all(v in (0.0, 1.0) for v in clean)
    return WILSON if binary else BOOTSTRAP


_INTERVALS = {WILSON: wilson, BOOTSTRAP: bootstrap}


class SweepResult:
    """The runs of a sweep: ``frame`` (a row per run), ``summary`` (a row per variant), a comparison view.

    ``batch`` names the executor batch the runs went through (its records and logs:
    ``scheduling.executions(batch=...)``).
    """

    def __init__(self, jobs: list[Job], axes: list[str], score_names: list[str], source: str, at: int,
                 repository: Repository, batch: str | None = None):
        self.jobs = jobs
        self.axes = axes
        self.score_names = score_names
        self.source = source
        self.at = at
        self.repository = repository
        self.batch = batch

    @property
    def frame(self) -> pd.DataFrame:
        rows = []
        for job in self.jobs:
            run = job.run
            m = run.metrics if run is not None else None
            row: dict[str, Any] = {axis: job.variant.labels.get(axis) for axis in self.axes}
            row.update({
                "repeat": job.repeat, "run_id": run.id if run else None, "session_id": run.session_id if run else None,
                "status": run.status.value if run else job.skipped_status,
                "final_text": run.final_text if run else None,
                "prompt_tokens": m.prompt_tokens if m else None, "completion_tokens": m.completion_tokens if m else None,
                "total_tokens": m.total_tokens if m else None, "latency_ms": m.duration_ms if m else None,
                "cost": m.cost if m else None, "error": (run.error if run else job.skipped)})
            for name in self.score_names:
                value = job.scores.get(name)
                row[f"score_{name}"] = None if isinstance(value, ScoreError) else value
                row[f"score_{name}_error"] = value.message if isinstance(value, ScoreError) else None
            rows.append(row)
        frame = pd.DataFrame(rows)
        for axis in self.axes:
            frame[axis] = frame[axis].astype("string")
        for col in ("run_id", "session_id", "final_text", "error"):
            frame[col] = frame[col].astype("string")
        frame["status"] = pd.Categorical(frame["status"], categories=[s.value for s in RunStatus])
        for col in ("repeat", "prompt_tokens", "completion_tokens", "total_tokens"):
            frame[col] = frame[col].astype("Int64")
        for col in ("latency_ms", "cost", *(f"score_{n}" for n in self.score_names)):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
        for name in self.score_names:
            frame[f"score_{name}_error"] = frame[f"score_{name}_error"].astype("string")
        return frame

    @property
    def interval_methods(self) -> dict[str, str]:
        """Summary column -> how its intervals are computed (:func:`interval_method`)."""
        frame = self.frame
        cols = [f"score_{n}" for n in self.score_names] + list(METRICS)
        return {col: interval_method(col, frame[col].tolist()) for col in cols}

    @property
    def summary(self) -> pd.DataFrame:
        """Per variant: runs, and mean with a 95% interval of each score, tokens, latency and cost
        (``interval_methods`` says which interval each column has)."""
        frame = self.frame
        methods = self.interval_methods
        keys = self.axes or None
        groups = frame.groupby(keys, sort=False, observed=True) if keys else [((), frame)]
        rows = []
        for key, group in groups:
            key = key if isinstance(key, tuple) else (key,)
            row: dict[str, Any] = dict(zip(self.axes, key))
            row["runs"] = len(group)
            row["completed"] = int((group["status"] == "completed").sum())
            for col in [f"score_{n}" for n in self.score_names] + list(METRICS):
                mean, low, high = _INTERVALS[methods[col]](group[col].tolist())
                if col == "cost" and group[col].isna().any():
                    mean = low = high = math.nan  # one unknown price makes the variant's cost unknown
                row[f"{col}_mean"], row[f"{col}_ci_low"], row[f"{col}_ci_high"] = mean, low, high
            rows.append(row)
        return pd.DataFrame(rows)

    def _ranked(self, score: str | None) -> pd.DataFrame:
        name = score or (self.score_names[0] if self.score_names else None)
        if name is None:
            raise SweepError("this sweep has no scores to rank by")
        frame = self.frame.dropna(subset=[f"score_{name}", "run_id"])
        if frame.empty:
            raise SweepError(f"no run of this sweep has a {name!r} score")
        return frame.sort_values(f"score_{name}", kind="stable")

    def best_run(self, score: str | None = None) -> str:
        return str(self._ranked(score)["run_id"].iloc[-1])

    def worst_run(self, score: str | None = None) -> str:
        return str(self._ranked(score)["run_id"].iloc[0])

    def _repr_html_(self) -> str:
        return comparison_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The extension draws the comparison from the data; HTML and text for other viewers."""
        return {MIME_TYPE: comparison_data(self), "text/html": comparison_html(self), "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"SweepResult({len(self.jobs)} runs, axes={self.axes}, scores={self.score_names})"


def _fmt(v: float, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "unknown" if kind == "cost" else "–"
    if kind == "cost":
        return format_cost(v)
    return f"{v:.0f}" if kind in ("total_tokens", "latency_ms") else f"{v:.2f}"


def _number(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def comparison_data(result: SweepResult) -> dict[str, Any]:
    """The sweep bundle's JSON: per variant its labels and, per column, mean and interval (None: unknown)."""
    summary = result.summary
    methods = result.interval_methods
    variants = []
    for _, row in summary.iterrows():
        variants.append({
            "labels": {a: None if pd.isna(row[a]) else str(row[a]) for a in result.axes},
            "runs": int(row["runs"]), "completed": int(row["completed"]),
            "values": {c.removeprefix("score_"): {"mean": _number(row[f"{c}_mean"]), "low": _number(row[f"{c}_ci_low"]),
                                                  "high": _number(row[f"{c}_ci_high"])} for c in methods}})
    return {"source": result.source, "at": result.at, "runs": len(result.jobs), "axes": list(result.axes),
            "scores": list(result.score_names), "metrics": list(METRICS), "confidence": 0.95,
            "methods": {c.removeprefix("score_"): m for c, m in methods.items()}, "variants": variants}


def comparison_html(result: SweepResult) -> str:
    """Per variant: each mean with its interval drawn as a bar, best mean of each column in bold.

    Each column's header names its interval (Wilson or bootstrap); dollar amounts stay
    text (:func:`text_html`), never LaTeX.
    """
    summary = result.summary
    methods = result.interval_methods
    cols = [f"score_{n}" for n in result.score_names] + list(METRICS)
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{escape(a)}</th>" for a in result.axes)
    head += "<th style='padding:2px 8px'>runs</th>" + "".join(
        f"<th style='text-align:left;padding:2px 8px'>{escape(c.removeprefix('score_'))}"
        f"<div class='agio-sweep-method' style='font-weight:normal;font-size:11px;color:#57606a'>"
        f"95% {escape(methods[c])}</div></th>" for c in cols)
    body = []
    tops = {c: summary[f"{c}_ci_high"].max(skipna=True) if summary[f"{c}_ci_high"].notna().any()
            else summary[f"{c}_mean"].max(skipna=True) for c in cols}
    best = {c: (summary[f"{c}_mean"].max(skipna=True) if c.startswith("score_")
                else summary[f"{c}_mean"].min(skipna=True)) for c in cols}
    for _, row in summary.iterrows():
        cells = "".join(f"<td style='padding:2px 8px'>{escape(str(row[a]))}</td>" for a in result.axes)
        cells += f"<td style='padding:2px 8px;text-align:center'>{row['completed']}/{row['runs']}</td>"
        for c in cols:
            mean, low, high = row[f"{c}_mean"], row[f"{c}_ci_low"], row[f"{c}_ci_high"]
            kind = c if c in METRICS else "score"
            text = _fmt(mean, kind)
            if not math.isnan(low):
                text += f" <span style='color:#57606a'>[{_fmt(low, kind)}, {_fmt(high, kind)}]</span>"
            top = tops[c] if tops[c] and not math.isnan(tops[c]) else 0
            bar = ""
            if top > 0 and not math.isnan(mean):
                width = max(1.0, 100 * mean / top)
                bar = (f"<div style='height:4px;background:#0969da;width:{width:.0f}%;opacity:.6'></div>")
            weight = "bold" if not math.isnan(mean) and mean == best[c] else "normal"
            cells += f"<td style='padding:2px 8px;font-weight:{weight}'>{text}{bar}</td>"
        body.append(f"<tr class='agio-sweep-variant'>{cells}</tr>")
    return text_html(
        f"<div class='agio-sweep' style='font-family:var(--jp-ui-font-family,system-ui,sans-serif);"
        f"font-size:13px'><b>agio sweep</b> <span style='color:#57606a;font-size:11px'>step {result.at} of "
        f"session {escape(result.source[:8])} · {len(result.jobs)} runs · means with 95% intervals "
        f"(Wilson for 0/1 scores, a percentile bootstrap for the rest)</span>"
        f"<table style='border-collapse:collapse'><tr>{head}</tr>{''.join(body)}</table></div>")


class Monitor:
    """Live progress of a sweep, redrawn in the calling cell (or printed nowhere outside IPython)."""

    def __init__(self, jobs: list[Job], enabled: bool = True):
        self.jobs = jobs
        self.handle = None
        self._shown = ""
        if enabled:
            try:
                from IPython import get_ipython
                from IPython.display import HTML, display

                if get_ipython() is not None:
                    self.handle = display(HTML(self.html()), display_id=True)
            except ImportError:
                self.handle = None

    def html(self) -> str:
        done = sum(j.run is not None or j.skipped is not None for j in self.jobs)
        spent = [j.run.metrics.cost for j in self.jobs if j.run is not None]
        cost = None if any(c is None for c in spent) else sum(spent)
        failed = sum(j.run is not None and j.run.status is not RunStatus.COMPLETED for j in self.jobs)
        pct = 100 * done / max(1, len(self.jobs))
        return text_html(
            f"<div class='agio-sweep-monitor' style='font-size:12px'>sweep: {done}/{len(self.jobs)} runs · "
            f"{failed} not completed · cost {format_cost(cost)}"
            f"<div style='background:#d0d7de;height:6px;width:240px'><div style='background:#1a7f37;"
            f"height:6px;width:{pct:.0f}%'></div></div></div>")

    def update(self) -> None:
        """Redraw when something changed (called every 0.1 s while the sweep runs)."""
        if self.handle is not None and (html := self.html()) != self._shown:
            from IPython.display import HTML

            self._shown = html
            self.handle.update(HTML(html))


def _session_of(source: Any, repository: Repository) -> str:
    ref = getattr(source, "session_id", None) or source
    if not isinstance(ref, str):
        raise SweepError(f"sweep source must be a session id, run id or run result, got {type(source).__name__}")
    try:
        kind, ref = resolve_run_or_session(repository, ref, "session or run")
    except NotFoundError as exc:
        raise type(exc)(f"sweep: {exc}") from None
    if kind == "session":
        return ref
    return repository.get_run(ref).session_id  # type: ignore[union-attr]


def sweep(source: Any, at: int, *, agent: Agent | None = None, agents: Any = None, models: Any = None,
          prompts: Any = None, settings: Any = None, repeats: int = 1, scorers: Sequence[Scorer] = (),
          repository: Repository | None = None, concurrency: int = 4, max_cost: float | None = None,
          reuse: bool = False, monitor: bool = True) -> SweepResult:
    """Fork ``source`` just before step ``at`` once per variant and repeat, run, score, and compare.

    Axes (any combination; their cross product is swept): ``agents``, ``models``, ``prompts`` (the user
    message at ``at``), ``settings`` (dicts of model settings or ExecutionConfig fields); each a list,
    or a dict of label -> value. ``max_cost`` (USD) caps the whole sweep: no run starts once it is
    spent, and each run gets what is left as its own budget.
    """
    if repository is None:
        repository = open_repository()
    if repeats < 1:
        raise SweepError(f"repeats must be >= 1, got {repeats}")
    if concurrency < 1:
        raise SweepError(f"concurrency must be >= 1, got {concurrency}")
    at = step_number(at, "at")
    session_id = _session_of(source, repository)
    steps = repository.get_steps(session_id)
    try:
        check_sequence_exists(steps, at, session_id)
    except NotFoundError as exc:
        raise NotFoundError(f"sweep: {exc}") from None
    step = next(s for s in steps if s.sequence == at)
    if step.role is StepRole.TOOL:
        raise InvalidOperationError(f"sweep: step {at} is a tool result; sweep the model step that called it")
    if prompts is not None and step.role is not StepRole.USER:
        raise SweepError(f"sweep: prompts replace the user message at step {at}, but step {at} is a "
                         f"{step.role.value} step")
    if at > 1:
        check_continuation_point(steps, at - 1, "sweep")
    elif step.role is not StepRole.USER:
        raise SweepError(f"sweep: step 1 is a {step.role.value} step; with nothing before it there is no "
                         "conversation to fork")
    chosen = variants(agent, agents, models, prompts, settings)
    if max_cost is not None:
        for v in chosen:
            check_priced(v.agent.model_name)
    axes = [a for a in AXES if a in chosen[0].labels]
    jobs = [Job(i, v, r) for i, (v, r) in enumerate((v, r) for v in chosen for r in range(1, repeats + 1))]
    names = [scorer_name(s) for s in scorers]
    executor = default_executor(repository)
    batch_name = f"sweep-{new_id()[:8]}"
    state = executor.batch_state(batch_name, concurrency=concurrency, max_cost=max_cost)
    fork = (session_id, at - 1)  # at 1: a new session, still re-entering the source's record
    requests = []
    for job in jobs:
        query = None
        if step.role is StepRole.USER:
            query = job.variant.prompt if job.variant.prompt is not None else (step.content or "")
        requests.append((ExecutionRequest(agent=job.variant.agent, config=job.variant.config, query=query,
                                          fork=fork, reuse=reuse, batch=batch_name, index=job.index,
                                          inputs={**job.variant.labels, "repeat": job.repeat}), None))
    handle = BatchHandle(batch_name, executor, state, [])
    mon = Monitor(jobs, monitor)
    ids: list[str] = []

    def collect() -> None:
        """Each finished execution becomes its job's run (or the reason it has none)."""
        for job, execution_id in zip(jobs, ids):
            rec = executor.records[execution_id]
            if job.run is not None or job.skipped is not None or not rec.status.is_terminal:
                continue
            run = repository.get_run(rec.run_id) if rec.run_id else None
            if run is not None:
                job.run = run
            elif rec.status is ExecStatus.CANCELLED and max_cost is not None and "cost budget" in (rec.error or ""):
                job.skipped = f"sweep budget max_cost (${max_cost:g}) spent before this run started"
            else:
                job.skipped, job.skipped_status = rec.error or rec.status.value, (
                    "cancelled" if rec.status is ExecStatus.CANCELLED else "failed")

    try:
        ids += executor.submit_many(requests)
        while not handle.done:
            handle.wait(0.1 if mon.handle is not None else None)
            collect()
            mon.update()
    except BaseException:  # an interrupt anywhere in the wait cancels what has not run (runs done stay)
        handle.cancel_if_running()
        raise
    collect()
    mon.update()

    async def score(job: Job) -> None:
        if job.run is None:
            return
        scored = ScoredRun.load(job.run.id, repository)
        job.scores = await score_run(scored, scorers)
        if job.scores:
            job.run.scores = stored_scores(job.scores)
            repository.commit(run=job.run)

    async def score_all() -> None:
        limit = asyncio.Semaphore(max(1, concurrency))

        async def one(job: Job) -> None:
            async with limit:
                await score(job)
        await asyncio.gather(*(one(j) for j in jobs))

    if scorers:
        try:
            run_coroutine(score_all())
        except KeyboardInterrupt:  # the runs are done and stored: return them, with the scores that were made
            warnings.warn("sweep: scoring was interrupted; runs without a score have none", stacklevel=2)
    return SweepResult(jobs, axes, names, session_id, at, repository, batch_name)
