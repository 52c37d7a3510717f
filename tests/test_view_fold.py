"""The run fold (notebook/view_model.py) against the shared fixture the extension's fold is tested on too.

tests/fixtures/fold_cases.json holds real runs' events and the state the fold must reach; the TypeScript
fold (labextension/src/fold.ts) reads the same file in labextension/test/fold.test.ts. A change to either
fold that the other does not make fails one of the two.
"""

from __future__ import annotations

import json

import pytest

from agio_notebook.core import StepEventType
from agio_notebook.notebook.view_model import _HANDLERS, fold
from fold_cases import CASES, FIXTURE, generate, state

SAVED = json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("case", SAVED, ids=[c["name"] for c in SAVED])
def test_the_fold_reaches_the_saved_state(case):
    assert state(fold(case["events"])) == case["state"]


def test_the_saved_events_are_what_the_engine_emits_now():
    """Regenerated from real runs, every case folds to the same state (else: python tests/fold_cases.py)."""
    assert [c["state"] for c in generate()] == [c["state"] for c in SAVED]


def test_every_event_type_has_a_handler_and_a_case():
    types = {e["type"] for c in SAVED for e in c["events"]}
    types |= {e["payload"]["event"]["type"] for c in SAVED for e in c["events"] if e["type"] == "nested"}
    missing = {t.value for t in StepEventType} - types
    assert missing <= {"run_budget_exceeded"}, f"no case has {sorted(missing)}"
    assert set(_HANDLERS) == set(StepEventType) - {StepEventType.ACTION_STARTED}
    assert len(SAVED) == len(CASES)


def test_a_malformed_event_is_left_out_with_one_warning():
    events = [dict(e) for e in SAVED[0]["events"]]
    events.insert(2, {"type": "step_completed", "run_id": "x", "session_id": "y", "seq": 0, "ts": 0, "payload": {}})
    with pytest.warns(UserWarning, match="malformed event"):
        view = fold(events)
    assert view.skipped == 1 and state(view) == SAVED[0]["state"]
