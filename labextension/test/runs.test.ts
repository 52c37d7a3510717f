// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';

import type { Dashboard, RunRow } from '../src/runs_api';
import { duration, filterSelect, firstWords, runRow, setChoices } from '../src/runs_list';
import { renderDashboard } from '../src/runs_dashboard';

const EVIL = '<img src=x onerror="window.__pwned=1">';

function row(extra: Partial<RunRow> = {}): RunRow {
  return { id: 'run00001aaaa', session_id: 'sess0001bbbb', agent: 'adder', model: 'scripted', query: 'add two and three',
    status: 'completed', kind: 'run', attempt: 1, superseded_by: null, parent_run_id: null, steps: 4, tokens: 41,
    cost: 0.0123, duration_ms: 1500, started_at: 1700000000, ended_at: 1700000001, notebook: '/srv/course/lesson.ipynb',
    notebook_path: 'course/lesson.ipynb', user: 'alice', error: null, ...extra };
}

describe('a run as a row', () => {
  it('shows what the run did, and untrusted text only as text', () => {
    const node = runRow(document, row({ query: `${EVIL} please`, agent: EVIL, error: EVIL, status: 'failed' }), true, true);
    expect(node.querySelector('img')).toBeNull();
    expect(node.querySelector('.agio-runs-agent')!.textContent).toBe(EVIL);
    expect(node.querySelector('.agio-runs-query')!.textContent).toBe(`${EVIL} please`);
    expect(node.dataset.runId).toBe('run00001aaaa');
    expect(node.classList.contains('agio-runs-failed')).toBe(true);
    expect((node.querySelector('.agio-runs-pick') as HTMLInputElement).checked).toBe(true);
    expect(node.querySelector('.agio-runs-facts')!.textContent).toBe('4 steps · 41 tokens · $0.0123 · 1.5 s');
    expect(node.querySelector('.agio-runs-notebook')!.textContent).toBe('lesson.ipynb');
    expect(node.querySelector('.agio-runs-user')!.textContent).toBe('alice');
    expect(node.title).toContain(EVIL); // a title attribute is text too
  });

  it('says unknown for what is unknown, never 0, and leaves the user out on a store of one', () => {
    const node = runRow(document, row({ tokens: null, cost: null, duration_ms: null, kind: 'retry',
      superseded_by: 'other' }), false, false);
    expect(node.querySelector('.agio-runs-facts')!.textContent).toBe('4 steps · tokens unknown · unknown');
    expect(node.querySelector('.agio-runs-user')).toBeNull();
    expect(node.querySelector('.agio-runs-kind')!.textContent).toBe('retry');
    expect(node.querySelector('.agio-runs-superseded')).not.toBeNull();
  });

  it('cuts a query to its first words and times to a readable unit', () => {
    expect(firstWords('one  two\nthree')).toBe('one two three');
    expect(firstWords(Array.from({ length: 20 }, (_, i) => `w${i}`).join(' '))).toBe(
      'w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 …');
    expect([duration(12.4), duration(1499), duration(12000), duration(null)]).toEqual(['12 ms', '1.5 s', '12 s', '']);
  });
});

describe('filter choices', () => {
  it('offers any, then the store\'s values, and keeps a chosen value no run has any more', () => {
    const select = filterSelect(document, 'agent', 'agent');
    setChoices(select, [{ value: 'adder', label: 'adder' }, { value: EVIL, label: EVIL }], 'gone');
    expect([...select.options].map(o => o.textContent)).toEqual(['any agent', 'adder', EVIL, 'gone']);
    expect(select.value).toBe('gone');
    expect(select.querySelector('img')).toBeNull();
  });
});

describe('the class dashboard', () => {
  const board: Dashboard = {
    teacher: 'tina', students: ['alice', 'bob'], exercises: ['tool_docstring', 'model_function'],
    cells: [
      { user: 'alice', exercise: 'tool_docstring', passed: false, attempts: 3, last_reason: EVIL, last_time: 1700000000 },
      { user: 'bob', exercise: 'tool_docstring', passed: true, attempts: 1, last_reason: null, last_time: 1700000001 }],
    failing: { tool_docstring: [{ reason: EVIL, count: 3, students: 1 }] },
    latest_runs: { alice: [row()], bob: [] }
  };

  it('draws student × exercise with attempts and the last reason, as text', () => {
    const root = renderDashboard(document, board);
    expect(root.querySelector('img')).toBeNull();
    const cell = (user: string, exercise: string) =>
      root.querySelector(`.agio-class-cell[data-user="${user}"][data-exercise="${exercise}"]`) as HTMLElement;
    expect(cell('alice', 'tool_docstring').classList.contains('agio-class-failing')).toBe(true);
    expect(cell('alice', 'tool_docstring').textContent).toBe(`✗ not yet · 3 attempts${EVIL}`);
    expect(cell('bob', 'tool_docstring').textContent).toBe('✓ passed · 1 attempt');
    expect(cell('bob', 'model_function').textContent).toBe('—');
    expect(root.querySelector('.agio-class-exercise[data-exercise="tool_docstring"] li')!.textContent).toBe(
      `${EVIL} — 3× by 1 student`);
    expect(root.querySelector('.agio-class-student-runs[data-user="alice"] .agio-runs-row')!.getAttribute('data-run-id'))
      .toBe('run00001aaaa');
    expect(root.querySelector('.agio-class-student-runs[data-user="bob"]')!.textContent).toBe('bobno runs yet');
  });
});
