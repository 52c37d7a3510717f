/**
 * The Runs panel's list as DOM, from rows the server sent: pure functions (tested with jsdom).
 * Untrusted text (queries, agent names, errors) reaches the page through textContent only.
 */
import { classToken, el } from './dom';
import { formatCost } from './explore';
import type { Choice, RunRow } from './runs_api';

export const STATUSES = ['running', 'completed', 'failed', 'cancelled', 'max_steps', 'budget_exceeded', 'interrupted'];

/** A start time as the list shows it: the time today, else the date and time. */
export function when(seconds: number, now: Date = new Date()): string {
  const d = new Date(seconds * 1000);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return d.toDateString() === now.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}

/** A query cut to its first words. */
export function firstWords(text: string, words = 12): string {
  const parts = text.replace(/\s+/g, ' ').trim().split(' ');
  return parts.length > words ? parts.slice(0, words).join(' ') + ' …' : parts.join(' ');
}

export function duration(ms: number | null): string {
  if (ms === null || ms === undefined) {
    return '';
  }
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

/** One run as a row: a box to pick it for a diff, what it did, and a button for its session's tree. */
export function runRow(doc: Document, run: RunRow, picked: boolean, showUser: boolean): HTMLElement {
  const row = el(doc, 'div', ['agio-runs-row', `agio-runs-${classToken(run.status)}`]);
  row.dataset.runId = run.id;
  row.dataset.sessionId = run.session_id;
  row.tabIndex = 0;
  row.title = `run ${run.id.slice(0, 8)} · session ${run.session_id.slice(0, 8)}` +
    (run.notebook_path || run.notebook ? ` · ${run.notebook_path ?? run.notebook}` : '') + (run.error ? `\n${run.error}` : '');
  const pick = doc.createElement('input');
  pick.type = 'checkbox';
  pick.className = 'agio-runs-pick';
  pick.checked = picked;
  pick.title = 'pick two runs to compare them';
  pick.setAttribute('aria-label', `pick run ${run.id.slice(0, 8)} to compare`);
  const head = el(doc, 'div', ['agio-runs-head']);
  head.append(el(doc, 'span', ['agio-runs-agent'], run.agent ?? 'agent'),
    el(doc, 'span', ['agio-status', `agio-status-${classToken(run.status)}`, 'agio-runs-status'], run.status));
  if (run.kind !== 'run') {
    head.append(el(doc, 'span', ['agio-runs-kind'], run.kind));
  }
  if (run.superseded_by) {
    head.append(el(doc, 'span', ['agio-runs-superseded'], 'superseded'));
  }
  if (showUser && run.user) {
    head.append(el(doc, 'span', ['agio-runs-user'], run.user));
  }
  head.append(el(doc, 'span', ['agio-runs-when'], when(run.started_at)));
  const facts = [`${run.steps} steps`, run.tokens === null ? 'tokens unknown' : `${run.tokens} tokens`,
    formatCost(run.cost), duration(run.duration_ms)].filter(Boolean);
  const meta = el(doc, 'div', ['agio-runs-meta']);
  meta.append(el(doc, 'span', ['agio-runs-facts'], facts.join(' · ')));
  if (run.notebook_path || run.notebook) {
    meta.append(el(doc, 'span', ['agio-runs-notebook'], (run.notebook_path ?? run.notebook ?? '').split('/').pop() ?? ''));
  }
  const tree = el(doc, 'button', ['agio-runs-tree'], 'tree') as HTMLButtonElement;
  tree.type = 'button';
  tree.title = "this run's session as a tree: its runs, retries and forks";
  const body = el(doc, 'div', ['agio-runs-body']);
  body.append(head, el(doc, 'div', ['agio-runs-query'], firstWords(run.query || '(no query)')), meta);
  row.append(pick, body, tree);
  return row;
}

/** A filter as a select (its choices come with `setChoices`). */
export function filterSelect(doc: Document, name: string, label: string): HTMLSelectElement {
  const select = doc.createElement('select');
  select.className = 'agio-runs-filter';
  select.dataset.filter = name;
  select.title = label;
  select.setAttribute('aria-label', label);
  setChoices(select, [], '');
  return select;
}

/** A filter's choices, the first "any"; the chosen value stays chosen even if no run has it any more. */
export function setChoices(select: HTMLSelectElement, choices: Choice[], value: string): void {
  const doc = select.ownerDocument;
  const any = doc.createElement('option');
  any.value = '';
  any.textContent = `any ${select.title}`;
  const known = choices.some(c => c.value === value);
  const options = (known || !value ? choices : [...choices, { value, label: value }]).map(c => {
    const o = doc.createElement('option');
    o.value = c.value;
    o.textContent = c.label;
    return o;
  });
  select.replaceChildren(any, ...options);
  select.value = value;
}
