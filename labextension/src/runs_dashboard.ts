/** The class dashboard as DOM (pure; drawn in a tab by runs_views.ts). Untrusted text goes in as text only. */
import { classToken, el } from './dom';
import type { Dashboard } from './runs_api';
import { runRow, when } from './runs_list';

/** The class dashboard: student × exercise, the common failing reasons, each student's latest runs. */
export function renderDashboard(doc: Document, d: Dashboard): HTMLElement {
  const root = el(doc, 'div', ['agio-class-dashboard']);
  root.append(el(doc, 'div', ['agio-header'], `Class · teacher ${d.teacher ?? '?'} · ${d.students.length} students`));
  const grid = el(doc, 'table', ['agio-class-grid']);
  const head = el(doc, 'tr');
  head.append(el(doc, 'th', [], 'student'), ...d.exercises.map(e => el(doc, 'th', [], e)));
  grid.append(head);
  const cells = new Map(d.cells.map(c => [`${c.user}\u0000${c.exercise}`, c]));
  for (const student of d.students) {
    const tr = el(doc, 'tr');
    tr.dataset.user = student;
    tr.append(el(doc, 'th', ['agio-class-student'], student));
    for (const exercise of d.exercises) {
      const c = cells.get(`${student}\u0000${exercise}`);
      const td = el(doc, 'td', ['agio-class-cell', c ? (c.passed ? 'agio-class-passed' : 'agio-class-failing') : 'agio-class-none']);
      td.dataset.user = student;
      td.dataset.exercise = exercise;
      if (c) {
        td.append(el(doc, 'span', ['agio-class-mark'], c.passed ? '✓ passed' : '✗ not yet'),
          el(doc, 'span', ['agio-class-attempts'], ` · ${c.attempts} ${c.attempts === 1 ? 'attempt' : 'attempts'}`));
        if (c.last_reason) {
          td.append(el(doc, 'div', ['agio-class-reason'], c.last_reason));
        }
        td.title = `last attempt ${when(c.last_time)}`;
      } else {
        td.textContent = '—';
      }
      tr.append(td);
    }
    grid.append(tr);
  }
  root.append(grid);
  const failing = el(doc, 'div', ['agio-class-failing-reasons']);
  failing.append(el(doc, 'div', ['agio-label'], 'most common failing reasons'));
  for (const [exercise, reasons] of Object.entries(d.failing)) {
    const box = el(doc, 'div', ['agio-class-exercise']);
    box.dataset.exercise = exercise;
    box.append(el(doc, 'b', [], exercise));
    const ul = el(doc, 'ul');
    for (const r of reasons) {
      ul.append(el(doc, 'li', [], `${r.reason} — ${r.count}× by ${r.students} ${r.students === 1 ? 'student' : 'students'}`));
    }
    box.append(ul);
    failing.append(box);
  }
  if (!Object.keys(d.failing).length) {
    failing.append(el(doc, 'div', [], d.cells.length ? 'no failing attempts' : 'no exercise checked yet'));
  }
  root.append(failing);
  const latest = el(doc, 'div', ['agio-class-latest']);
  latest.append(el(doc, 'div', ['agio-label'], "each student's latest runs (click one for its transcript)"));
  for (const student of d.students) {
    const box = el(doc, 'div', ['agio-class-student-runs', `agio-class-user-${classToken(student)}`]);
    box.dataset.user = student;
    box.append(el(doc, 'b', [], student));
    const runs = d.latest_runs[student] ?? [];
    box.append(...(runs.length ? runs.map(r => runRow(doc, r, false, false)) : [el(doc, 'div', ['agio-label'], 'no runs yet')]));
    latest.append(box);
  }
  root.append(latest);
  return root;
}

