"""What ``check()`` returns: per-scenario results, a summary line per scenario, and a table for notebooks."""

from __future__ import annotations

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


@dataclass
class ScenarioResult:
    """One scenario's outcome: passed or not, the reason, and the run it made (id, status, answer, steps)."""

    name: str
    description: str
    passed: bool
    reason: str | None
    run_id: str | None = None
    status: str | None = None
    final_text: str | None = None
    events: list[StepEvent] = field(default_factory=list, repr=False)
    steps: list[Any] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, scenario: Scenario, reason: str | None, trial: Trial | None) -> ScenarioResult:
        run = trial.run if trial is not None else None
        return cls(scenario.name, scenario.describe or scenario.query, reason is None, reason,
                   run.id if run else None, run.status.value if run else None, run.final_text if run else None,
                   list(trial.events) if trial is not None else [], list(trial.steps) if trial is not None else [])

    def line(self) -> str:
        outcome = "passed" if self.passed else f"failed: {self.reason}"
        return f"  {'✓' if self.passed else '✗'} {self.name}: {outcome}"


@dataclass
class CheckResult:
    """``.passed``, ``.scenarios`` (each with ``.passed`` and ``.reason``), ``.failed``, ``summary()``."""

    exercise: str
    scenarios: list[ScenarioResult]
    transcript: Transcript | None = field(default=None, repr=False)
    _shown: dict[int, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.scenarios)

    @property
    def failed(self) -> list[ScenarioResult]:
        return [s for s in self.scenarios if not s.passed]

    def __getitem__(self, name: str) -> ScenarioResult:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(f"no scenario {name!r} in {self.exercise}; they are: "
                       + ", ".join(s.name for s in self.scenarios))

    def summary(self) -> str:
        n, bad = len(self.scenarios), len(self.failed)
        head = (f"exercise {self.exercise}: all {n} scenarios passed" if not bad
                else f"exercise {self.exercise}: {bad} of {n} scenarios failed")
        return "\n".join([head, *(s.line() for s in self.scenarios)])

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary() + "".join(f"\n\n{s.name}:\n{self._text_transcript(s)}" for s in self.failed
                                        if s.events))

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

    def _repr_html_(self) -> str:
        ok = not self.failed
        colour = "#1a7f37" if ok else "#cf222e"
        head = escape(self.summary().splitlines()[0])
        rows = []
        for s in self.scenarios:
            mark = ('<span style="color:#1a7f37">✓ passed</span>' if s.passed
                    else '<span style="color:#cf222e">✗ failed</span>')
            rows.append(f'<tr class="agio-exercise-row" data-passed="{str(s.passed).lower()}">'
                        f"<td{_CELL}><b>{escape(s.name)}</b><br><small>{escape(s.description)}</small></td>"
                        f"<td{_CELL}>{mark}</td><td{_CELL}>{escape(s.reason or '')}</td></tr>")
            if not s.passed and s.events:
                rows.append(f'<tr><td colspan="3"{_CELL}><details open><summary>transcript of {escape(s.name)}'
                            f"</summary>{self._html_transcript(s)}</details></td></tr>")
        return (f'<div class="agio-exercise" style="font-family:var(--jp-ui-font-family,sans-serif);'
                f'font-size:13px"><div style="font-weight:600;color:{colour};margin-bottom:4px">{head}</div>'
                f'<table style="border-collapse:collapse"><thead><tr><th{_CELL}>scenario</th>'
                f"<th{_CELL}>result</th><th{_CELL}>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
