"""The notebook view of an evaluation (and of a comparison): plain HTML and CSS, so it stays in a saved
notebook with no kernel and renders untrusted (JupyterLab keeps inline styles and drops SVG there).

- the summary: per variant and scorer, mean, standard error and interval, each column header naming
  the interval's method;
- a plot: per scorer, each variant's mean as a dot on its interval, on one shared scale;
- the paired comparison of the first two variants (or of ``compare(a, b)``): the difference with its
  interval, McNemar's test for 0/1 scores, and the samples that got better and worse, each opening onto
  the transcripts of its runs (``<details>``; ``%agio replay RUN`` opens the full transcript).

``install(shell)`` makes IPython display :class:`Evaluation` and :class:`Comparison` this way; the bundle
also carries the data as ``application/vnd.agio.evaluation+json``.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from ..explore.evaluate import MIME_TYPE, Comparison, Evaluation
from ..explore.tree import _transcript, _transcript_html
from ..views import text_html

CHANGED_SHOWN = 20  # changed samples listed per direction (the rest: comparison.changed())
_BOX = "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px"
_MUTED = "color:#57606a;font-size:11px"
_CELL = "padding:2px 8px;text-align:left"


def _f(v: Any, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def _plain(v: Any) -> Any:
    """A frame cell as JSON: missing values None, numpy numbers Python ones."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


# -- data --------------------------------------------------------------------------------------------------------
def evaluation_data(ev: Evaluation) -> dict[str, Any]:
    summary = ev.summary
    data: dict[str, Any] = {
        "version": 1, "kind": "evaluation", "name": ev.name, "seed": ev.seed, "epochs": ev.epochs,
        "samples": len(ev.samples), "variants": ev.variants, "scorers": ev.scorers, "models": ev.models,
        "method": summary.attrs["method"], "stderr": summary.attrs["stderr"],
        "summary": [{k: _plain(v) for k, v in row.items()} for row in summary.to_dict("records")]}
    if len(ev.variants) >= 2:
        data["comparison"] = comparison_data(ev.compare())
    return data


def _runs(repository: Any, run_ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for run_id in run_ids:
        run = repository.get_run(run_id)
        if run is None:
            continue
        steps = [s for s in repository.get_steps(run.session_id, include_superseded=True) if s.run_id == run_id]
        out.append({"run_id": run_id, "status": run.status.value, "final_text": run.final_text,
                    "transcript": _transcript(steps)})
    return out


def comparison_data(cmp: Comparison) -> dict[str, Any]:
    summary = cmp.summary
    changed = cmp.changed()
    shown = []
    for change in ("better", "worse"):
        rows = changed[changed["change"] == change]
        for row in rows.head(CHANGED_SHOWN).to_dict("records"):
            shown.append({"sample": row["sample"], "a": _plain(row["a"]), "b": _plain(row["b"]),
                          "delta": _plain(row["delta"]),
                          "change": change, "runs_a": _runs(cmp.eval_a.repository, row["runs_a"]),
                          "runs_b": _runs(cmp.eval_b.repository, row["runs_b"])})
    return {"version": 1, "kind": "comparison", "a": cmp._label("a"), "b": cmp._label("b"),
            "scorer": cmp.scorers[0],
            "summary": [{k: _plain(v) for k, v in row.items()} for row in summary.to_dict("records")],
            "changed": shown, "better": int((changed["change"] == "better").sum()),
            "worse": int((changed["change"] == "worse").sum())}


# -- HTML --------------------------------------------------------------------------------------------------------
def _summary_table(data: dict[str, Any]) -> str:
    head = (f"<th style='{_CELL}'>variant</th>" + "".join(
        f"<th style='{_CELL}'>{escape(s)}<div class='agio-eval-method' style='font-weight:normal;{_MUTED}'>"
        f"mean [{escape(data['method'])}] · se</div></th>" for s in data["scorers"]))
    rows = []
    for variant in data["variants"]:
        cells = f"<td style='{_CELL}'><b>{escape(variant)}</b></td>"
        for scorer in data["scorers"]:
            r = next(x for x in data["summary"] if x["variant"] == variant and x["scorer"] == scorer)
            unscored = f" · {r['unscored']} unscored" if r["unscored"] else ""
            cells += (f"<td style='{_CELL}' class='agio-eval-cell'>{_f(r['mean'])} "
                      f"<span style='color:#57606a'>[{_f(r['ci_low'])}, {_f(r['ci_high'])}]</span> · se "
                      f"{_f(r['stderr'])}<div style='{_MUTED}'>{r['samples']} samples, {r['scores']} scores"
                      f"{unscored}</div></td>")
        rows.append(f"<tr class='agio-eval-variant'>{cells}</tr>")
    return f"<table style='border-collapse:collapse;margin:4px 0'><tr>{head}</tr>{''.join(rows)}</table>"


def _plot(data: dict[str, Any]) -> str:
    """Per scorer, a track per variant: the interval as a bar, the mean as a dot, on one shared scale."""
    values = [v for r in data["summary"] for v in (r["mean"], r["ci_low"], r["ci_high"]) if v is not None]
    if not values:
        return ""
    lo, hi = min(0.0, *values), max(1.0, *values)
    span = (hi - lo) or 1.0

    def pct(v: float) -> float:
        return 100 * (v - lo) / span

    blocks = []
    for scorer in data["scorers"]:
        tracks = []
        for variant in data["variants"]:
            r = next(x for x in data["summary"] if x["variant"] == variant and x["scorer"] == scorer)
            if r["mean"] is None:
                continue
            low = r["ci_low"] if r["ci_low"] is not None else r["mean"]
            high = r["ci_high"] if r["ci_high"] is not None else r["mean"]
            bar = (f"<div class='agio-eval-interval' style='position:absolute;left:{pct(low):.2f}%;"
                   f"width:{max(0.5, pct(high) - pct(low)):.2f}%;top:5px;height:6px;background:#0969da;opacity:.35'></div>")
            dot = (f"<div class='agio-eval-mean' style='position:absolute;left:{pct(r['mean']):.2f}%;top:2px;"
                   f"width:10px;height:10px;margin-left:-5px;border-radius:5px;background:#0969da'></div>")
            tracks.append(f"<div style='margin:2px 0'><span style='display:inline-block;width:120px;vertical-align:top;"
                          f"overflow:hidden'>{escape(variant)}</span><div class='agio-eval-track' style='display:inline-block;"
                          f"position:relative;width:300px;height:16px;background:#f6f8fa;border-left:1px solid #8c959f;"
                          f"border-right:1px solid #8c959f'>{bar}{dot}</div> <span style='{_MUTED}'>{_f(r['mean'])} "
                          f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]</span></div>")
        axis = (f"<div style='margin-left:120px;width:302px;{_MUTED}'><span>{lo:g}</span>"
                f"<span style='float:right'>{hi:g}</span></div>")
        blocks.append(f"<div class='agio-eval-plot' data-scorer='{escape(scorer)}' style='margin:6px 0'>"
                      f"<div style='font-weight:600'>{escape(scorer)}</div>{''.join(tracks)}{axis}</div>")
    return "".join(blocks)


def _runs_html(side: str, runs: list[dict[str, Any]]) -> str:
    parts = []
    for r in runs:
        parts.append(f"<div class='agio-eval-run' data-run='{escape(r['run_id'])}' style='margin:2px 0 4px 8px'>"
                     f"<span style='{_MUTED}'>{escape(side)} · run {escape(r['run_id'][:8])} · {escape(r['status'])}"
                     f"</span>{_transcript_html(r['transcript'])}<div class='agio-command-hint' style='{_MUTED}'>"
                     f"full transcript: <code>%agio replay {escape(r['run_id'])}</code></div></div>")
    return "".join(parts)


def _comparison_html(c: dict[str, Any]) -> str:
    rows = []
    for r in c["summary"]:
        test = ("" if r["mcnemar_p"] is None else
                f" · McNemar p = {r['mcnemar_p']:.3g} ({r['mcnemar_only_a']} only {escape(c['a'])}, "
                f"{r['mcnemar_only_b']} only {escape(c['b'])})<div style='{_MUTED}'>{escape(r['mcnemar_method'])}</div>")
        rows.append(f"<li class='agio-eval-difference'><b>{escape(r['scorer'])}</b>: {_f(r['mean_a'])} → "
                    f"{_f(r['mean_b'])}, difference {_f(r['difference'], True)} [{_f(r['ci_low'], True)}, "
                    f"{_f(r['ci_high'], True)}] on {r['samples']} paired samples · {r['better']} better, "
                    f"{r['worse']} worse{test}<div style='{_MUTED}'>{escape(r['method'])}</div></li>")
    changed = []
    for s in c["changed"]:
        color = "#1a7f37" if s["change"] == "better" else "#cf222e"
        changed.append(
            f"<li class='agio-eval-changed agio-eval-{s['change']}' data-sample='{escape(s['sample'])}'><details>"
            f"<summary style='cursor:pointer'><span style='color:{color}'>{escape(s['change'])}</span> sample "
            f"<b>{escape(s['sample'])}</b> {escape(c['scorer'])} {_f(s['a'])} → {_f(s['b'])} "
            f"<span style='{_MUTED}'>click for its transcripts</span></summary>"
            f"{_runs_html(c['a'], s['runs_a'])}{_runs_html(c['b'], s['runs_b'])}</details></li>")
    more = c["better"] + c["worse"] - len(c["changed"])
    tail = f"<div style='{_MUTED}'>and {more} more: comparison.changed()</div>" if more > 0 else ""
    return (f"<div class='agio-eval-comparison' style='margin-top:6px'><b>{escape(c['b'])}</b> against "
            f"<b>{escape(c['a'])}</b><ul style='margin:2px 0'>{''.join(rows)}</ul>"
            f"<div style='font-weight:600'>Changed samples ({escape(c['scorer'])}): {c['better']} better, "
            f"{c['worse']} worse</div><ul style='margin:2px 0;list-style:none;padding-left:8px'>{''.join(changed)}</ul>"
            f"{tail}</div>")


def evaluation_html(data: dict[str, Any]) -> str:
    models = ", ".join(f"{v}: {m}" for v, m in data["models"].items())
    head = (f"<div><b>agio evaluation</b> {escape(data['name'])} <span style='{_MUTED}'>{len(data['variants'])} "
            f"variant(s) × {data['samples']} samples × {data['epochs']} epoch(s) · seed {data['seed']} · "
            f"standard errors {escape(data['stderr'])} · models {escape(models)}</span></div>")
    body = _summary_table(data) + _plot(data)
    if "comparison" in data:
        body += _comparison_html(data["comparison"])
    return text_html(f"<div class='agio-evaluation' style='{_BOX};border:1px solid #d0d7de;border-radius:8px;"
                     f"padding:6px 10px'>{head}{body}</div>")


def comparison_html(data: dict[str, Any]) -> str:
    return text_html(f"<div class='agio-evaluation' style='{_BOX};border:1px solid #d0d7de;border-radius:8px;"
                     f"padding:6px 10px'><b>agio comparison</b>{_comparison_html(data)}</div>")


# -- display -------------------------------------------------------------------------------------------------------
def bundle(obj: Evaluation | Comparison) -> dict[str, Any]:
    """The display bundle: the data, its HTML and a text fallback."""
    if isinstance(obj, Comparison):
        data = comparison_data(obj)
        return {MIME_TYPE: data, "text/html": comparison_html(data), "text/plain": repr(obj)}
    data = evaluation_data(obj)
    return {MIME_TYPE: data, "text/html": evaluation_html(data), "text/plain": repr(obj)}


def install(shell: Any) -> None:
    """Display evaluations and comparisons with this view in ``shell``."""
    formatter = shell.display_formatter.mimebundle_formatter
    formatter.for_type(Evaluation, lambda obj, include=None, exclude=None: bundle(obj))
    formatter.for_type(Comparison, lambda obj, include=None, exclude=None: bundle(obj))
