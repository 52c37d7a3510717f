"""evaluate(): an agent (or several variants) over a dataset, K epochs, scored, with honest statistics.

Each (variant, sample, epoch) is an execution of the scheduling executor: one batch per variant, so
concurrency caps, rate limits, budgets, Ray (``backend="ray"``) and resume after a kill come from the
scheduler, and each execution is a stored run. Calling ``evaluate`` again with the same ``name``
runs only what did not finish and scores again (a judge's grades are reused).

Everything is checked before anything is stored or queued (one :class:`EvaluationError` line); the
evaluation itself (its definition, every row's run and scores) is stored in one append once every
score is a number, so a scorer that raises leaves the runs (reused next time) and no half evaluation.
Statistics are in ``stats.py``; the notebook view in ``notebook/evaluation_view.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from ..agent import Agent
from ..core import AgioError, NotFoundError, RunStatus, new_id, now
from ..models.pricing import check_priced
from ..scheduling import BatchHandle, SchedulingError, batch
from ..scheduling.batch import _rows
from ..storage import current_store
from ..storage.base import Repository
from . import stats
from .judge import ModelGraded
from .runner import run_coroutine
from .scoring import ScoredRun, scorer_name

MIME_TYPE = "application/vnd.agio.evaluation+json"
JOURNAL = "evaluations"
_KEYS = {"evaluations": lambda d: d["id"]}
SCORED = (RunStatus.COMPLETED, RunStatus.MAX_STEPS, RunStatus.BUDGET_EXCEEDED)  # the agent's own outcomes


class EvaluationError(AgioError, ValueError):
    """An evaluation that cannot run or be scored: one clear line saying why."""


@dataclass
class SampleRun(ScoredRun):
    """What a scorer sees in an evaluation: the run, and ``sample``, its row of the dataset."""

    sample: dict[str, Any] = field(default_factory=dict)


# -- checking the inputs --------------------------------------------------------------------------------
def _pairs(given: Any, name_of: Callable[[int, Any], str], refusal: str) -> list[tuple[str, Any]]:
    """``(name, value)`` pairs of a dict (its keys name them) or of a list (``name_of`` names them)."""
    if isinstance(given, Mapping):
        return [(str(k), v) for k, v in given.items()]
    if isinstance(given, Sequence) and not isinstance(given, str):
        return [(name_of(i, v), v) for i, v in enumerate(given)]
    raise EvaluationError(f"{refusal}, got {type(given).__name__}")


def _repeated(names: Sequence[str]) -> str | None:
    """The first name that comes twice."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _variants(agent_or_variants: Any) -> list[tuple[str, Agent]]:
    if isinstance(agent_or_variants, Agent):
        agent_or_variants = [agent_or_variants]
    pairs = _pairs(agent_or_variants, lambda i, v: getattr(v, "name", None) or f"variant {i + 1}",
                   "evaluate takes an Agent, a list of Agents or a dict of label -> Agent")
    if not pairs:
        raise EvaluationError("evaluate was given no variants")
    for label, agent in pairs:
        if not isinstance(agent, Agent):
            raise EvaluationError(f"variant {label!r} is a {type(agent).__name__}, not an agio Agent")
    twice = _repeated([label for label, _ in pairs])
    if twice is not None:
        raise EvaluationError(f"two variants are labelled {twice!r}; give them distinct labels with a dict")
    return pairs


def _dataset(dataset: Any) -> pd.DataFrame:
    if isinstance(dataset, pd.DataFrame):
        frame = dataset.reset_index(drop=True)
    elif isinstance(dataset, Sequence) and not isinstance(dataset, str):
        bad = next((i for i, row in enumerate(dataset) if not isinstance(row, Mapping)), None)
        if bad is not None:
            raise EvaluationError(f"dataset[{bad}] is a {type(dataset[bad]).__name__}, not a dict of columns")
        frame = pd.DataFrame(list(dataset))
    else:
        raise EvaluationError(f"the dataset must be a DataFrame or a list of dicts, got {type(dataset).__name__}")
    if frame.empty:
        raise EvaluationError("the dataset is empty: nothing to evaluate")
    return frame


def _sample_ids(frame: pd.DataFrame) -> list[str]:
    """The ``id`` column (unique) when there is one, else the row positions."""
    if "id" not in frame.columns:
        return [str(i) for i in range(len(frame))]
    ids = [str(v) for v in frame["id"]]
    twice = _repeated(ids)
    if twice is not None:
        raise EvaluationError(f"the dataset's id column repeats {twice!r}; sample ids must be unique")
    return ids


def _template(prompt: str | None, frame: pd.DataFrame) -> str:
    if prompt is not None and not isinstance(prompt, str):
        raise EvaluationError(f"prompt must be a string template such as 'Q: {{question}}', got {type(prompt).__name__}")
    columns = [str(c) for c in frame.columns]
    if prompt is None:
        inputs = [c for c in columns if c in ("input", "question", "query", "prompt")]
        if not inputs:
            raise EvaluationError(f"the dataset has columns {', '.join(columns)}; say which make the prompt: "
                                  "prompt='... {column} ...'")
        prompt = "{" + inputs[0] + "}"
    try:
        _rows(frame, prompt)  # the batch's own check: every {column} exists and every row fills it
    except SchedulingError as exc:
        raise EvaluationError(str(exc)) from None
    return prompt


def _arity(fn: Callable[..., Any]) -> int:
    """1 for ``f(run)``, 2 for ``f(run, sample)``."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return 1
    return 2 if len(params) >= 2 else 1


def _scorers(scorers: Any) -> list[tuple[str, Callable[..., Any]]]:
    if callable(scorers):
        scorers = [scorers]
    if isinstance(scorers, Sequence) and not isinstance(scorers, str):
        bad = next((i for i, s in enumerate(scorers) if not callable(s)), None)
        if bad is not None:
            raise EvaluationError(f"scorers[{bad}] is a {type(scorers[bad]).__name__}, not a function")
    pairs = _pairs(scorers, lambda i, s: scorer_name(s),
                   "scorers must be a scorer, a list of scorers or a dict of name -> scorer")
    if not pairs:
        raise EvaluationError("evaluate needs at least one scorer")
    for name, fn in pairs:
        if not callable(fn):
            raise EvaluationError(f"scorer {name!r} is a {type(fn).__name__}, not a function")
    twice = _repeated([n for n, _ in pairs])
    if twice is not None:
        raise EvaluationError(f"two scorers are named {twice!r}; pass a dict of name -> scorer")
    return pairs


def _whole(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise EvaluationError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def _fingerprint(frame: pd.DataFrame, prompt: str) -> str:
    return hashlib.sha1((frame.to_json(orient="records", date_format="iso") + "\0" + prompt).encode()).hexdigest()


# -- results ----------------------------------------------------------------------------------------------
@dataclass
class Row:
    variant: str
    sample: str
    epoch: int
    status: str
    run_id: str | None
    session_id: str | None
    final_text: str | None
    latency_ms: float | None
    total_tokens: int | None
    cost: float | None
    error: str | None
    scores: dict[str, float]
    judge_runs: dict[str, str]


class Evaluation:
    """A stored evaluation: ``frame`` (a row per variant, sample and epoch), ``summary`` (a row per variant
    and scorer: mean, standard error, interval and its method), ``compare(a, b)``."""

    def __init__(self, doc: dict[str, Any], repository: Repository):
        self.doc = doc
        self.repository = repository
        self.name: str = doc["id"]
        self.seed: int = doc["seed"]
        self.epochs: int = doc["epochs"]
        self.confidence: float = doc["confidence"]
        self.resamples: int = doc["resamples"]
        self.variants: list[str] = [v["label"] for v in doc["variants"]]
        self.scorers: list[str] = doc["scorers"]
        self.samples: list[str] = doc["samples"]
        self.rows = [Row(**r) for r in doc["rows"]]
        self._runs: dict[tuple[str, str], list[str]] | None = None
        self._by: dict[tuple[str, str], tuple[list[float], list[str]]] | None = None

    @property
    def models(self) -> dict[str, str | None]:
        """The model each variant ran with, as recorded."""
        return {v["label"]: v.get("model") for v in self.doc["variants"]}

    @property
    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame({
            "variant": pd.Series([r.variant for r in self.rows], dtype="string"),
            "sample": pd.Series([r.sample for r in self.rows], dtype="string"),
            "epoch": pd.Series([r.epoch for r in self.rows], dtype="Int64"),
            "status": pd.Series([r.status for r in self.rows], dtype="string"),
            "final_text": pd.Series([r.final_text for r in self.rows], dtype="string"),
            "run_id": pd.Series([r.run_id for r in self.rows], dtype="string"),
            "session_id": pd.Series([r.session_id for r in self.rows], dtype="string"),
            "latency_ms": pd.Series([r.latency_ms for r in self.rows], dtype="float64"),
            "total_tokens": pd.Series([r.total_tokens for r in self.rows], dtype="Int64"),
            "cost": pd.Series([r.cost for r in self.rows], dtype="float64"),
            "error": pd.Series([r.error for r in self.rows], dtype="string")})
        for name in self.scorers:
            frame[f"score_{name}"] = pd.Series([r.scores.get(name, math.nan) for r in self.rows], dtype="float64")
            if any(name in r.judge_runs for r in self.rows):
                frame[f"judge_run_{name}"] = pd.Series([r.judge_runs.get(name) for r in self.rows], dtype="string")
        return frame

    def _scores(self, variant: str, scorer: str) -> tuple[list[float], list[str]]:
        """(scores, their samples) of a variant and scorer, read from the rows in one pass for all."""
        if self._by is None:
            self._by = {}
            for r in self.rows:
                for name, value in r.scores.items():
                    if not math.isnan(value):
                        values, samples = self._by.setdefault((r.variant, name), ([], []))
                        values.append(value)
                        samples.append(r.sample)
        return self._by.get((variant, scorer), ([], []))

    def estimate(self, variant: str, scorer: str) -> stats.Estimate:
        values, samples = self._scores(variant, scorer)
        return stats.estimate(values, samples if self.epochs > 1 else None, seed=self.seed,
                              confidence=self.confidence, resamples=self.resamples)

    @property
    def summary(self) -> pd.DataFrame:
        """Per variant and scorer: samples and scores counted, mean, standard error (clustered by sample
        when epochs > 1), the interval and its method (also in ``summary.attrs["method"]``)."""
        rows = []
        for variant in self.variants:
            missing = sum(r.variant == variant and not r.scores for r in self.rows)
            for scorer in self.scorers:
                est = self.estimate(variant, scorer)
                rows.append({"variant": variant, "scorer": scorer, "samples": est.n, "scores": est.scores,
                             "unscored": missing, "mean": est.mean, "stderr": est.stderr, "ci_low": est.low,
                             "ci_high": est.high, "method": est.method})
        frame = pd.DataFrame(rows)
        frame.attrs["method"] = stats.method_name(self.epochs > 1, self.resamples, self.confidence)
        frame.attrs["stderr"] = ("clustered by sample (cluster-robust)" if self.epochs > 1
                                 else "s / sqrt(n)")
        return frame

    def sample_means(self, variant: str, scorer: str) -> dict[str, float]:
        """Each sample's mean score over its epochs."""
        values, samples = self._scores(variant, scorer)
        sums: dict[str, list[float]] = {}
        for v, s in zip(values, samples):
            sums.setdefault(s, []).append(v)
        return {s: math.fsum(v) / len(v) for s, v in sums.items()}  # exact sums: the order of epochs never counts

    def runs_of(self, variant: str, sample: str) -> list[str]:
        """The runs of a sample in a variant, epoch by epoch."""
        if self._runs is None:
            self._runs = {}
            for r in self.rows:
                if r.run_id:
                    self._runs.setdefault((r.variant, r.sample), []).append(r.run_id)
        return list(self._runs.get((variant, sample), ()))

    def compare(self, a: str | None = None, b: str | None = None, *, scorer: str | None = None) -> Comparison:
        """Variant ``b`` against baseline ``a`` on the same samples (default: the first two variants)."""
        if a is None and b is None:
            if len(self.variants) < 2:
                raise EvaluationError(f"evaluation {self.name!r} has one variant; compare it with another "
                                      "evaluation: compare(eval_a, eval_b)")
            a, b = self.variants[:2]
        for label in (a, b):
            if label not in self.variants:
                raise EvaluationError(f"evaluation {self.name!r} has no variant {label!r} "
                                      f"(variants: {', '.join(self.variants)})")
        return Comparison((self, a), (self, b), scorer)  # type: ignore[arg-type]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        lines = [f"agio evaluation {self.name!r}: {len(self.variants)} variant(s) x {len(self.samples)} samples x "
                 f"{self.epochs} epoch(s); {self.summary.attrs['method']}"]
        for _, r in self.summary.iterrows():
            lines.append(f"  {r['variant']:<16} {r['scorer']:<12} mean {r['mean']:.3f}  se {r['stderr']:.3f}  "
                         f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]  n={r['samples']}")
        return "\n".join(lines)


class Comparison:
    """Variant B against baseline A on the samples both scored: per scorer, the mean difference B - A with
    a paired bootstrap interval, McNemar's exact test for 0/1 scores, and the samples that got better
    and worse (``changed``)."""

    def __init__(self, a: tuple[Evaluation, str], b: tuple[Evaluation, str], scorer: str | None = None):
        (self.eval_a, self.a), (self.eval_b, self.b) = a, b
        shared = [s for s in self.eval_a.scorers if s in self.eval_b.scorers]
        if scorer is not None and scorer not in shared:
            raise EvaluationError(f"scorer {scorer!r} is not in both evaluations (shared: {', '.join(shared) or 'none'})")
        self.scorers = [scorer] if scorer else shared
        if not self.scorers:
            raise EvaluationError("the two evaluations share no scorer to compare")
        self.seed = self.eval_b.seed
        self._means = {s: (self.eval_a.sample_means(self.a, s), self.eval_b.sample_means(self.b, s))
                       for s in self.scorers}
        if not any(set(ma) & set(mb) for ma, mb in self._means.values()):
            raise EvaluationError(f"{self._label('a')} and {self._label('b')} share no scored sample: a paired "
                                  "comparison needs the same samples on both sides")

    def _label(self, side: str) -> str:
        ev, label = (self.eval_a, self.a) if side == "a" else (self.eval_b, self.b)
        return label if self.eval_a.name == self.eval_b.name else f"{ev.name}/{label}"

    def _paired(self, scorer: str) -> tuple[list[str], list[float], list[float]]:
        ma, mb = self._means[scorer]
        order = [s for s in self.eval_a.samples if s in ma and s in mb]
        return order, [ma[s] for s in order], [mb[s] for s in order]

    def _binary(self, scorer: str) -> bool:
        rows = [r for ev, label in ((self.eval_a, self.a), (self.eval_b, self.b)) for r in ev.rows
                if r.variant == label and scorer in r.scores]
        return bool(rows) and all(r.scores[scorer] in (0.0, 1.0) for r in rows)

    @property
    def summary(self) -> pd.DataFrame:
        """Per scorer: paired samples, both means, the difference B - A with its standard error and
        interval, McNemar's test for 0/1 scores, counts of samples better and worse."""
        rows = []
        for scorer in self.scorers:
            order, a, b = self._paired(scorer)
            est = stats.paired(a, b, seed=self.seed, confidence=self.eval_b.confidence,
                               resamples=self.eval_b.resamples)
            row: dict[str, Any] = {
                "scorer": scorer, "a": self.a, "b": self.b, "samples": len(order),
                "mean_a": sum(a) / len(a) if a else math.nan, "mean_b": sum(b) / len(b) if b else math.nan,
                "difference": est.mean, "stderr": est.stderr, "ci_low": est.low, "ci_high": est.high,
                "method": est.method, "better": sum(y > x for x, y in zip(a, b)),
                "worse": sum(y < x for x, y in zip(a, b)), "mcnemar_p": math.nan, "mcnemar_only_a": pd.NA,
                "mcnemar_only_b": pd.NA, "mcnemar_method": None}
            if self._binary(scorer):
                kept = [(x, y) for x, y in zip(a, b) if x != 0.5 and y != 0.5]  # a tied majority has no outcome
                test = stats.mcnemar([round(x) for x, _ in kept], [round(y) for _, y in kept])
                epochs = max(self.eval_a.epochs, self.eval_b.epochs)
                row.update(mcnemar_p=test.p, mcnemar_only_a=test.only_a, mcnemar_only_b=test.only_b,
                           mcnemar_method=test.method + ("" if epochs == 1 else
                                                         ", on each sample's majority over its epochs (ties left out)"))
            rows.append(row)
        frame = pd.DataFrame(rows)
        for col in ("mcnemar_only_a", "mcnemar_only_b"):
            frame[col] = frame[col].astype("Int64")
        return frame

    def changed(self, scorer: str | None = None) -> pd.DataFrame:
        """The samples whose mean score moved, best improvements first, then the worst regressions; each
        with its runs on both sides (``runs_a``, ``runs_b``: one click from their transcripts)."""
        scorer = scorer or self.scorers[0]
        order, a, b = self._paired(scorer)
        rows = [{"sample": s, "a": x, "b": y, "delta": y - x, "change": "better" if y > x else "worse",
                 "runs_a": self.eval_a.runs_of(self.a, s), "runs_b": self.eval_b.runs_of(self.b, s)}
                for s, x, y in zip(order, a, b) if x != y]
        rows.sort(key=lambda r: (r["change"] != "better", -abs(r["delta"])))
        return pd.DataFrame(rows, columns=["sample", "a", "b", "delta", "change", "runs_a", "runs_b"])

    def __repr__(self) -> str:
        lines = [f"agio comparison: {self._label('b')} against {self._label('a')}"]
        for _, r in self.summary.iterrows():
            lines.append(f"  {r['scorer']:<12} {r['mean_a']:.3f} -> {r['mean_b']:.3f}  difference {r['difference']:+.3f} "
                         f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]  better {r['better']}, worse {r['worse']}"
                         + ("" if pd.isna(r["mcnemar_p"]) else f", McNemar p={r['mcnemar_p']:.3g}"))
        return "\n".join(lines)


# -- storage -----------------------------------------------------------------------------------------------
def _journal(repository: Repository) -> Any:
    if not hasattr(repository, "journal"):
        raise EvaluationError(f"the store {type(repository).__name__} keeps no named journals, so no evaluations")
    return repository.journal(JOURNAL, _KEYS)


def load(name: str, repository: Repository | None = None) -> Evaluation:
    """A stored evaluation by name."""
    repository = current_store(repository)
    journal = _journal(repository)
    journal.refresh()
    docs = journal.tables.get("evaluations", {})
    doc = docs.get(name)
    if doc is None:
        known = ", ".join(list(docs)[-5:]) or "none"
        raise NotFoundError(f"no evaluation named {name!r} in the store (recent: {known})")
    return Evaluation(doc, repository)


def evaluations(repository: Repository | None = None) -> pd.DataFrame:
    """Every stored evaluation: name, created, variants, samples, epochs, scorers."""
    journal = _journal(current_store(repository))
    journal.refresh()
    docs = sorted(journal.tables.get("evaluations", {}).values(), key=lambda d: d["created_at"])
    return pd.DataFrame({
        "name": pd.Series([d["id"] for d in docs], dtype="string"),
        "created_at": pd.to_datetime(pd.Series([d["created_at"] for d in docs], dtype="float64"), unit="s", utc=True),
        "variants": [[v["label"] for v in d["variants"]] for d in docs],
        "samples": pd.Series([len(d["samples"]) for d in docs], dtype="Int64"),
        "epochs": pd.Series([d["epochs"] for d in docs], dtype="Int64"),
        "scorers": [d["scorers"] for d in docs]})


def _side(ev: Any, variant: str | None, repository: Repository | None) -> tuple[Evaluation, str]:
    if isinstance(ev, str):
        ev = load(ev, repository)
    if not isinstance(ev, Evaluation):
        raise EvaluationError(f"compare takes evaluations (or their names), got {type(ev).__name__}")
    if variant is None:
        if len(ev.variants) != 1:
            raise EvaluationError(f"evaluation {ev.name!r} has variants {', '.join(ev.variants)}; say which: "
                                  "compare(a, b, variant_a=..., variant_b=...)")
        variant = ev.variants[0]
    elif variant not in ev.variants:
        raise EvaluationError(f"evaluation {ev.name!r} has no variant {variant!r}")
    return ev, variant


def compare(eval_a: Evaluation | str, eval_b: Evaluation | str, *, scorer: str | None = None,
            variant_a: str | None = None, variant_b: str | None = None,
            repository: Repository | None = None) -> Comparison:
    """Evaluation B against baseline A (objects or stored names) on the samples both scored."""
    return Comparison(_side(eval_a, variant_a, repository), _side(eval_b, variant_b, repository), scorer)


# -- running ---------------------------------------------------------------------------------------------------
def _number(name: str, value: Any, where: str) -> float:
    """A score as a float: a bool or a real number of any kind (numpy's and pandas' too: ``np.True_``,
    ``np.int64``, ``np.float32``, ``Fraction``), finite; anything else is one clear line."""
    if isinstance(value, numbers.Real) or getattr(getattr(value, "dtype", None), "kind", None) == "b":
        try:
            number = float(value)
        except (OverflowError, TypeError, ValueError):
            number = math.inf
        if math.isfinite(number):
            return number
    shown = f"{value!r:.40}"
    raise EvaluationError(f"scorer {name!r} returned {shown} ({type(value).__name__}) for {where}; a score must be "
                          "a finite number or a bool")


async def _score_all(work: list[tuple[Row, dict[str, Any]]], scorers: list[tuple[str, Callable[..., Any]]],
                     repository: Repository, eval_name: str, variant_index: dict[str, int], concurrency: int,
                     retry_hint: str) -> None:
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(row: Row, sample: dict[str, Any]) -> None:
        async with limit:
            loaded = ScoredRun.load(row.run_id, repository)  # type: ignore[arg-type]
            run = SampleRun(loaded.run, loaded.steps, sample)
            where = f"sample {row.sample!r}, epoch {row.epoch} of variant {row.variant!r}"
            for name, fn in scorers:
                try:
                    if isinstance(fn, ModelGraded):
                        session = f"{eval_name}-judge-{name}-v{variant_index[row.variant]}-{row.sample}-e{row.epoch}"
                        value, judge_run = await fn.grade(run, sample, repository, session)
                        row.judge_runs[name] = judge_run
                    else:
                        value = fn(run, sample) if _arity(fn) == 2 else fn(run)
                        if inspect.isawaitable(value):
                            value = await value
                except EvaluationError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one line naming the scorer and the sample
                    first = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
                    raise EvaluationError(f"scorer {name!r} raised on {where}: {first}{retry_hint}") from None
                row.scores[name] = _number(name, value, where)

    tasks = [asyncio.ensure_future(one(row, sample)) for row, sample in work]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()


def evaluate(agent_or_variants: Any, dataset: Any, scorers: Any, *, epochs: int = 1, seed: int = 0,
             prompt: str | None = None, name: str | None = None, concurrency: int = 8, priority: int = 0,
             timeout: float | None = None, retries: int = 0, retry_delay: float = 1.0,
             rate_limit: Any = None, max_tokens: int | None = None, batch_max_tokens: int | None = None,
             batch_max_cost: float | None = None, backend: Any = None, address: str | None = None,
             confidence: float = stats.CONFIDENCE, resamples: int = stats.RESAMPLES,
             repository: Repository | None = None) -> Evaluation:
    """Run every sample of ``dataset`` ``epochs`` times per variant (executions of the scheduler), score
    each run, store the evaluation and return it.

    ``agent_or_variants``: an Agent, a list of Agents, or a dict label -> Agent. ``dataset``: a DataFrame
    or a list of dicts; an ``id`` column names the samples (else their positions); ``prompt`` is a
    template over its columns (default: the ``input``/``question``/``query``/``prompt`` column).
    ``scorers``: functions of the run (``f(run)``), of the run and its sample row (``f(run, sample)``),
    scorers of ``agio_notebook.scoring``, or :func:`model_graded` judges; a dict names them. ``seed``
    seeds every bootstrap (the same runs and seed give the same table). The scheduling options are
    :func:`agio_notebook.batch`'s, per variant.
    """
    pairs = _variants(agent_or_variants)
    frame = _dataset(dataset)
    samples = _sample_ids(frame)
    template = _template(prompt, frame)
    scorer_list = _scorers(scorers)
    epochs = _whole("epochs", epochs, 1)
    seed = _whole("seed", seed, 0)
    resamples = _whole("resamples", resamples, 100)
    if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
        raise EvaluationError(f"confidence must be a float in [0.5, 1), got {confidence!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise EvaluationError(f"name must be a non-empty string, got {name!r}")
    for label, agent in pairs:  # what batch() would refuse for a later variant, refused before the first starts
        try:
            if batch_max_cost is not None:
                check_priced(agent.model_name)
            if backend == "ray":
                from ..scheduling.ray_backend import check_picklable

                check_picklable(agent)
        except AgioError as exc:
            raise EvaluationError(f"variant {label!r}: {exc}") from None
    repository = current_store(repository)
    journal = _journal(repository)
    journal.refresh()
    name = name or f"eval-{new_id()[:8]}"
    definition = {"prompt": template, "epochs": epochs, "samples": samples, "scorers": [n for n, _ in scorer_list],
                  "dataset_fingerprint": _fingerprint(frame, template), "variants": [label for label, _ in pairs]}
    stored = journal.tables.get("evaluations", {}).get(name)
    if stored is not None:
        before = {"prompt": stored["prompt"], "epochs": stored["epochs"], "samples": stored["samples"],
                  "dataset_fingerprint": stored["dataset_fingerprint"],
                  "variants": [v["label"] for v in stored["variants"]]}
        changed = sorted(k for k in before if before[k] != definition[k])
        if changed:
            raise EvaluationError(f"an evaluation named {name!r} already exists with another {', '.join(changed)}; "
                                  "choose another name")
    expanded = frame.loc[frame.index.repeat(epochs)].reset_index(drop=True)
    options = dict(prompt=template, concurrency=concurrency, priority=priority, timeout=timeout, retries=retries,
                   retry_delay=retry_delay, rate_limit=rate_limit, max_tokens=max_tokens,
                   batch_max_tokens=batch_max_tokens, batch_max_cost=batch_max_cost, backend=backend,
                   address=address, repository=repository)
    handles: list[BatchHandle] = []
    try:
        for i, (label, agent) in enumerate(pairs):
            try:
                handles.append(batch(agent, expanded, name=f"{name}-v{i}", **options))
            except AgioError as exc:
                if handles:  # a later variant refused (e.g. an agent Ray cannot carry): stop the ones started
                    for h in handles:
                        h.cancel_if_running()
                raise EvaluationError(f"variant {label!r}: {exc}") from None
        for h in handles:
            h.wait()
    except BaseException:
        for h in handles:
            h.cancel_if_running()
        raise
    rows: list[Row] = []
    work: list[tuple[Row, dict[str, Any]]] = []
    records = json.loads(frame.to_json(orient="records", date_format="iso"))
    for (label, _), h in zip(pairs, handles):
        for rec in h.records():
            s_index, epoch = divmod(rec.index, epochs)
            run = repository.get_run(rec.run_id) if rec.run_id else None
            m = run.metrics if run is not None else None
            row = Row(variant=label, sample=samples[s_index], epoch=epoch + 1,
                      status=run.status.value if run is not None else rec.status.value,
                      run_id=rec.run_id, session_id=rec.session_id, final_text=run.final_text if run else None,
                      latency_ms=m.duration_ms if m else None, total_tokens=m.total_tokens if m else None,
                      cost=m.cost if m else None, error=(run.error if run else rec.error), scores={}, judge_runs={})
            rows.append(row)
            if run is not None and run.status in SCORED:
                work.append((row, records[s_index]))
    hint = f" (the runs are kept: fix it and call evaluate(..., name={name!r}) to score them without running them again)"
    run_coroutine(_score_all(work, scorer_list, repository, name, {label: i for i, (label, _) in enumerate(pairs)},
                             concurrency, hint))
    doc = {"id": name, "created_at": stored["created_at"] if stored else now(), "scored_at": now(), "seed": seed,
           "confidence": confidence, "resamples": resamples,
           **{k: definition[k] for k in ("prompt", "epochs", "samples", "scorers", "dataset_fingerprint")},
           "variants": [{"label": label, "agent": agent.name, "model": agent.model_name, "batch": h.name}
                        for (label, agent), h in zip(pairs, handles)],
           "rows": [vars(r) for r in rows]}
    journal.append([("evaluations", doc)])  # the whole evaluation in one durable append
    return Evaluation(doc, repository)
