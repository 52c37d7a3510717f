// The run fold against the shared fixture (tests/fixtures/fold_cases.json): real runs' events and the state
// the Python fold (agio_notebook/notebook/view_model.py) reaches on them, tested there too (test_view_fold.py).
import { readFileSync } from 'fs';
import { resolve } from 'path';
import { describe, expect, it } from 'vitest';

import { RunView, foldEvents, foldNested } from '../src/fold';

const CASES: { name: string; events: any[]; state: any }[] = JSON.parse(
  readFileSync(resolve(__dirname, '../../tests/fixtures/fold_cases.json'), 'utf8'));

const KEYS = ['steps', 'model_calls', 'tool_calls', 'tool_errors', 'tool_unfinished', 'total_tokens'];
const orNull = (v: unknown) => (v === undefined ? null : v);

/** What both folds must agree on (the same projection as fold_cases.state in Python). */
function state(view: RunView): any {
  return {
    status: view.run.status,
    output: orNull(view.run.output),
    agent: orNull(view.run.agent_name),
    handoffs: view.handoffs.map(h => [h.from, h.to]),
    paused: orNull(view.paused?.kind),
    metrics: Object.fromEntries(KEYS.map(k => [k, orNull(view.runMetrics[k])])),
    steps: view.steps.map(s => ({
      sequence: s.sequence, role: s.role, text: s.text, status: s.status, attempt: s.attempt,
      superseded: s.superseded, agent: s.role === 'assistant' ? orNull(s.agent) : null,
      memory: s.memory ? (s.memory.items ?? []).length : null,
      cards: s.cards.map(c => {
        const nested = foldNested(c);
        return { id: c.id, name: c.name, arguments: c.arguments, status: c.status, result: orNull(c.result),
          error: orNull(c.error), diff: orNull(c.diff), isolation: orNull(c.isolation),
          nested: nested ? state(nested) : null };
      })
    }))
  };
}

describe('the fold agrees with the Python fold on the shared fixture', () => {
  it('has the cases', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(12);
  });
  for (const c of CASES) {
    it(c.name, () => {
      expect(state(foldEvents({ version: 1, run: null, session: null, events: c.events }))).toEqual(c.state);
    });
  }
});
