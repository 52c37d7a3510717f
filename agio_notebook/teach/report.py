"""What ``check()`` returns: per-scenario results, a summary line per scenario, and a table for notebooks.

The table shows the failing scenarios with their reasons first in view: one failing run's transcript is
open, the others a click away, and when there are many scenarios the passing ones fold into one row.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any, Callable

from ..core import StepEvent

if TYPE_CHECKING:
    from .exercise import Scenario, Trial

# events -> {"text/html": ..., "text/plain": ...}: how a failing run is shown (agio_notebook.exercises draws
# it as a %%agio cell's transcript; without one the steps are listed as text)
Transcript = Callable[[list[StepEvent]], dict[str, Any]]
# JupyterLab right-aligns table cells; a reason reads from the left
_CELL = ' style="text-align:left;vertical-align:top;padding:3px 8px"'
FOLD_PASSING = 6  # with more scenarios than this, the passing ones fold into one row


@dataclass
class ScenarioResult:
    """One scenario's outcome: passed or not, the reason, and the run it made (id, status, answer, steps).
    ``variant``: a scenario the instructions do not show; ``from_code``: the reason is what the learner's
    code did (raised, hung), not what its answer was."""

    name: str
    description: str
    passed: bool
    reason: str | None
    run_id: str | None = None
    status: str | None = None
    final_text: str | None = None
    events: list[StepEvent] = field(default_factory=list, repr=False)
    steps: list[Any] = field(default_factory=list, repr=False)
    variant: bool = False
    from_code: bool = False
    hung: bool = field(default=False, repr=False)  # the learner's code overran its cap here

    @classmethod
    def of(cls, scenario: Scenario, reason: str | None, trial: Trial | None, *,
           from_code: bool = False) -> ScenarioResult:
        run = trial.run if trial is not None else None
        return cls(scenario.name, scenario.describe or scenario.query, reason is None, reason,
                   run.id if run else None, run.status.value if run else None, run.final_text if run else None,
                   list(trial.events) if trial is not None else [], list(trial.steps) if trial is not None else [],
                   scenario.variant, from_code and reason is not None)

    def line(self, reason: bool = True) -> str:
        outcome = "passed" if self.passed else (f"failed: {self.reason}" if reason else "failed")
        return f"  {'✓' if self.passed else '✗'} {self.name}: {outcome}"


@dataclass
class CheckResult:
    """``.passed``, ``.scenarios`` (each with ``.passed`` and ``.reason``), ``.failed``, ``.seed`` (the
    values drawn; ``check(..., seed=...)`` repeats them), ``.problem`` (one cause said once: a solution
    of the wrong kind or signature, which runs no scenario, or one error every scenario failed on),
    ``summary()``."""

    exercise: str
    scenarios: list[ScenarioResult]
    transcript: Transcript | None = field(default=None, repr=False)
    seed: int | None = None
    problem: str | None = None
    _shown: dict[int, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    @property
    def passed(self) -> bool:
        return bool(self.scenarios) and self.problem is None and all(s.passed for s in self.scenarios)

    @property
    def failed(self) -> list[ScenarioResult]:
        return [s for s in self.scenarios if not s.passed]

    @property
    def score(self) -> float:
        """The share of scenarios passed, 0..1 (0 when nothing could run)."""
        if not self.scenarios or (self.problem is not None and not any(s.passed for s in self.scenarios)):
            return 0.0
        return sum(s.passed for s in self.scenarios) / len(self.scenarios)

    def __getitem__(self, name: str) -> ScenarioResult:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(f"no scenario {name!r} in {self.exercise}; they are: "
                       + ", ".join(s.name for s in self.scenarios))

    def headline(self) -> str:
        where = f"exercise {self.exercise}" + (f" (seed {self.seed})" if self.seed is not None else "")
        n, bad = len(self.scenarios), len(self.failed)
        if not self.scenarios:
            return f"{where}: not run: {self.problem}"
        if self.problem is not None:
            return f"{where}: {'all ' if bad == n else ''}{bad} of {n} scenarios failed: {self.problem}"
        if not bad:
            return f"{where}: all {n} scenarios passed"
        return f"{where}: {bad} of {n} scenarios failed"

    def summary(self, width: int | None = None) -> str:
        """The headline and a line per scenario (``width`` wraps long lines, indented under their start)."""
        lines = [self.headline(), *(s.line(reason=self.problem is None) for s in self.scenarios)]
        if width is None:
            return "\n".join(lines)
        return "\n".join(textwrap.fill(line, width, subsequent_indent="      ", break_on_hyphens=False)
                         for line in lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        first = next((s for s in self.failed if s.events), None)
        p.text(self.summary() + (f"\n\n{first.name}:\n{self._text_transcript(first)}" if first else ""))

    def _rendered(self, s: ScenarioResult) -> dict[str, Any]:
        """The transcript of a scenario's run, rendered once (a notebook asks for several formats)."""
        if id(s) not in self._shown:
            self._shown[id(s)] = self.transcript(s.events) if self.transcript is not None else {}
        return self._shown[id(s)]

    def _text_transcript(self, s: ScenarioResult) -> str:
        if self.transcript is not None:
            return str(self._rendered(s).get("text/plain", ""))
        return "\n".join(f"#{st.sequence} {st.role.value}: {st.content or ''}"
                         + "".join(f" -> {c.name}({c.arguments})" for c in st.tool_calls) for st in s.steps)

    def _html_transcript(self, s: ScenarioResult) -> str:
        if self.transcript is not None:
            return str(self._rendered(s).get("text/html", ""))
        return f"<pre style=\"white-space:pre-wrap;margin:0\">{escape(self._text_transcript(s))}</pre>"

    def _row(self, s: ScenarioResult, open_transcript: bool) -> str:
        mark = ('<span style="color:#1a7f37">✓ passed</span>' if s.passed
                else '<span style="color:#cf222e">✗ failed</span>')
        seen = ' <small style="color:#8250df">(unseen variant)</small>' if s.variant else ""
        reason = "" if s.passed else (escape(s.reason or "") if self.problem is None else "see above")
        row = (f'<tr class="agio-exercise-row" data-passed="{str(s.passed).lower()}">'
               f"<td{_CELL}><b>{escape(s.name)}</b>{seen}<br><small>{escape(s.description)}</small></td>"
               f"<td{_CELL}>{mark}</td><td{_CELL}>{reason}</td></tr>")
        if not s.passed and s.events:
            row += (f'<tr><td colspan="3"{_CELL}><details{" open" if open_transcript else ""}>'
                    f"<summary>transcript of {escape(s.name)}</summary>{self._html_transcript(s)}</details></td></tr>")
        return row

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        rows = []
        if self.problem is not None:
            rows.append(f'<tr class="agio-exercise-problem"><td colspan="3"{_CELL}><b>{escape(self.problem)}</b>'
                        "</td></tr>")
        fold = len(self.scenarios) > FOLD_PASSING
        first_failed = next((s for s in self.failed if s.events), None)
        for s in self.scenarios:
            if not (fold and s.passed):
                rows.append(self._row(s, s is first_failed))
        passing = [s for s in self.scenarios if s.passed]
        if fold and passing:
            names = ", ".join(escape(s.name) for s in passing)
            rows.append(f'<tr class="agio-exercise-passing"><td colspan="3"{_CELL}><details><summary>'
                        f'<span style="color:#1a7f37">✓ {len(passing)} other scenarios passed</span></summary>'
                        f"{names}</details></td></tr>")
        again = (f'<div style="color:#57606a;margin-top:4px">values drawn from seed {self.seed}: '
                 f"<code>check(..., seed={self.seed})</code> draws them again</div>" if self.seed is not None else "")
        return (f'<div class="agio-exercise" style="font-family:var(--jp-ui-font-family,sans-serif);'
                f'font-size:13px"><div style="font-weight:600;color:{colour};margin-bottom:4px">'
                f"{escape(self.headline())}</div>"
                f'<table style="border-collapse:collapse"><thead><tr><th{_CELL}>scenario</th>'
                f"<th{_CELL}>result</th><th{_CELL}>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
                f"{again}</div>")
