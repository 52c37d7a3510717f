/**
 * Saved batch summaries, plans, trace graphs and sweep comparisons, drawn from their bundles' data:
 *   application/vnd.agio.batch+json  (agio_notebook/notebook/batch_monitor.py)
 *   application/vnd.agio.plan+json   (agio_notebook/notebook/plan_view.py)
 *   application/vnd.agio.trace+json  (agio_notebook/memory/trace.py)
 *   application/vnd.agio.sweep+json  (agio_notebook/explore/sweep.py)
 *
 * They render in untrusted notebooks (a tutorial just opened), where JupyterLab shows no SVG output and
 * sanitises HTML: pictures are drawn here from the data (graph.ts). Text reaches the DOM through
 * textContent only; a bundle that cannot be read says so in one line.
 */
import { classToken, el } from './dom';
import { formatCost } from './explore';
import { drawGraph, parseLayout } from './graph';
import { counted } from './words';

export const BATCH_MIME_TYPE = 'application/vnd.agio.batch+json';
export const PLAN_MIME_TYPE = 'application/vnd.agio.plan+json';
export const TRACE_MIME_TYPE = 'application/vnd.agio.trace+json';
export const SWEEP_MIME_TYPE = 'application/vnd.agio.sweep+json';

const STATUS_COLORS: Record<string, string> = {
  completed: '#1a7f37', failed: '#cf222e', timed_out: '#bc4c00', cancelled: '#57606a', running: '#0969da', queued: '#8c959f'
};
const TASK_FILL: Record<string, string> = {
  pending: '#eaeef2', running: '#ddf4ff', reflecting: '#fff8c5', completed: '#dafbe1', failed: '#ffebe9', cancelled: '#f6f8fa'
};
const KIND_STYLE: Record<string, [string, string]> = {
  user: ['#ddf4ff', '#0969da'], memory_read: ['#fff8c5', '#9a6700'], model: ['#fbefff', '#8250df'],
  tool: ['#dafbe1', '#1a7f37'], context: ['#f6f8fa', '#8c959f'], action: ['#fff1e5', '#bc4c00']
};

function record(data: unknown, what: string): Record<string, any> {
  const value = typeof data === 'string' ? JSON.parse(data) : data;
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`this ${what} output cannot be read`);
  }
  return value as Record<string, any>;
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

function duration(seconds: unknown): string {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) {
    return '?';
  }
  const s = Math.max(seconds, 0);
  if (s < 60) {
    return `${s.toFixed(1)}s`;
  }
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** Wrap a renderer: a bundle it cannot read becomes one line, never a broken output. */
function guarded(cls: string, what: string, draw: (root: HTMLElement, data: unknown, doc: Document) => void) {
  return (data: unknown, doc: Document): HTMLElement => {
    const root = el(doc, 'div', [cls]);
    try {
      draw(root, data, doc);
    } catch (err) {
      root.replaceChildren(el(doc, 'div', ['agio-view-error'], `agio: cannot show this ${what} (${String((err as Error).message ?? err)})`));
    }
    return root;
  };
}

// -- batch ---------------------------------------------------------------------------------------

const SEGMENTS = ['completed', 'failed', 'timed_out', 'cancelled'];
const COUNTED = ['completed', 'failed', 'timed_out', 'cancelled', 'running', 'queued'];

/** The batch summary: state, a bar per status, counts, completed/s, cost so far, a latency histogram. */
export const renderBatch = guarded('agio-batch', 'batch', (root, data, doc) => {
  const d = record(data, 'batch');
  const total = count(d.total);
  const completed = count(d.completed);
  const status = String(d.status ?? '');
  const head = el(doc, 'div', ['agio-batch-head']);
  head.append(el(doc, 'b', [], `batch ${String(d.name ?? '')}`), ` · `,
    el(doc, 'span', ['agio-batch-status', `agio-batch-status-${classToken(status)}`], status),
    ` · ${completed}/${total} completed`);
  const bar = el(doc, 'div', ['agio-batch-track']);
  for (const k of SEGMENTS) {
    if (count(d[k]) > 0) {
      const seg = el(doc, 'div', ['agio-batch-bar', `agio-batch-bar-${k}`]);
      seg.style.width = `${(100 * count(d[k])) / (total || 1)}%`;
      seg.style.background = STATUS_COLORS[k];
      seg.title = `${count(d[k])} ${k.replace('_', ' ')}`;
      bar.append(seg);
    }
  }
  const counts = el(doc, 'div', ['agio-batch-counts']);
  COUNTED.filter(k => count(d[k]) > 0 || ['completed', 'failed', 'cancelled'].includes(k)).forEach((k, i) => {
    if (i) {
      counts.append(' · ');
    }
    const span = el(doc, 'span', [`agio-count-${k}`], `${count(d[k])} ${k.replace('_', ' ')}`);
    span.style.color = STATUS_COLORS[k];
    counts.append(span);
  });
  // the rate of completed items only (older bundles carry no completed_per_s)
  const rate = typeof d.completed_per_s === 'number' ? d.completed_per_s : completed / (count(d.elapsed_s) || 1);
  const cost = d.cost === null || d.cost === undefined ? 'unknown'
    : formatCost(d.cost) + (status === 'finished' ? '' : ' so far');
  const figures = [`${rate.toFixed(2)} completed/s`, `error rate ${Math.round(100 * count(d.error_rate))}%`,
    `tokens ${count(d.tokens).toLocaleString('en-US')}`, `cost ${cost}`];
  if (typeof d.avg_ms === 'number') {
    figures.push(`avg ${Math.round(d.avg_ms)} ms`);
  }
  figures.push(`elapsed ${duration(d.elapsed_s)}`);
  root.append(head, bar, counts, el(doc, 'div', ['agio-batch-figures'], figures.join(' · ')), histogram(doc, d.histogram));
  const errors: Record<string, any>[] = Array.isArray(d.last_errors) ? d.last_errors : [];
  if (errors.length) {
    const list = el(doc, 'ul');
    for (const e of errors) {
      const li = el(doc, 'li');
      li.append(el(doc, 'b', [], `item ${String(e.item ?? '')}`), `: ${String(e.error ?? '').slice(0, 300)}`);
      list.append(li);
    }
    const box = el(doc, 'div', ['agio-batch-errors'], 'last errors');
    box.append(list);
    root.append(box);
  }
});

function histogram(doc: Document, bins: unknown): HTMLElement {
  const list: Record<string, number>[] = Array.isArray(bins) ? bins : [];
  if (!list.length) {
    return el(doc, 'div', ['agio-batch-hist', 'agio-batch-hist-empty'], 'no completed item yet');
  }
  const box = el(doc, 'div', ['agio-batch-hist']);
  box.setAttribute('role', 'img');
  box.setAttribute('aria-label', 'latency histogram of completed items');
  const bars = el(doc, 'span', ['agio-batch-bins']);
  const top = Math.max(...list.map(b => count(b.count))) || 1;
  for (const b of list) {
    const bin = el(doc, 'span', ['agio-batch-bin']);
    bin.style.height = `${Math.max(1, Math.round((36 * count(b.count)) / top))}px`;
    bin.title = `${Math.round(count(b.start_ms))} to ${Math.round(count(b.end_ms))} ms: ${count(b.count)} item(s)`;
    bars.append(bin);
  }
  box.append(el(doc, 'span', ['agio-label'], 'latency'), bars,
    el(doc, 'span', ['agio-label', 'agio-batch-hist-range'],
      `from ${Math.round(count(list[0].start_ms))} ms to ${Math.round(count(list[list.length - 1].end_ms))} ms`));
  return box;
}

// -- plan ----------------------------------------------------------------------------------------

/** The plan's DAG as dot laid it out, each task coloured by state; a list when there is no layout. */
export const renderPlan = guarded('agio-plan', 'plan', (root, data, doc) => {
  const d = record(data, 'plan');
  const states: Record<string, Record<string, any>> = d.states ?? {};
  const tasks: Record<string, any>[] = Array.isArray(d.tasks) ? d.tasks : [];
  const head = el(doc, 'div', ['agio-plan-head']);
  head.append(el(doc, 'b', [], `plan ${String(d.name ?? '')}`), ` · ${String(d.status ?? '')}`);
  root.append(head);
  const stateOf = (name: string) => String(states[name]?.status ?? 'pending');
  const attemptsOf = (name: string) => count(states[name]?.attempts);
  const layout = parseLayout(d.layout);
  if (layout) {
    root.append(drawGraph(doc, layout, name => ({
      lines: [name, stateOf(name) + (attemptsOf(name) > 1 ? ` (attempt ${attemptsOf(name)})` : '')],
      fill: TASK_FILL[stateOf(name)] ?? '#ffffff', stroke: '#57606a',
      classes: ['agio-task', `agio-task-${classToken(stateOf(name))}`],
      title: String(states[name]?.error ?? stateOf(name))
    }), `plan ${String(d.name ?? '')}: ${tasks.length} task(s)`));
  } else {
    const list = el(doc, 'ol', ['agio-plan-list']);
    for (const t of tasks) {
      const name = String(t.name ?? '');
      const li = el(doc, 'li', ['agio-task', `agio-task-${classToken(stateOf(name))}`]);
      const after = Array.isArray(t.depends_on) && t.depends_on.length ? ` after ${t.depends_on.join(', ')}` : '';
      li.append(el(doc, 'span', ['agio-task-state'], stateOf(name)), ' ', el(doc, 'b', [], name), after);
      list.append(li);
    }
    root.append(list);
  }
  if (d.failed_task) {
    root.append(el(doc, 'div', ['agio-plan-error'], `task ${String(d.failed_task)} failed: ${String(d.error ?? '')}`));
  }
});

// -- trace ---------------------------------------------------------------------------------------

/** The run's trace graph: steps as boxes coloured by kind (dashed when superseded), parents as arrows. */
export const renderTrace = guarded('agio-trace-view', 'trace graph', (root, data, doc) => {
  const d = record(data, 'trace graph');
  const nodes: Record<string, any>[] = Array.isArray(d.nodes) ? d.nodes : [];
  const edges: unknown[] = Array.isArray(d.edges) ? d.edges : [];
  const byId = new Map(nodes.map(n => [String(n.id), n]));
  root.append(el(doc, 'div', ['agio-label'],
    `trace of run ${String(d.run_id ?? '').slice(0, 8)} · ${counted(nodes.length, 'step')}, ${counted(edges.length, 'edge')}`));
  const layout = parseLayout(d.layout);
  if (!layout) {
    const list = el(doc, 'ol', ['agio-trace-list']);
    nodes.forEach(n => list.append(el(doc, 'li', [`agio-node-${classToken(n.kind)}`], String(n.label ?? ''))));
    root.append(list);
    return;
  }
  root.append(drawGraph(doc, layout, id => {
    const n = byId.get(id) ?? {};
    const kind = String(n.kind ?? 'context');
    const [fill, stroke] = KIND_STYLE[kind] ?? KIND_STYLE.context;
    return { lines: [String(n.label ?? '')], fill, stroke, dashed: Boolean(n.superseded) || kind === 'context',
      classes: ['agio-trace-node', `agio-node-${classToken(kind)}`], title: `${kind} · ${String(n.status ?? '')}` };
  }, `trace graph of run ${String(d.run_id ?? '').slice(0, 8)}`));
});

// -- sweep ---------------------------------------------------------------------------------------

function fmt(v: unknown, column: string): string {
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    return column === 'cost' ? 'unknown' : '–';
  }
  if (column === 'cost') {
    return formatCost(v);
  }
  return column === 'total_tokens' || column === 'latency_ms' ? String(Math.round(v)) : v.toFixed(2);
}

/** Per variant: each mean with its interval and a bar, the best of each column in bold, the method named. */
export const renderSweep = guarded('agio-sweep', 'sweep', (root, data, doc) => {
  const d = record(data, 'sweep');
  const axes: string[] = Array.isArray(d.axes) ? d.axes.map(String) : [];
  const scores: string[] = Array.isArray(d.scores) ? d.scores.map(String) : [];
  const metrics: string[] = Array.isArray(d.metrics) ? d.metrics.map(String) : [];
  const columns = [...scores, ...metrics];
  const methods: Record<string, string> = d.methods ?? {};
  const variants: Record<string, any>[] = Array.isArray(d.variants) ? d.variants : [];
  const head = el(doc, 'div');
  head.append(el(doc, 'b', [], 'agio sweep'), ' ', el(doc, 'span', ['agio-label'],
    `step ${String(d.at ?? '')} of session ${String(d.source ?? '').slice(0, 8)} · ${count(d.runs)} runs · ` +
    'means with 95% intervals'));
  const table = el(doc, 'table', ['agio-sweep-table']);
  const hr = el(doc, 'tr');
  axes.forEach(a => hr.append(el(doc, 'th', [], a)));
  hr.append(el(doc, 'th', [], 'runs'));
  for (const c of columns) {
    const th = el(doc, 'th', [], c);
    th.append(el(doc, 'div', ['agio-sweep-method'], `95% ${String(methods[c] ?? '')}`));
    hr.append(th);
  }
  table.append(hr);
  const value = (v: Record<string, any>, c: string) => v.values?.[c] ?? {};
  const means = (c: string) => variants.map(v => value(v, c).mean).filter((m): m is number => typeof m === 'number');
  for (const v of variants) {
    const tr = el(doc, 'tr', ['agio-sweep-variant']);
    axes.forEach(a => tr.append(el(doc, 'td', [], String(v.labels?.[a] ?? ''))));
    tr.append(el(doc, 'td', ['agio-sweep-runs'], `${count(v.completed)}/${count(v.runs)}`));
    for (const c of columns) {
      const { mean, low, high } = value(v, c);
      const td = el(doc, 'td', [], fmt(mean, c));
      if (typeof low === 'number' && typeof high === 'number') {
        td.append(' ', el(doc, 'span', ['agio-label'], `[${fmt(low, c)}, ${fmt(high, c)}]`));
      }
      const all = means(c);
      const best = scores.includes(c) ? Math.max(...all) : Math.min(...all);
      if (typeof mean === 'number' && all.length && mean === best) {
        td.classList.add('agio-sweep-best');
      }
      const top = Math.max(...variants.map(x => value(x, c).high ?? value(x, c).mean).filter((m): m is number => typeof m === 'number'));
      if (typeof mean === 'number' && top > 0) {
        const bar = el(doc, 'div', ['agio-sweep-bar']);
        bar.style.width = `${Math.max(1, (100 * mean) / top)}%`;
        td.append(bar);
      }
      tr.append(td);
    }
    table.append(tr);
  }
  root.append(head, table);
});
